"""feedback/<commit>.md: the human- and agent-readable report of one evaluation."""

from __future__ import annotations

from pathlib import Path

from autoenv.config import Bands


def _f(value, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def mean_ci(model: dict) -> str:
    """`0.406 [0.302, 0.510]`: a mean is never shown without its interval."""
    if model.get("mean") is None:
        return "–"
    ci = model.get("ci")
    return f"{model['mean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{model['mean']:.3f}"


def render(entry: dict, bands: Bands, extra_sections: list[str] | None = None) -> str:
    commit = entry["commit"]
    verdict = entry.get("verdict") or {}
    lines = [
        f"# Feedback for {commit[:12]}",
        "",
        f"- commit: `{commit}`{' (branch ' + entry['branch'] + ')' if entry.get('branch') else ''}",
        f"- evaluated: {entry.get('timestamp')}{' — OFFLINE (scripted policies, not real models)' if entry.get('offline') else ''}",
        f"- description (the agent's claim): {entry.get('description') or '–'}",
        f"- verdict: **{verdict.get('verdict', '–')}** — {verdict.get('reason', '')}",
        "",
    ]
    gates = entry.get("gates") or {}
    if gates and not gates.get("passed"):
        lines += ["## Failed gates (fix these first)", "",
                  "The reward or the dataset failed a model-free check; the verdict is discard"
                  + (" and the models were not evaluated." if not entry.get("stats") else "."), ""]
        lines += [f"- **{item.split(':', 1)[0]}**:{item.split(':', 1)[1]}" for item in gates.get("failed", [])]
        lines.append("")
    if not entry.get("eval_success"):
        lines += ["## The evaluation failed", "", f"Stage: `{entry.get('failed_stage', '?')}`", "",
                  "```", str(entry.get("error", "")).strip(), "```", ""]
    stats = entry.get("stats") or {}
    if stats:
        wanted = {"target": f"wanted {bands.target_min}–{bands.target_max}", "strong": f"wanted > {bands.strong_min}"}
        lines += ["## Results", "",
                  "Means carry a 95% interval from a bootstrap over tasks; errored rollouts are counted, "
                  "never averaged in.", "",
                  "| role | model | mean [95% CI] | std | solve rate | tasks disagreeing | scored / rollouts | provider errors | timeouts | env errors |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for role, s in stats.items():
            e = s.get("errors", {})
            lines.append(
                f"| {role} ({wanted.get(role, '')}) | {s.get('model')} | {mean_ci(s)} | {_f(s.get('std'))} | "
                f"{_f(s.get('solve_rate'))} | {_f(s.get('disagree_share'))} | {s.get('scored')} / {s.get('rollouts')} | "
                f"{e.get('provider_error', 0)} | {e.get('timeout', 0)} | {e.get('env_error', 0)} |")
        lines.append("")
        for role, s in stats.items():
            extras = []
            if s.get("normalized_mean") is not None:
                extras.append(f"normalized mean {_f(s['normalized_mean'])} of a maximum {s['max_reward']:g}")
            if s.get("mean_seconds") is not None:
                extras.append(f"latency {_f(s['mean_seconds'], 1)} s mean, {_f(s.get('p90_seconds'), 1)} s p90")
            extras.append(f"tokens {s.get('input_tokens', 0)} in / {s.get('output_tokens', 0)} out")
            if s.get("cost_usd") is not None:
                extras.append(f"cost ${s['cost_usd']:.4f}")
            lines.append(f"- {role}: " + "; ".join(extras))
            if s.get("components"):
                parts = ", ".join(f"{k} {_f(v)}" for k, v in s["components"].items())
                lines.append(f"- {role} reward components (mean score): {parts}")
            for label, key in (("difficulty", "by_difficulty"), ("category", "by_category")):
                if s.get(key):
                    parts = ", ".join(f"{k} {_f(v['mean'])} (n={v['n']})" for k, v in s[key].items())
                    lines.append(f"- {role} by {label}: {parts}")
        lines.append("")
    readiness = entry.get("rl_readiness") or {}
    if readiness and stats:
        lines += ["## RL readiness", "",
                  f"- target mean in band: {readiness.get('target_in_band')}",
                  f"- strong model above floor: {readiness.get('strong_above_floor')}",
                  f"- share of tasks whose rollouts disagree (GRPO signal): {_f(readiness.get('learnable_share'))}",
                  f"- distance to the wanted state: {_f(readiness.get('distance'))}", ""]
    if gates:
        lines += [f"## Checks and probes ({gates.get('mode')}, {gates.get('seconds')} s)", "",
                  "| check | result | detail |", "|---|---|---|"]
        lines += [f"| {f['name']} | {f['status']} | {f['message'].replace('|', '/')} |" for f in gates.get("findings", [])]
        lines.append("")
        for name, p in (gates.get("probes") or {}).items():
            if p.get("best") and name != "oracle":
                b = p["best"][0]
                lines.append(f"- {name}: best task idx {b['idx']} scored {b['reward']:.2f} with reply "
                             f"`{b['reply'][:120].replace(chr(10), ' ')}`")
        lines.append("")
    for section in extra_sections or []:
        lines += [section.rstrip(), ""]
    if entry.get("outputs"):
        lines += ["## Files", "", f"- traces: `{entry['outputs']}/<role>/traces.jsonl`",
                  f"- logs: `{entry['outputs']}/worker.log`", ""]
    return "\n".join(lines)


def write_report(path: Path, text: str) -> None:
    from autoenv.ledger import atomic_write

    atomic_write(path, text)
