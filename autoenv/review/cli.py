"""The review commands of `autoenv`: log, show, plot, compare, report.

`add_commands` registers them on the main parser; each reads the run through
`review.run` and writes through `review.terminal` (text), `review.plot` and
`review.compare_plot` (PNGs) or `review.html` (the report page). Figures and pages go
under outputs/review/ by default: the outputs folder is the harness's, so they never make
the working tree dirty (a dirty tree would stop the next evaluation).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from autoenv.core import display
from autoenv.core.errors import AutoEnvError
from autoenv.core.record import ROLES
from autoenv.driver.gate import driver_dir
from autoenv.driver.state import read_events
from autoenv.review import terminal
from autoenv.review.compare import compare, evaluation_side
from autoenv.review.compare_plot import plot_comparison
from autoenv.review.html import write_report
from autoenv.review.lookup import find_row
from autoenv.review.models import model_side
from autoenv.review.plot import plot_run
from autoenv.review.rows import Row
from autoenv.review.run import Project, Run, load_run
from autoenv.review.transcripts import Transcript, evaluation_transcripts, find_transcript


def add_commands(sub) -> None:
    """Add log, show, plot, compare and report to the `autoenv` subparsers `sub`."""
    p = sub.add_parser("log", help="one row per evaluation of the run, oldest first")
    _run_options(p)
    p.add_argument("--all", action="store_true", help="every run in the ledger, not only one branch")
    p.add_argument("--json", action="store_true", help="print the rows as JSON (for agents and scripts)")
    p.add_argument("--agent", action="store_true",
                   help="the agent driver's log instead (autoenv run): launches, nudges, stops, why and their cost")
    p.add_argument("--env", action="store_true",
                   help="the `autoenv eval --env` evaluations instead (other environments, recorded apart from the run)")
    p.set_defaults(func=cmd_log)

    p = sub.add_parser("show", help="one evaluation's summary, or one of its rollouts as a transcript")
    p.add_argument("commit", nargs="?", default="HEAD", help="SHA, prefix or ref (default HEAD)")
    p.add_argument("--rollout", metavar="ID", help="print this rollout (e.g. target-ab12cd34, as the judge cites it)")
    p.add_argument("--full", action="store_true", help="print long messages whole (default: cut at "
                   "4000 characters with a marker)")
    _run_options(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("plot", help="the run's course as a PNG (means, band, verdicts, learnable share)")
    _run_options(p)
    p.add_argument("--out", type=Path, help="PNG to write (default outputs/review/plot-<tag>.png)")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("compare", help="two evaluations (or two models on one) on the tasks both saw")
    p.add_argument("commits", nargs="*", metavar="COMMIT",
                   help="A B: two evaluated commits; with --models, the one commit (default HEAD)")
    p.add_argument("--models", nargs=2, metavar=("A", "B"),
                   help="two models on one commit: target, strong (its evaluation's rollouts) or MODEL[@BASE_URL] "
                   "(run now on the same tasks and seed)")
    p.add_argument("--role", choices=ROLES, default="target", help="which model of two commits to compare")
    p.add_argument("--offline", action="store_true", help="--models names scripted policies (no key)")
    p.add_argument("--api-key-var", default=None, help="key variable for a --models endpoint (default: the target's)")
    p.add_argument("--out", type=Path, help="PNG to write (default outputs/review/compare-<A>-<B>.png)")
    _run_options(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="one self-contained HTML page of the run (open it from disk)")
    _run_options(p)
    p.add_argument("--out", type=Path, help="HTML file to write (default outputs/review/report-<tag>.html)")
    p.add_argument("--max-rollouts", type=int, default=4000, help="rollouts in the viewer, newest evaluations first")
    p.set_defaults(func=cmd_report)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag", help="the run autoenv/TAG (default: the checked-out branch)")
    p.add_argument("--config", type=Path, default=None, help="config file (default: config.toml at the repo root)")


def _open(args) -> tuple[Project, Run]:
    project = Project.open(Path.cwd(), args.config)
    return project, load_run(project, args.tag, getattr(args, "all", False))


def _default_out(project: Project, name: str) -> Path:
    return project.config.path("outputs") / "review" / name


def cmd_log(args) -> int:
    project, run = _open(args)
    if args.agent:
        events = read_events(driver_dir(project.config.path("outputs"), run.tag))
        if args.json:
            display.console.print(json.dumps(events, indent=1))
        else:
            terminal.agent_view(run.label, events)
        return 0
    shown = run.apart if args.env else run.rows
    if args.json:
        rows = [dict(r.to_json(), feedback=_existing(project, project.feedback_of(r)),
                     plot=_plot(project, r)) for r in shown]
        display.console.print(json.dumps(rows, indent=1))
    elif args.env:
        terminal.env_log_view(run, [_existing(project, project.feedback_of(r)) for r in run.apart])
    else:
        terminal.log_view(run)
    return 0


def _plot(project: Project, row) -> str | None:
    """The row's run plot; a cache hit's is its source's (the pointer draws none)."""
    outputs = project.outputs(row.entry) if row.entry else None
    return _existing(project, outputs / "plot.png") if outputs else None


def _existing(project: Project, path: Path) -> str | None:
    return project.shown(path) if path.is_file() else None


def cmd_show(args) -> int:
    project, run = _open(args)
    row = find_row(project, run, args.commit)
    outputs = project.outputs(row.entry) if row.entry else None
    if args.rollout:
        if outputs is None:
            raise AutoEnvError(f"evaluation {row.short} has no outputs folder",
                               where=str(project.config.path("outputs") / row.commit),
                               fix="its traces were removed or it failed before the rollouts")
        terminal.transcript_view(find_transcript(outputs, args.rollout), full=args.full)
        return 0
    files = {"feedback": _existing(project, project.feedback_of(row))}
    if outputs:
        files["plot"] = _existing(project, outputs / "plot.png")
        files["traces"] = project.shown(outputs) + "/<role>/traces.jsonl"
    transcripts = evaluation_transcripts(outputs) if outputs else []
    terminal.show_view(row, project.config.bands, {k: v for k, v in files.items() if v}, _examples(transcripts))
    return 0


def _examples(transcripts: list[Transcript]) -> list[Transcript]:
    """Per model, its lowest and highest reward rollout and its first failed one."""
    picked: list[Transcript] = []
    for role in ROLES:
        mine = [t for t in transcripts if t.role == role]
        scored = sorted((t for t in mine if t.rollout.reward is not None), key=lambda t: t.rollout.reward or 0.0)
        failed = [t for t in mine if t.rollout.reward is None]
        for t in scored[:1] + scored[-1:] + failed[:1]:
            if t not in picked:
                picked.append(t)
    return picked


def cmd_plot(args) -> int:
    project, run = _open(args)
    out = args.out or _default_out(project, f"plot-{_safe(run.tag)}.png")
    plot_run(run, project.config.bands, out)
    terminal.written("plot", project.shown(out))
    return 0


def cmd_compare(args) -> int:
    project, run = _open(args)
    threshold = project.config.bands.solve_threshold
    if args.models:
        if len(args.commits) > 1:
            raise AutoEnvError("--models compares two models on one commit; got several commits",
                               where=" ".join(args.commits), fix="autoenv compare [COMMIT] --models A B")
        row = find_row(project, run, args.commits[0] if args.commits else "HEAD", "compare")
        a = model_side(project, row, args.models[0], offline=args.offline, api_key_var=args.api_key_var)
        b = model_side(project, row, args.models[1], offline=args.offline, api_key_var=args.api_key_var)
        name = f"compare-{row.short}-{_safe(args.models[0])}-{_safe(args.models[1])}.png"
    else:
        if len(args.commits) != 2:
            raise AutoEnvError(f"compare takes two evaluated commits, got {len(args.commits)}",
                               where="autoenv compare", fix="autoenv compare A B, or autoenv compare [COMMIT] --models A B")
        rows: list[Row] = [find_row(project, run, rev, "compare") for rev in args.commits]
        a, b = (evaluation_side(project, r, args.role) for r in rows)
        name = f"compare-{rows[0].short}-{rows[1].short}-{args.role}.png"
    comparison = compare(a, b, threshold, seed=project.config.seed, min_tasks=project.config.stats.min_tasks)
    out = None
    if comparison.overall is not None:
        out = plot_comparison(comparison, args.out or _default_out(project, name))
    terminal.compare_view(comparison, project.shown(out) if out else None)
    return 0


def cmd_report(args) -> int:
    if args.max_rollouts < 0:
        raise AutoEnvError(f"--max-rollouts must be 0 or more, got {args.max_rollouts}", where="--max-rollouts",
                           fix="0 leaves the rollout viewer empty; the default is 4000")
    project, run = _open(args)
    out = args.out or _default_out(project, f"report-{_safe(run.tag)}.html")
    write_report(project, run, out, max_rollouts=args.max_rollouts)
    terminal.written("report", project.shown(out))
    display.console.print(f"open it in a browser: file://{out.resolve()}")
    return 0


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:60]
