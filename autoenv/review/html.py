"""`autoenv report`: the run as one self-contained HTML page, to read in the morning.

Everything is inside the file: styles and script inline (assets/report.css, report.js),
figures as base64 PNGs, the rollouts as JSON. No server, no CDN, no request of any
kind, so it opens from file:// on a laptop or as a CI artifact. The page holds the log
table, the run plot and a before/after comparison (the first scored evaluation against
the last kept one), every evaluation's feedback file, and a rollout viewer with filters
by evaluation, model, difficulty and reward.

Text from the run (descriptions, reasons, feedback, model output) is escaped here or, in
the viewer, inserted with textContent; the JSON is written so no `</script>` can close
its element early.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.core.formats import iso_now, number
from autoenv.core.levels import natural_order
from autoenv.review.compare import compare, evaluation_side
from autoenv.review.compare_plot import plot_comparison
from autoenv.review.markdown import to_html
from autoenv.review.plot import plot_run
from autoenv.review.rows import Row, clip, money, point_text, short_time
from autoenv.review.run import Project, Run
from autoenv.review.transcripts import Transcript, evaluation_transcripts
from autoenv.run.ledger import atomic_write

ASSETS = Path(__file__).parent / "assets"
MESSAGE_CHARS = 4000


def write_report(project: Project, run: Run, out: Path, max_rollouts: int = 4000) -> Path:
    """Write the page for `run` to `out` (figures beside it, as PNG files too)."""
    run.require_rows("report")
    figures = [(plot_run(run, project.config.bands, out.with_name(out.stem + "-plot.png")),
                ("The run: target and strong means with 95% intervals per evaluation, the wanted band, verdicts, "
                "the running best, and the learnable share."))]
    before_after = _before_after(project, run, out.with_name(out.stem + "-compare.png"))
    if before_after:
        figures.append(before_after)
    rollouts, per_evaluation = _rollouts(project, run, max_rollouts)
    page = PAGE.format(
        title=html.escape(f"AutoEnv {run.label}"),
        css=(ASSETS / "report.css").read_text(),
        js=(ASSETS / "report.js").read_text(),
        heading=html.escape(f"Run {run.label}"),
        subtitle=html.escape(_subtitle(run)),
        log=_log_table(run),
        spark=spark_svg([(r.number, r.target.mean if r.target else None) for r in run.rows]),
        figures="\n".join(_figure(path, caption) for path, caption in figures),
        feedback="\n".join(_feedback(project, row, out.parent, last=row is run.rows[-1]) for row in run.rows),
        data=_json_for_script({
            "rollouts": rollouts, "solve_threshold": project.config.bands.solve_threshold,
            "difficulties": natural_order(str(r["difficulty"]) for r in rollouts if r.get("difficulty") is not None),
            "evaluations": [{"n": r.number, "commit": r.short, "verdict": r.verdict, "rollouts": per_evaluation.get(r.number, 0)}
                            for r in run.rows if per_evaluation.get(r.number)],
            "initial_evaluation": max(per_evaluation) if per_evaluation else "all",
        }),
        rollout_note=html.escape(f"{len(rollouts)} rollouts of {len(per_evaluation)} evaluations"
                                 + (f" (capped at --max-rollouts {max_rollouts}, newest first)"
                                    if len(rollouts) >= max_rollouts else "")),
    )
    atomic_write(out, page)
    out.chmod(0o644)  # a page to open and share, not a private temp file
    return out


def _subtitle(run: Run) -> str:
    kept = sum(r.kept for r in run.rows)
    parts = [f"{len(run.rows)} evaluations", f"{kept} kept"]
    if run.last_kept:
        parts.append(f"last kept #{run.last_kept.number} {run.last_kept.short}")
    if all(r.offline for r in run.rows):
        parts.append("offline: scripted policies, not real models")
    if run.source != "ledger":
        parts.append(f"from {run.source} (the ledger is missing)")
    parts.append(f"generated {iso_now()}")
    return " · ".join(parts)


def _log_table(run: Run) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("#", "commit", "time (UTC)", "description", "target [95% CI]",
                                              "strong [95% CI]", "learnable", "gates", "verdict", "cost", ""))
    body = []
    for r in run.rows:
        marks = ('<span class="mark">◀ last kept</span>' if r.last_kept else "") + (
            ' <span class="warn">⚠ chain broken</span>' if r.tampered else "") + (
            f' <span class="muted">→ #{_source_number(run, r)} {r.cached_from[:8]} (cache hit)</span>'
            if r.cached_from else "") + (
            f' <span class="env">env {html.escape(r.environment)}</span>' if r.environment else "")
        gates = "–" if r.gates is None else html.escape(r.gates + (f" ({len(r.gates_failed)})" if r.gates_failed else ""))
        cells = [f'<td class="num"><a href="#eval-{r.number}">{r.number}</a></td>',
                 f"<td><code>{r.short}</code></td>", f"<td>{short_time(r.time)}</td>",
                 f'<td class="desc" title="{html.escape(r.description)}">{html.escape(clip(r.description, 80)) or "–"}</td>',
                 f'<td class="num">{point_text(r.target)}</td>', f'<td class="num">{point_text(r.strong)}</td>',
                 f'<td class="num">{number(r.learnable, 2)}</td>', f"<td>{gates}</td>",
                 f'<td class="verdict {html.escape(r.verdict)}" title="{html.escape(r.reason)}">{html.escape(r.verdict)}</td>',
                 f'<td class="num">{money(r.cost)}</td>', f"<td>{marks}</td>"]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="table-box"><table class="log"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            "</table></div>")


def _source_number(run: Run, row: Row) -> str:
    """The number of the evaluation a cache hit points at ("?" when it is not in this run)."""
    return next((str(r.number) for r in run.rows if r.commit == row.cached_from and not r.cached_from), "?")


def _figure(path: Path, caption: str) -> str:
    encoded = base64.b64encode(path.read_bytes()).decode()
    return (f'<figure><img src="data:image/png;base64,{encoded}" alt="{html.escape(caption)}" width="1200">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _before_after(project: Project, run: Run, out: Path) -> tuple[Path, str] | None:
    """The first scored evaluation against the last kept one, for the target model."""
    first = next((r for r in run.rows if r.target and r.target.mean is not None and not r.cached_from
                  and not r.environment), None)
    last = run.last_kept
    if first is None or last is None or first.commit == last.commit:
        return None
    try:
        a, b = evaluation_side(project, first, "target"), evaluation_side(project, last, "target")
    except AutoEnvError:
        return None
    comparison = compare(a, b, project.config.bands.solve_threshold, seed=project.config.seed,
                         min_tasks=project.config.stats.min_tasks)
    if comparison.overall is None:
        return None
    return (plot_comparison(comparison, out),
            (f"Before and after: evaluation #{first.number} against the last kept #{last.number}, the target model "
            "on the tasks both saw (paired bootstrap intervals)."))


def _feedback(project: Project, row: Row, page_dir: Path, last: bool) -> str:
    path = project.feedback_of(row)

    def rebase(link: str) -> str:  # links in the file are relative to its folder
        return Path(os.path.relpath(path.parent / link, page_dir)).as_posix()

    body = to_html(path.read_text(encoding="utf-8"), rebase) if path.is_file() else (
        f'<p class="muted">No feedback file ({html.escape(project.shown(path))}).</p>')
    summary = (f'#{row.number} <code>{row.short}</code> <span class="verdict {html.escape(row.verdict)}">'
               f"{html.escape(row.verdict)}</span> — {html.escape(clip(row.description, 90)) or '–'}")
    return f'<details id="eval-{row.number}"{" open" if last else ""}><summary>{summary}</summary><div class="md">{body}</div></details>'


def _rollouts(project: Project, run: Run, limit: int) -> tuple[list[dict], dict[int, int]]:
    """The viewer's rollouts, newest evaluations first up to `limit`, and the count per evaluation."""
    out: list[dict] = []
    counts: dict[int, int] = {}
    for row in reversed(run.rows):
        outputs = project.outputs(row.entry) if row.entry else None
        if outputs is None or len(out) >= limit or row.cached_from:  # a cache hit's rollouts are its source's
            continue
        answers = reference_answers(outputs)
        for t in evaluation_transcripts(outputs)[: limit - len(out)]:
            out.append(_rollout(row, t, answers.get(t.rollout.task_key)))
            counts[row.number] = counts.get(row.number, 0) + 1
    out.sort(key=lambda r: (-r["n"], r["idx"] if r["idx"] is not None else 1 << 62, r["task"], r["role"], r["id"]))
    return out, counts


def reference_answers(outputs: Path) -> dict[str, str]:
    """Task key -> the task's reference answer, from the evaluation's tasks.json (none when it kept no answer)."""
    try:
        rows = json.loads((outputs / "tasks.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(row["key"]): str(row["answer"]) for row in rows if isinstance(row, dict) and "answer" in row}


def spark_svg(points: list[tuple[int, float | None]], top: float = 1.0) -> str:
    """The target mean per evaluation as bars of exact height (a glyph sparkline has 8 levels, so 0.25 and
    0.375 could look alike); an evaluation without scores is an outlined box, never a short bar."""
    top = max([top] + [v for _, v in points if v is not None])
    bar, gap, height = 10, 3, 40
    parts = []
    for i, (n, value) in enumerate(points):
        x = i * (bar + gap)
        if value is None:
            parts.append(f'<rect class="nodata" x="{x + 0.5}" y="0.5" width="{bar - 1}" height="{height - 1}">'
                         f"<title>#{n}: no data (no scores)</title></rect>")
        else:
            h = max(1.0, round(max(0.0, value) / top * (height - 2), 2) + 1) if top > 0 else 1.0
            parts.append(f'<rect class="bar" x="{x}" y="{height - h:.2f}" width="{bar}" height="{h:.2f}">'
                         f"<title>#{n}: {value:.3f}</title></rect>")
    width = max(1, len(points) * (bar + gap) - gap)
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="target mean per evaluation">{"".join(parts)}</svg>')


def _rollout(row: Row, t: Transcript, answer: str | None = None) -> dict:
    r = t.rollout
    return {
        "n": row.number, "commit": row.short, "id": t.id, "role": t.role, "model": t.model, "idx": r.idx,
        "task": r.task_key, "answer": answer,
        "difficulty": r.difficulty, "category": r.category, "reward": r.reward, "outcome": r.outcome, "error": r.error,
        "stop": t.stop, "components": r.components, "weights": r.weights,
        "messages": [{"role": m.role, "name": m.name, "text": _cut(m.text),
                      "calls": [[c.name, _cut(c.arguments)] for c in m.tool_calls]} for m in t.messages],
    }


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + f"\n[… {len(text) - MESSAGE_CHARS} more characters]"


def _json_for_script(data: dict) -> str:
    """JSON safe inside <script>: no `<`, `>` or `&` that could end the element or open a comment."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<style>
{css}
</style>
</head>
<body>
<header>
<h1>{heading}</h1>
<p class="sub">{subtitle}</p>
</header>
<nav><a href="#log">Log</a><a href="#plots">Plots</a><a href="#feedback">Feedback</a><a href="#rollouts">Rollouts</a></nav>
<section id="log">
<h2>Log</h2>
<p class="spark-line">target mean per evaluation {spark} <span class="muted">bar height: 0 to 1 (hover for the value);
<span class="nodata-key"></span> outlined: no data (no scores), not zero</span></p>
{log}
</section>
<section id="plots">
<h2>Plots</h2>
{figures}
</section>
<section id="feedback">
<h2>Feedback per evaluation</h2>
{feedback}
</section>
<section id="rollouts">
<h2>Rollouts</h2>
<p class="muted">{rollout_note}. Click a row to read its transcript; model output is shown as text, never run.</p>
<div class="filters">
<div><label for="filter-evaluation">evaluation</label><select id="filter-evaluation"></select></div>
<div id="filter-model"><label>model</label></div>
<div id="filter-difficulty"><label>difficulty</label></div>
<div id="filter-reward"><label>reward</label></div>
</div>
<p id="rollout-count"></p>
<div class="viewer">
<div class="list-wrap"><table id="rollout-list"><thead><tr><th>eval</th><th>task</th><th>rollout</th><th>model</th>
<th>difficulty</th><th>reward</th><th>outcome</th></tr></thead><tbody></tbody></table></div>
<article id="transcript"><p class="muted">Select a rollout.</p></article>
</div>
</section>
<script type="application/json" id="rollout-data">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""
