"""The review commands' terminal output: rich tables and transcripts on display's consoles.

The only review module that builds rich objects. display's consoles read no markup, so
text from the run (descriptions, reasons, judge findings, model output) prints as
written, and colour comes only from `Text` styles. When stdout is not a terminal (an
agent's shell, a log file) tables lose their borders and colour, so they stay plain.
"""

from __future__ import annotations

from rich import box
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from autoenv.core import display
from autoenv.core.config import Bands
from autoenv.core.formats import mean_ci, number
from autoenv.core.levels import natural_order
from autoenv.core.record import Entry
from autoenv.review.compare import TOO_FEW, Comparison, Difference, TaskPair
from autoenv.review.rows import Row, clip, money, point_text, short_time, sparkline
from autoenv.review.run import Run
from autoenv.review.transcripts import Transcript

NARROW = 100
"""Below this many columns `log` and `show` stack their fields instead of printing wide tables."""

VERDICT_STYLE = {"baseline": "bold cyan", "keep": "bold green", "discard": "red", "inconclusive": "yellow", "crash": "bold magenta",
                 "tampered": "bold red", "cached": "blue"}
SHOWN_TASKS = 10


def plain() -> bool:
    return display.console.no_color or not display.console.is_terminal


def table(title: str | None = None) -> Table:
    return Table(title=title, title_justify="left", box=None if plain() else box.SIMPLE_HEAD,
                 pad_edge=False, padding=(0, 1), header_style="bold")


def _plainly(t: Table) -> Table:
    """display's tables in this module's style: no borders when not on a terminal."""
    if plain():
        t.box = None
        t.pad_edge = False
    return t


def narrow() -> bool:
    return display.console.width < NARROW


def out(*renderables) -> None:
    """Print; in a narrow terminal long lines wrap at its width instead of running past it."""
    for item in renderables:
        display.console.print(item, soft_wrap=not narrow())


def verdict_text(verdict: str) -> Text:
    return Text(verdict, style=VERDICT_STYLE.get(verdict, ""))


# ---- autoenv log -------------------------------------------------------------------------


def log_view(run: Run) -> None:
    if not run.rows:
        out(f"{run.label}: no evaluations yet" + (" (no ledger and no git notes)" if run.source == "none" else ""),
            "  commit a candidate and run `bash evaluate.sh`; `autoenv log --tag TAG` shows another run")
        apart_line(run)
        return
    if narrow():
        return stacked_log(run)
    many = run.branch is None
    headers = ["#", "commit"] + (["run"] if many else []) + ["time (UTC)", "target [95% CI]", "strong",
                                                               "learn", "gates", "verdict", "cost", "", "description"]
    rows = []
    for r in run.rows:
        marks = row_marks(r)
        gates = Text("–" if r.gates is None else "pass" if r.gates == "pass" else f"fail {len(r.gates_failed) or ''}",
                     style="red" if r.gates == "fail" else "")
        rows.append([Text(str(r.number)), Text(r.short), *([Text((r.branch or "–").removeprefix("autoenv/"))] if many else []),
                     Text(short_time(r.time)), Text(point_text(r.target, 2)),
                     Text(number(r.strong.mean if r.strong else None, 2)),
                     Text(number(r.learnable, 2)), gates, Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "")),
                     Text(money(r.cost)), Text(marks.strip(), style="bold"), Text(r.description or "–")])
    # every column keeps its full width; the description takes what is left of the line
    widths = [max([len(name)] + [len(row[i].plain) for row in rows]) for i, name in enumerate(headers)]
    room = max(16, display.console.width - sum(widths[:-1]) - (2 if plain() else 3) * len(headers) - 2)
    t = table()
    for name, width in zip(headers, widths):
        t.add_column(name, justify="right" if name in ("#", "strong", "learn", "cost") else "left", no_wrap=True,
                     min_width=width if name != "description" else None,
                     max_width=room if name == "description" else None)
    for row in rows:
        row[-1] = Text(clip(row[-1].plain, room))
        t.add_row(*row)
    kept = sum(r.kept for r in run.rows)
    last = run.last_kept
    out(Text(f"{run.label}: {len(run.rows)} evaluations, {kept} kept"
             + (f", last kept (◀) #{last.number} {last.short}" if last else "")
             + ("" if run.source == "ledger" else f" (from {run.source}: the ledger is missing)"), style="bold"), t)
    out(Text(f"target mean  {sparkline([r.target.mean if r.target else None for r in run.rows])}  "
             "(one mark per evaluation, 0 to 1; a gap: no scores)"))
    apart_line(run)


def apart_line(run: Run) -> None:
    """Where the `eval --env` evaluations went: they are not the run's, so its rows leave them out."""
    if run.apart:
        n = len(run.apart)
        out(Text(f"and {n} `autoenv eval --env` evaluation{'s' * (n != 1)} of another environment, recorded apart "
                 "(not counted above): autoenv log --env"))


def env_log_view(run: Run, feedback: list[str | None]) -> None:
    """`autoenv log --env`: the run branch's evaluations of other environments, each with its own feedback file."""
    if not run.apart:
        out(f"{run.label}: no `autoenv eval --env` evaluations (of another environment, recorded apart from the run)")
        return
    t = table()
    for name in ("#", "environment", "commit", "time (UTC)", "target [95% CI]", "strong", "gates", "verdict", "cost"):
        t.add_column(name, justify="right" if name in ("#", "strong", "cost") else "left", no_wrap=True)
    for r in run.apart:
        gates = "–" if r.gates is None else "pass" if r.gates == "pass" else f"fail {len(r.gates_failed) or ''}".strip()
        t.add_row(Text(str(r.number)), Text(r.environment or "–"), Text(r.short), Text(short_time(r.time)),
                  Text(point_text(r.target, 2)), Text(number(r.strong.mean if r.strong else None, 2)),
                  Text(gates, style="red" if r.gates == "fail" else ""), verdict_text(r.verdict), Text(money(r.cost)))
    n = len(run.apart)
    out(Text(f"{run.label}: {n} `autoenv eval --env` evaluation{'s' * (n != 1)} of other environments, recorded "
             "apart from the run's (each compared only with the same environment content)", style="bold"), t,
        Text("feedback (one file per evaluation):"),
        *(Text(f"  #{r.number} {path or '– (missing)'}") for r, path in zip(run.apart, feedback)))


def _heading(run: Run) -> Text:
    kept = sum(r.kept for r in run.rows)
    last = run.last_kept
    return Text(f"{run.label}: {len(run.rows)} evaluations, {kept} kept"
                + (f", last kept (◀) #{last.number} {last.short}" if last else "")
                + ("" if run.source == "ledger" else f" (from {run.source}: the ledger is missing)"), style="bold")


def row_marks(r: Row) -> str:
    """What a log row is besides its numbers: the last kept, a broken chain, a cache hit (→ the commit it points
    at), a rescore (↻ the commit whose rollouts it scored again)."""
    return (("◀ kept" if r.last_kept else "") + (" ⚠ chain broken" if r.tampered else "")
            + (f" → {r.cached_from[:8]}" if r.cached_from else "")
            + (f" ↻ rescored {r.rescored_from[:8]}" if r.rescored_from else "")).strip()


def stacked_log(run: Run) -> None:
    """`autoenv log` under NARROW columns: each evaluation on three short lines, nothing cut but the description."""
    width = display.console.width
    out(_heading(run))
    for r in run.rows:
        marks = row_marks(r)
        head = Text.assemble(f"#{r.number} {r.short} {short_time(r.time)}"
                             + (f" {(r.branch or '–').removeprefix('autoenv/')}" if run.branch is None else "") + " ",
                             verdict_text(r.verdict), (" " + marks.strip()) if marks.strip() else "")
        gates = "–" if r.gates is None else "pass" if r.gates == "pass" else f"fail {len(r.gates_failed) or ''}".strip()
        numbers = (f"   target {point_text(r.target, 2)} · strong {number(r.strong.mean if r.strong else None, 2)}"
                   f" · learn {number(r.learnable, 2)} · gates {gates} · cost {money(r.cost)}")
        head.truncate(width, overflow="ellipsis")
        out(head, Text(fit(numbers, width)), Text("   " + clip(r.description or "–", width - 3)))
    out(Text(fit(f"target mean  {sparkline([r.target.mean if r.target else None for r in run.rows])}  "
                 "(0 to 1; a gap: no scores)", width)))
    apart_line(run)


def fit(text: str, width: int) -> str:
    """One line cut to `width` with an ellipsis, its spacing kept (a sparkline's gaps are data)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def stacked_summary(stats: dict) -> list[Text]:
    """The evaluation summary as lines, one block per model (no column is cut)."""
    lines = [Text("Evaluation summary", style="bold")]
    for role, s in stats.items():
        e = s.errors
        lines += [Text(f"{role} {s.model}", style="bold"),
                  Text(f"  mean {mean_ci(s)} · std {number(s.std)} · solve {number(s.solve_rate)}"),
                  Text(f"  disagree {number(s.disagree_share)} · scored {s.scored}/{s.rollouts} · errors p/t/e "
                       f"{e.provider_error}/{e.timeout}/{e.env_error}"),
                  Text(f"  tokens {s.input_tokens} in" + (f" ({s.cached_input_tokens} cached)" if s.cached_input_tokens
                                                          else "") + f" / {s.output_tokens} out")]
    return lines


# ---- autoenv log --agent -----------------------------------------------------------------


AGENT_COLUMNS = ("time (UTC)", "event", "launch", "ended by", "seconds", "cost", "tokens in/out", "evals", "commits",
                 "refused", "detail")
DETAIL_ROOM = 28
"""The least room the detail column needs for the table; with less, `log --agent` stacks its events."""


def agent_view(label: str, events: list[dict]) -> None:
    """The driver's events (autoenv.driver.state): one row per start, launch, nudge and stop; in a terminal
    too narrow for the table, each event on a line of its own with its numbers under it (`stacked_agent`)."""
    if not events:
        out(f"{label}: no `autoenv run` on this run yet (outputs/agent/<tag>/events.jsonl is missing)")
        return
    launches = [e for e in events if e.get("event") == "launch"]
    agent_usd = 0.0
    for e in launches:
        agent_usd += float(e["cost_usd"] if e.get("cost_usd") is not None else e.get("priced_usd") or 0.0)
    nudges = sum(e.get("event") == "nudge" for e in events)
    heading = Text(f"{label}: {len(launches)} agent launch{'es' * (len(launches) != 1)}, "
                   f"{nudges} nudge{'s' * (nudges != 1)}, agent {money(agent_usd)}", style="bold")
    rows = [(e.get("event", "?"), short_time(e.get("time")), _agent_cells(e)) for e in events]
    widths = [max([len(name)] + [len(cells[i]) for _, _, cells in rows]) for i, name in enumerate(AGENT_COLUMNS[2:-1])]
    needed = len("11-27 02:55") + len("launch") + sum(widths) + DETAIL_ROOM + 2 * (len(AGENT_COLUMNS) - 1)
    if display.console.width < needed:
        return stacked_agent(heading, events)
    t = table()
    for name in AGENT_COLUMNS:
        t.add_column(name, justify="right" if name in ("launch", "seconds", "cost", "evals", "commits", "refused")
                     else "left", no_wrap=name != "detail", overflow="fold")
    for kind, time, cells in rows:
        style = "bold" if kind in ("start", "stop") else "yellow" if kind == "nudge" else ""
        t.add_row(Text(time), Text(kind, style=style), *(Text(c) for c in cells))
    out(heading, t)


def _agent_cells(e: dict) -> list[str]:
    """One event's cells under AGENT_COLUMNS[2:]: launch, ended by, seconds, cost, tokens, evals, commits,
    refused, detail."""
    kind = e.get("event", "?")
    if kind == "launch":
        return [str(e.get("launch", "")), str(e.get("ended_by", "")), number(e.get("seconds"), 1), _launch_cost(e),
                f"{e.get('input_tokens', 0)}/{e.get('output_tokens', 0)}", str(e.get("evals", "")),
                str(e.get("commits", "")), str(e.get("denials", "")), _launch_detail(e)]
    if kind == "start":
        return ["", "", "", "", "", "", "", "", _start_detail(e)]
    if kind == "nudge":
        return [str(e.get("launch", "")), "", "", "", "", "", "", "", _nudge_detail(e)]
    spend = e.get("spend") or {}
    return ["", "", number(spend.get("seconds"), 0), money(spend.get("usd")), "", str(spend.get("evals", "")),
            "", "", str(e.get("reason", ""))]


def _launch_cost(e: dict) -> str:
    cost = e.get("cost_usd")
    return money(cost if cost is not None else e.get("priced_usd")) + ("" if cost is not None else " est.")


def _launch_detail(e: dict) -> str:
    return (("resume " if e.get("resume") else "start ") + f"exit {e.get('exit_code')}"
            + (f"; {e['subtype']}" if e.get("subtype") not in (None, "success") else "")
            + ("; error: " + clip(str(e.get("result", "")), 80) if e.get("is_error") else ""))


def _start_detail(e: dict) -> str:
    limits = e.get("limits") or {}
    return (f"{e.get('agent')} session {str(e.get('session_id'))[:8]}{' (resumed)' if e.get('resumed') else ''}; "
            f"budgets: {limits.get('evals')} evals, {limits.get('hours')} h, ${limits.get('usd')}")


def _nudge_detail(e: dict) -> str:
    return f"no commit and no evaluation for {e.get('stall_minutes')} min: resumed with a nudge"


def stacked_agent(heading: Text, events: list[dict]) -> None:
    """`log --agent` in a narrow terminal: each event on its own line(s), what it says first (the stop
    reason whole), its numbers indented under it; every line wrapped at the width, nothing cut."""
    width = display.console.width
    out(Text("\n".join(display.wrap(heading.plain, width, 2)), style="bold"))
    for e in events:
        kind = e.get("event", "?")
        if kind == "launch":
            head = f"launch {e.get('launch', '')}: {_launch_detail(e)}, ended by {e.get('ended_by', '')}"
            facts = [f"{number(e.get('seconds'), 1)} s", f"cost {_launch_cost(e)}",
                     f"tokens {e.get('input_tokens', 0)}/{e.get('output_tokens', 0)}", f"evals {e.get('evals', '')}",
                     f"commits {e.get('commits', '')}", f"refused {e.get('denials', '')}"]
        elif kind == "start":
            head, facts = f"start: {_start_detail(e)}", []
        elif kind == "nudge":
            head, facts = f"nudge (launch {e.get('launch', '')}): {_nudge_detail(e)}", []
        else:
            spend = e.get("spend") or {}
            head = f"{kind}: {e.get('reason', '')}"
            facts = [f"after {number(spend.get('seconds'), 0)} s", f"cost {money(spend.get('usd'))}",
                     f"evals {spend.get('evals', '')}"]
        style = "bold" if kind in ("start", "stop") else "yellow" if kind == "nudge" else ""
        time = f"{short_time(e.get('time'))} "
        lines = display.wrap(time + head, width, 3)
        first = Text(time)
        first.append(lines[0][len(time):], style=style)
        out(first, *(Text(line, style=style) for line in lines[1:]),
            *(Text(line) for line in display.wrap("   " + " · ".join(facts), width, 3) if facts))


# ---- autoenv show ------------------------------------------------------------------------


def show_view(row: Row, bands: Bands, files: dict[str, str], examples: list[Transcript]) -> None:
    entry = row.entry
    out(Text(f"Evaluation #{row.number} of {row.branch or 'the run'}: {row.commit}", style="bold"))
    facts = [f"time {short_time(row.time)} UTC"] + (["offline (scripted policies)"] if row.offline else [])
    out(f"  {' · '.join(facts)}", f"  description: {row.description or '–'}",
        Text.assemble("  verdict: ", verdict_text(row.verdict), f" — {row.reason}"))
    if entry is None:
        out("  (from the git note only: the ledger is missing, so statistics, gates and the judge are unknown)")
        return
    if row.cached_from:
        out(f"  a cache hit: no model was called; the numbers, traces and plot below are those of "
            f"{row.cached_from[:12]} (verdict {entry.verdict.verdict})")
    elif entry.verdict.compared_to:
        out(f"  compared to the last kept {entry.verdict.compared_to[:12]}")
    if not entry.eval_success:
        out(Rule("failed", style="red", align="left"), f"  stage: {entry.failed_stage or '–'}",
            Text((entry.error or "").strip()))
    if entry.stats:
        if narrow():
            out(*stacked_summary(entry.stats), *_stacked_costs(entry))
        else:
            out(_plainly(display.summary_table(entry.stats, bands)), _costs(entry))
        for title, tab in (("Per difficulty", _groups(entry, "by_difficulty")), ("Per category", _groups(entry, "by_category")),
                           ("Per reward component (mean score)", _components(entry))):
            if tab.row_count:
                tab.title = title
                out(tab)
    if entry.gates is not None:
        out(*(_plainly(t) for t in display.gates_tables(entry.gates)))
        for failed in entry.gates.failed:
            out(Text(f"failed gate: {failed}", style="red"))
    else:
        out("gates: did not run (or not recorded by this harness version)")
    _judge(entry)
    timing = " · ".join(f"{k} {v:.1f} s" for k, v in entry.timings.items())
    out(f"timings: {timing or '–'}" + (f" · total {sum(entry.timings.values()):.1f} s" if entry.timings else ""))
    out(*(f"{name}: {path}" for name, path in files.items()))
    if examples:
        ids = ", ".join(f"{t.id} ({number(t.rollout.reward, 2)})" for t in examples)
        out(f"rollouts, e.g. {ids}", f"  read one: autoenv show {row.short} --rollout {examples[0].id}")


def _costs(entry: Entry) -> str:
    parts = []
    for role, s in entry.stats.items():
        latency = f"{number(s.mean_seconds, 2)} s mean, {number(s.p90_seconds, 2)} s p90"
        parts.append(f"{role}: latency {latency}; cost {money(s.cost_usd)}")
    judge = entry.judge.cost_usd if entry.judge else None
    return "  " + "; ".join(parts) + f"; judge {money(judge)}"


def _stacked_costs(entry: Entry) -> list[str]:
    lines = [f"  {role}: latency {number(s.mean_seconds, 2)} s mean, {number(s.p90_seconds, 2)} s p90 · "
             f"cost {money(s.cost_usd)}" for role, s in entry.stats.items()]
    return lines + [f"  judge cost {money(entry.judge.cost_usd if entry.judge else None)}"]


def _groups(entry: Entry, attr: str) -> Table:
    t = table()
    t.add_column("group")
    names = [name for s in entry.stats.values() for name in getattr(s, attr)]
    names = natural_order(names) if attr == "by_difficulty" else sorted(set(names))
    for role in entry.stats:
        t.add_column(f"{role} mean (n)", justify="right")
    for name in names:
        cells = []
        for s in entry.stats.values():
            group = getattr(s, attr).get(name)
            cells.append(f"{number(group.mean)} ({group.n})" if group else "–")
        t.add_row(name, *cells)
    return t


def _components(entry: Entry) -> Table:
    t = table()
    t.add_column("component")
    for role in entry.stats:
        t.add_column(role, justify="right")
    for name in sorted({n for s in entry.stats.values() for n in s.components}):
        t.add_row(name, *(number(s.components.get(name)) for s in entry.stats.values()))
    return t


def _judge(entry: Entry) -> None:
    judge = entry.judge
    if judge is None:
        out("judge: none (crashed evaluations and older entries have no review)")
        return
    f = judge.findings
    head = f"Judge ({judge.backend}{', ' + judge.model if judge.model and judge.backend != 'offline' else ''})"
    out(Rule(head, align="left"))
    if not judge.ok:
        out(Text(f"the {judge.backend} judge failed: {judge.error or ''}; the offline review stands in", style="red"))
    out(Text(f.summary))
    for i, p in enumerate(f.priorities, 1):
        out(f"  {i}. {p.issue} — {p.fix}")
    for hack in f.reward_faithfulness.suspected_hacks:
        out(f"  suspected hack: {hack.description} (evidence: {', '.join(hack.evidence) or '–'})")
    score = f.spec_fidelity.score
    fidelity = f"{score}/10" if score is not None else "not scored"
    out(f"  spec fidelity {fidelity}; RL readiness: {f.rl_readiness.assessment}")
    if judge.cost_usd is not None or judge.turns is not None:
        out(f"  judge spend: {judge.turns or '–'} turns, {money(judge.cost_usd)}")


SHOWN_CHARS = 4000


def cut(text: str, full: bool = False, limit: int = SHOWN_CHARS) -> str:
    """`text`, or its first `limit` characters and a marker saying how much is left out."""
    if full or len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters cut; --full shows all]"


def transcript_view(t: Transcript, full: bool = False) -> None:
    r = t.rollout
    out(Text(f"Rollout {t.id} · {t.role} · {t.model or '–'}", style="bold"),
        Text(f"task idx {number(r.idx)} · difficulty {r.difficulty or '–'} · category {r.category or '–'}"),
        Text(f"outcome {r.outcome} · reward {number(r.reward)} · stop {t.stop or '–'} · {r.turns} turns · "
             f"{r.input_tokens} in" + (f" ({r.cached_input_tokens} cached)" if r.cached_input_tokens else "")
             + f" / {r.output_tokens} out tokens · {r.seconds:.2f} s"))
    if r.error:
        out(Text(f"error: {cut(r.error, full, 1000)}", style="red"))
    components = ", ".join(f"{k} {v:g} (weight {r.weights.get(k, 1.0):g})" for k, v in r.components.items())
    metrics = ", ".join(f"{k} {v:g}" for k, v in t.metrics.items())
    out(Text(f"reward components: {components or '–'}" + (f" · metrics: {metrics}" if metrics else "")))
    for m in t.messages:
        out(Rule(Text(m.role + (f" ({m.name})" if m.name else "")), align="left", style="cyan"))
        if m.text:
            out(Text(cut(m.text, full)))
        for call in m.tool_calls:
            out(Text(f"→ tool call {call.name}({cut(call.arguments, full, 1000)})", style="yellow"))
    if not t.messages:
        out(Text("(no messages: the rollout failed before any)"))


# ---- autoenv compare ---------------------------------------------------------------------


def compare_view(c: Comparison, plot: str | None) -> None:
    out(Text(f"A: {c.a.label}\nB: {c.b.label}", style="bold"))
    if c.unpaired is not None:
        u = c.unpaired
        said = {1: "B higher", -1: "B lower"}.get(u.direction, "within noise")
        out(f"the two evaluations share {c.overall.tasks if c.overall else 0} scored task(s) (a new dataset or new "
            f"prompts): compared unpaired, each on its own tasks, as the verdict does: A {u.a:.3f} over "
            f"{len(c.a.tasks)} tasks, B {u.b:.3f} over {len(c.b.tasks)}; B − A = {u.delta:+.3f} "
            f"[{u.low:+.3f}, {u.high:+.3f}] ({c.confidence:.0%} bootstrap over each side's tasks): {said}")
        return
    if c.overall is None:
        out("the two evaluations share no scored task: nothing to compare "
            f"(A has {len(c.a.tasks)} tasks, B {len(c.b.tasks)})")
        return
    if c.overall.too_few:
        out(Text(f"{TOO_FEW}: {c.overall.tasks} task(s) both saw, fewer than stats.min_tasks = {c.overall.min_tasks} "
                 f"(A only: {c.only_a}, B only: {c.only_b}); B − A = {c.overall.delta:+.3f} with no interval",
                 style="yellow"),
            "  raise budget.examples (or lower [stats] min_tasks) to compare")
        return
    out(f"on {c.overall.tasks} tasks both saw (A only: {c.only_a}, B only: {c.only_b}); B − A with "
        f"{c.confidence:.0%} paired bootstrap intervals over tasks"
        + ("" if c.a.from_traces and c.b.from_traces else "; from the ledger's per-task rows (traces missing)"))
    t = table()
    for name in ("scope", "tasks", "A mean", "B mean", "B − A [interval]", ""):
        t.add_column(name, justify="left" if name in ("scope", "") else "right")
    rows: list[tuple[str, Difference]] = [("all tasks", c.overall)]
    rows += [(f"difficulty {d.name}", d) for d in c.by_difficulty]
    rows += [(f"component {d.name}", d) for d in c.by_component]
    for scope, d in rows:
        sign = {1: Text("higher", style="green"), -1: Text("lower", style="red")}.get(
            d.direction, Text("within noise", style="dim"))
        if d.too_few:
            sign = Text(TOO_FEW, style="dim")
        t.add_row(scope, str(d.tasks), f"{d.a:.3f}", f"{d.b:.3f}",
                  f"{d.delta:+.3f}" if d.too_few else f"{d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]", sign)
    out(t)
    known = all(p.solved_a is not None and p.solved_b is not None for p in c.tasks)
    if known:
        out(f"flipped tasks (solved: a rollout reached reward {c.solve_threshold:g}): "
            f"{len(c.gained)} newly solved in B{_task_list(c.gained)}; {len(c.lost)} solved in A only{_task_list(c.lost)}")
    moved = [p for p in c.tasks if p.delta != 0][:SHOWN_TASKS]
    if moved:
        t = table(f"Largest per-task changes ({len(moved)} of {len(c.tasks)})")
        for name in ("task idx", "difficulty", "A", "B", "B − A"):
            t.add_column(name, justify="right" if name != "difficulty" else "left")
        for p in moved:
            t.add_row(number(p.idx), p.difficulty or "–", f"{p.a:.3f}", f"{p.b:.3f}", f"{p.delta:+.3f}")
        out(t)
    if plot:
        out(f"plot: {plot}")


def _task_list(pairs: list[TaskPair]) -> str:
    if not pairs:
        return ""
    shown = ", ".join(f"idx {number(p.idx)}" for p in pairs[:8])
    return f" ({shown}{', …' if len(pairs) > 8 else ''})"


def written(what: str, path: str) -> None:
    out(f"{what}: {path}")
