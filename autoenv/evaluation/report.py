"""feedback/<commit>.md: the human- and agent-readable report of one evaluation."""

from __future__ import annotations

import os
from typing import Any
from pathlib import Path

from autoenv.core.config import Bands
from autoenv.core.formats import mean_ci, number, quoted
from autoenv.core.levels import order_by
from autoenv.core.record import Entry, Forwarded, GateFinding, GateReport
from autoenv.evaluation.rescore_table import paired_markdown
from autoenv.gates.matrix import markdown as matrix_markdown
from autoenv.judge.causes import causes
from autoenv.judge.offline import CHECK_FIXES
from autoenv.run.ledger import atomic_write


def forwarded_line(report: Forwarded) -> str:
    """`target 12 requests, 3456 + 789 tokens; strong ...`, and what the forwarder refused (autoenv.sandbox.forwarder)."""
    routes = "; ".join(f"{role} {r.requests} requests, {r.prompt_tokens} prompt + {r.completion_tokens} completion "
                       f"tokens" + (f" (${r.cost_usd:.4f})" if r.cost_usd is not None else "")
                       for role, r in report.routes.items())
    capped = f"; {report.capped} request(s) refused: the run's max_usd was spent" if report.capped else ""
    return routes + capped + (f"; **refused or clamped** (not rollouts): {report.summary()}" if report.misused else "")


def render(entry: Entry, bands: Bands, extra_sections: list[str] | None = None, plot: Path | None = None,
           where: Path | None = None, details: Path | None = None, out: Path | None = None) -> str:
    """The feedback file's text; `plot` (the run so far) and `details` (every check and probe:
    `render_gates`) are linked relative to `where`, the folder the file is written to; `out` is the
    evaluation's outputs folder: of its traces and logs, the file names those that are there."""
    commit = entry.commit
    verdict = entry.verdict
    lines = [
        f"# Feedback for {commit[:12]}",
        "",
        f"- commit: `{commit}`{' (branch ' + entry.branch + ')' if entry.branch else ''}",
        f"- evaluated: {entry.timestamp}{' — OFFLINE (scripted policies, not real models)' if entry.offline else ''}",
        f"- description (the agent's claim): {entry.description or '–'}",
        f"- verdict: **{verdict.verdict}** — {verdict.reason}",
        *([f"- rules: {entry.rules}"] if entry.rules else []),
        *([f"- resumed: {entry.reused_rollouts} finished rollouts of an interrupted evaluation were reused"]
          if entry.reused_rollouts else []),
        *([f"- rolled out in full, not rescored: {entry.rescore_refused}"] if entry.rescore_refused else []),
        *(f"- **warning**: {warning}" for warning in entry.warnings),
        *([f"- forwarded to the providers: {forwarded_line(entry.forwarded)}"] if entry.forwarded else []),
        *(["- sandbox: none — the candidate ran unconfined (no bubblewrap sandbox on this machine)"]
          if entry.sandbox == "none" else []),
        "",
    ]
    gates = entry.gates
    if gates is not None and not gates.passed:
        found = causes(gates, check_fix)
        lines += ["## Failed gates (fix these first)", "",
                  f"{len(gates.failed)} model-free check(s) or probe(s) failed, from {len(found)} cause(s); the "
                  "verdict is discard" + (" and the models were not evaluated." if not entry.stats else "."), ""]
        for i, cause in enumerate(found, 1):
            lines.append(f"{i}. **{cause.issue}**. Fix: {cause.fix}")
            shown = cause.evidence[:MAX_EVIDENCE]
            lines += [f"   - {line}" for line in shown]
            if len(cause.evidence) > len(shown):
                lines.append(f"   - and {len(cause.evidence) - len(shown)} more (see the checks and probes file)")
        lines.append("")
    if not entry.eval_success and verdict.verdict == "inconclusive":
        lines += ["## The provider was unavailable (not the candidate's fault)", "",
                  (f"Stage: `{entry.failed_stage or '?'}`. Nothing to fix in the candidate: run the evaluation again "
                  "when the provider answers."), "", "```", (entry.error or "").strip(), "```", ""]
    elif not entry.eval_success:
        lines += ["## The evaluation failed", "", f"Stage: `{entry.failed_stage or '?'}`", "",
                  "```", (entry.error or "").strip(), "```", ""]
    rescored = paired_markdown(entry)
    if rescored:
        lines += [*rescored, ""]
    stats = entry.stats
    if stats:
        wanted = {"target": f"wanted {bands.target_min}–{bands.target_max}", "strong": f"wanted > {bands.strong_min}"}
        lines += ["## Results", "",
                  ("Means carry a 95% interval from a bootstrap over tasks; errored rollouts are counted, "
                  "never averaged in."), "",
                  "| role | model | mean [95% CI] | std | solve rate | tasks disagreeing | scored / rollouts | provider errors | timeouts | env errors |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for role, s in stats.items():
            e = s.errors
            lines.append(
                f"| {role} ({wanted.get(role, '')}) | {s.model} | {mean_ci(s)} | {number(s.std)} | "
                f"{number(s.solve_rate)} | {number(s.disagree_share)} | {s.scored} / {s.rollouts} | "
                f"{e.provider_error} | {e.timeout} | {e.env_error} |")
        lines.append("")
        for role, s in stats.items():
            extras = []
            if s.normalized_mean is not None and s.max_reward is not None:
                extras.append(f"normalized mean {number(s.normalized_mean)} of a maximum {s.max_reward:g}")
            if s.mean_seconds is not None:
                extras.append(f"latency {number(s.mean_seconds, 1)} s mean, {number(s.p90_seconds, 1)} s p90")
            cached = f" ({s.cached_input_tokens} of them cached)" if s.cached_input_tokens else ""
            extras.append(f"tokens {s.input_tokens} in{cached} / {s.output_tokens} out")
            if s.cost_usd is not None:
                extras.append(f"cost ${s.cost_usd:.4f}")
            lines.append(f"- {role}: " + "; ".join(extras))
            if s.components:
                parts = ", ".join(f"{k} {number(v)}" for k, v in s.components.items())
                lines.append(f"- {role} reward components (mean score): {parts}")
            for label, groups in (("difficulty", order_by(s.by_difficulty)), ("category", s.by_category)):
                if groups:
                    parts = ", ".join(f"{k} {number(g.mean)} (n={g.n})" for k, g in groups.items())
                    lines.append(f"- {role} by {label}: {parts}")
        lines.append("")
    readiness = entry.rl_readiness
    if readiness is not None and stats:
        lines += ["## RL readiness", "",
                  f"- target mean in band: {readiness.target_in_band}",
                  f"- strong model above floor: {readiness.strong_above_floor}",
                  f"- share of tasks whose rollouts disagree (GRPO signal): {number(readiness.learnable_share)}",
                  f"- distance to the wanted state: {number(readiness.distance)}", ""]
    if gates is not None:
        lines += [f"## Checks and probes ({gates.mode}, {gates.seconds} s)", "", gates_summary(gates, details, where), ""]
    for section in extra_sections or []:
        lines += [section.rstrip(), ""]
    files = existing_files(entry, out)
    if files or plot:
        lines += ["## Files", ""]
        if plot:
            link = Path(os.path.relpath(plot, where)).as_posix() if where else plot.as_posix()
            lines.append(f"- the run so far: [{plot.name}]({link})" + (f" (`{entry.outputs}/{plot.name}`)"
                                                                      if entry.outputs else ""))
        lines += files
        lines.append("")
    return "\n".join(lines)


TRACES = ("smoke", "target", "strong")
LOGS = ("worker.log", "inspect.log", "gates/audit.log", "worker.stderr")


def existing_files(entry: Entry, out: Path | None) -> list[str]:
    """The `- traces:` and `- logs:` lines of the files the evaluation wrote under `out` (a gate that stopped it
    before the rollouts wrote no traces and no worker.log: nothing is named that is not there)."""
    if not entry.outputs or out is None:
        return []
    traces = [f"`{entry.outputs}/{role}/traces.jsonl`" for role in TRACES if (out / role / "traces.jsonl").is_file()]
    logs = [f"`{entry.outputs}/{name}`" for name in LOGS if (out / name).is_file()]
    return ([f"- traces: {', '.join(traces)}"] if traces else []) + ([f"- logs: {', '.join(logs)}"] if logs else [])


GATES_FILE = "gates.md"
"""The details of the gates, beside the outputs of the evaluation."""
MAX_EVIDENCE = 6
"""Evidence lines folded under one cause in the feedback (all of them are in the details file)."""


def check_fix(finding: GateFinding) -> str | None:
    fix = CHECK_FIXES.get(finding.name)
    return fix(finding) if fix else None


SKIPS_NAMED = 6
"""How many not-applicable rows the feedback's gates paragraph names (every row is in gates.md)."""


def gates_summary(gates: GateReport, details: Path | None, where: Path | None) -> str:
    """One paragraph: how many checks and probes passed, failed or were not applicable, and the link to every row."""
    counts: dict[str, list[str]] = {}
    for f in gates.findings:
        counts.setdefault(f.status, []).append(f.name)
    parts = [f"{len(counts.get('pass', []))} passed"]
    if counts.get("fail"):
        parts.append(f"{len(counts['fail'])} failed ({', '.join(counts['fail'])})")
    if counts.get("warn"):
        parts.append(f"{len(counts['warn'])} warned ({', '.join(counts['warn'])})")
    if counts.get("skip"):  # the rows that did not apply are many and say little: a few named, the rest counted
        skipped = counts["skip"]
        named = ", ".join(skipped[:SKIPS_NAMED]) + (f" and {len(skipped) - SKIPS_NAMED} more" if len(skipped) >
                                                     SKIPS_NAMED else "")
        parts.append(f"{len(skipped)} not applicable ({named})")
    text = "; ".join(parts) + "."
    if details is not None:
        link = Path(os.path.relpath(details, where)).as_posix() if where else details.as_posix()
        text += f" Every row, each probe's best reply and the exploit matrix: [{details.name}]({link})."
    return text


def render_gates(entry: Entry) -> str:
    """outputs/<commit>/gates.md: every check and probe, each probe's best reply, the exploit matrix."""
    gates = entry.gates
    if gates is None:
        return ""
    lines = [f"# Checks and probes of {entry.commit[:12]} ({gates.mode}, {gates.seconds} s)", "",
             "| check | result | detail |", "|---|---|---|"]
    lines += [f"| {f.name} | {f.status} | {f.message.replace('|', '/')} |" for f in gates.findings]
    lines.append("")
    for name, p in gates.probes.items():
        if p.best and name != "oracle":
            b = p.best[0]
            lines.append(f"- {name}: best task idx {b.idx} scored {b.reward:.2f} with reply {quoted(b.reply, 120)}")
    lines.append("")
    if gates.matrix is not None:
        lines += ["## Exploit matrix (mean score per reward component and probe)", "", *matrix_markdown(gates.matrix), ""]
    search = next((f.data.get("search") for f in gates.findings if f.name == "probe search" and f.data.get("search")),
                  None)
    if search:
        lines += search_markdown(search)
    return "\n".join(lines)


def search_markdown(trace: dict[str, Any]) -> list[str]:
    """The reward search's trace (autoenv.gates.search): what it learnt and searched with, each improvement,
    and the templates replayed on the held-out tasks."""
    learnt = trace.get("learnt") or {}
    budget = trace.get("budget") or {}
    lines = ["## Reward search", "",
             f"{trace.get('templates', 0)} templates, {trace.get('calls', 0)} reward calls on {trace.get('train_tasks', 0)} "
             f"training tasks in {trace.get('generations', 0)} generations, {trace.get('seconds', 0)} s (budget "
             f"{budget.get('calls', '?'):g} calls, {budget.get('seconds', '?'):g} s); stopped by {trace.get('stopped')}; "
             + (f"finalists replayed on {trace['held_out_tasks']} held-out tasks." if trace.get("held_out_tasks") else
                "too few tasks to hold any out: the finalists were judged on the tasks they were found on."), ""]
    if learnt.get("formats") or learnt.get("keys"):
        lines.append("- read in the reward's source: formats " + (", ".join(f"`{f}`" for f in learnt.get("formats") or [])
                                                             or "none") + "; JSON keys "
                     + (", ".join(f"`{k}`" for k in learnt.get("keys") or []) or "none"))
    lines.append("- formats searched: " + ", ".join(f"`{f}`" for f in trace.get("formats") or []))
    lines.append("- material: " + ", ".join(f"{k} {v}" for k, v in (trace.get("material") or {}).items()))
    if trace.get("focus"):
        lines.append("- pointed at (the reference never earns them in full): "
                     + ", ".join(f"`{c}`" for c in trace["focus"]))
    lines += ["", "| reward calls | best mean (training) | template |", "|---|---|---|"]
    lines += [f"| {s['calls']} | {s['mean']:.3f} | {str(s['template']).replace('|', '/')} |"
              for s in trace.get("steps") or []]
    lines += ["", "| finalist | training | held out | chosen |", "|---|---|---|---|"]
    lines += [f"| {str(f['template']).replace('|', '/')} | {f['train']:.3f} | {f['held_out']:.3f} | "
              f"{'yes' if f.get('chosen') else ''} |" for f in trace.get("finalists") or []]
    return [*lines, ""]


def write_report(path: Path, text: str) -> None:
    atomic_write(path, text)
