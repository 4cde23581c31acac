// The run report's rollout viewer: filters over the rollouts embedded in the page, and a
// transcript pane. Inlined into the page; no libraries, no network. Every piece of text
// from the run goes in through textContent (model output is untrusted), never innerHTML.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("rollout-data").textContent);
  const rollouts = data.rollouts;
  const LIMIT = 400;
  const state = { evaluation: String(data.initial_evaluation), model: "all", difficulty: "all", reward: "all" };

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function modelOf(r) { return r.role + " · " + (r.model || "–"); }

  function taskOf(r) { return r.idx === null || r.idx === undefined ? (r.task || "–") : "idx " + r.idx; }

  function rewardClass(r) {
    if (r.reward === null) return "unscored";
    if (r.reward >= data.solve_threshold) return "solved";
    if (r.reward <= 0) return "zero";
    return "partial";
  }

  function uniq(values) { return Array.from(new Set(values)).sort(); }

  function chips(container, name, values, labels) {
    const group = document.getElementById(container);
    ["all"].concat(values).forEach((value) => {
      const chip = el("button", { type: "button", class: "chip", "data-filter": name, "data-value": value,
                                  "aria-pressed": String(state[name] === value) }, labels[value] || value);
      chip.addEventListener("click", () => {
        state[name] = value;
        group.querySelectorAll(".chip").forEach((c) => c.setAttribute("aria-pressed", String(c === chip)));
        render();
      });
      group.appendChild(chip);
    });
  }

  function matches(r) {
    return (state.evaluation === "all" || String(r.n) === state.evaluation) &&
      (state.model === "all" || modelOf(r) === state.model) &&
      (state.difficulty === "all" || (r.difficulty || "–") === state.difficulty) &&
      (state.reward === "all" || rewardClass(r) === state.reward);
  }

  function fmt(x) { return x === null || x === undefined ? "–" : (Math.round(x * 1000) / 1000).toString(); }

  function render() {
    const shown = rollouts.filter(matches);
    const body = document.querySelector("#rollout-list tbody");
    body.replaceChildren();
    shown.slice(0, LIMIT).forEach((r) => {
      const row = el("tr", { "data-id": r.id, "data-n": r.n });
      [["#" + r.n, "", r.commit], [taskOf(r), "", r.task || ""], [r.id, "", ""], [r.role, "", r.model || ""],
       [r.difficulty || "–", "", ""],
       [r.reward === null ? "no score" : fmt(r.reward),
        "num " + (r.reward === null ? "no-data" : r.reward > 0 ? "reward-ok" : "reward-zero"), ""],
       [r.outcome, "", r.error || ""]]
        .forEach(([text, cls, title]) => row.appendChild(el("td", { class: cls, title: title }, text)));
      row.addEventListener("click", () => {
        body.querySelectorAll("tr.selected").forEach((x) => x.classList.remove("selected"));
        row.classList.add("selected");
        showTranscript(r);
      });
      body.appendChild(row);
    });
    const count = document.getElementById("rollout-count");
    count.textContent = shown.length + " of " + rollouts.length + " rollouts" +
      (shown.length > LIMIT ? " (the first " + LIMIT + " listed: narrow the filters)" : "");
    count.setAttribute("data-shown", String(shown.length));
  }

  function showTranscript(r) {
    const pane = document.getElementById("transcript");
    pane.replaceChildren();
    pane.appendChild(el("h3", {}, "Rollout " + r.id + " (evaluation #" + r.n + ", " + r.commit + ")"));
    pane.appendChild(el("p", {}, modelOf(r) + " · task idx " + fmt(r.idx) + " · difficulty " + (r.difficulty || "–") +
      " · category " + (r.category || "–")));
    pane.appendChild(el("p", { class: "task-id" }, "task id: " + (r.task || "–")));
    pane.appendChild(el("p", { class: "answer" }, "reference answer: " +
      (r.answer === null || r.answer === undefined ? "– (the task keeps none)" : r.answer)));
    pane.appendChild(el("p", {}, "outcome " + r.outcome + " · reward " + (r.reward === null ? "no score" : fmt(r.reward)) +
      " · stop " + (r.stop || "–") +
      (r.error ? " · error: " + r.error : "")));
    const parts = Object.entries(r.components).map(([k, v]) => k + " " + fmt(v) + " (weight " + fmt(r.weights[k]) + ")");
    pane.appendChild(el("p", {}, "reward components: " + (parts.join(", ") || "–")));
    if (!r.messages.length) pane.appendChild(el("p", { class: "muted" }, "No messages: the rollout failed before any."));
    r.messages.forEach((m) => {
      const box = el("div", { class: "msg " + m.role });
      box.appendChild(el("div", { class: "who" }, m.role + (m.name ? " (" + m.name + ")" : "")));
      if (m.text) box.appendChild(el("pre", {}, m.text));
      m.calls.forEach((c) => box.appendChild(el("div", { class: "call" }, "→ tool call " + c[0] + "(" + c[1] + ")")));
      pane.appendChild(box);
    });
  }

  const select = document.getElementById("filter-evaluation");
  select.appendChild(el("option", { value: "all" }, "all evaluations"));
  data.evaluations.forEach((e) => select.appendChild(el("option", { value: String(e.n) },
    "#" + e.n + " " + e.commit + " " + e.verdict + " (" + e.rollouts + " rollouts)")));
  select.value = state.evaluation;
  select.addEventListener("change", () => { state.evaluation = select.value; render(); });
  chips("filter-model", "model", uniq(rollouts.map(modelOf)), {});
  const levels = data.difficulties.concat(rollouts.some((r) => !r.difficulty) ? ["–"] : []);
  chips("filter-difficulty", "difficulty", levels, {});  // easy < medium < hard, never alphabetical
  chips("filter-reward", "reward", ["zero", "partial", "solved", "unscored"],
        { zero: "0", partial: "partial", solved: "solved (≥ " + data.solve_threshold + ")", unscored: "errors" });
  render();
})();
