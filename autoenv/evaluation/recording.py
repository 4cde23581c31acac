"""The last stages: the isolated judge, then the record (feedback file, ledger entry, run plot, git note).

Someone other than the harness writing the ledger during the evaluation is found here and
recorded as `tampered`; the ledger is restored to the lines preflight verified.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autoenv.core import display
from autoenv.core.formats import stamp
from autoenv.core.record import (
    ROLES,
    Entry,
    JudgeResult,
    Verdict,
)
from autoenv.evaluation.context import Context, timed
from autoenv.evaluation.report import GATES_FILE, render, render_gates, write_report
from autoenv.judge.render import render as judge_render
from autoenv.judge.run import run_judge
from autoenv.judge.workspace import build
from autoenv.review.plot import plot_run
from autoenv.review.run import Project, run_so_far
from autoenv.run.integrity import FOUND, STORED, note_fields, restore_if_written
from autoenv.run.ledger import append_entry, line_hash, raw_lines, read_entries


def judge(ctx: Context, entry: Entry, backend: str | None = None, entries: list[Entry] | None = None) -> Entry:
    """The judge stage: an isolated reader of the rollouts adds its findings to the entry."""
    with timed(ctx, "judge"), display.stage("judge", "an isolated reader of the rollouts"):
        earlier = read_entries(ctx.config.path("log_file")) if entries is None else entries
        result = judge_entry(ctx, entry, earlier, backend=backend)
        display.note(f"{result.backend} judge" + (" ok" if result.ok else f" failed ({result.error}); offline review used"))
    return entry.model_copy(update={"judge": result, "timings": {**entry.timings, "judge": ctx.timings["judge"]}})


def judge_entry(ctx: Context, entry: Entry, entries: list[Entry], backend: str | None = None) -> JudgeResult:
    """Build a fresh workspace of copies under outputs/<commit>/judge/<time>/ and judge it."""
    cfg = ctx.config
    base = ctx.out / "judge" / stamp()
    previous = next((e for e in reversed(entries) if e.commit != ctx.head.commit), None)
    previous_feedback = cfg.path("feedback") / f"{previous.commit}.md" if previous else None
    ids = build(base / "workspace", repo_root=cfg.root, candidate=cfg.path("candidate"), out=ctx.out,
                entry=entry, previous_feedback=previous_feedback)
    judge_cfg = dataclasses.replace(cfg.judge, backend=backend) if backend else cfg.judge
    result = run_judge(judge_cfg, offline=ctx.options.offline and backend is None, workspace=base / "workspace",
                       entry=entry, bands=cfg.bands, rollout_ids=ids, state_dir=base / "claude-config")
    (base / "judge.json").write_text(result.model_dump_json(indent=1))
    return result


def record(ctx: Context, entry: Entry) -> Entry:
    """Write feedback/<commit>.md, append the ledger entry and the git note."""
    config = ctx.config
    with display.stage("record", "ledger entry, run plot, feedback file, git note"):
        log = config.path("log_file")
        written = others_writes(ctx)  # again: the judge ran meanwhile
        if written:
            entry = ledger_written(ctx, entry, written)
        report_path = feedback_path(config.path("feedback"), entry)
        if entry.cached_from:
            write_report(report_path, pointer_feedback(entry, config.path("feedback") / f"{entry.cached_from}.md"))
        else:
            plot = None if entry.environment else draw_run(ctx, entry)
            details = None
            if entry.gates is not None:
                details = ctx.out / GATES_FILE
                ctx.out.mkdir(parents=True, exist_ok=True)
                write_report(details, render_gates(entry))
            write_report(report_path, render(entry, config.bands, [judge_render(entry.judge)] if entry.judge else [],
                                             plot=plot, where=report_path.parent, details=details, out=ctx.out))
        entry = append_entry(log, entry)
        line = entry.to_json()
        ctx.out.mkdir(parents=True, exist_ok=True)
        with open(ctx.out / STORED, "a", encoding="utf-8") as stored:  # what `autoenv verify --rebuild` reads
            stored.write(line + "\n")
        if entry.environment is None:  # the commit's note is the run's: another environment never overwrites it
            ctx.repo.add_note(ctx.head.commit,
                              note_text(entry) + "\n" + note_fields(line_hash(line), line_hash(raw_lines(log)[0])))
        shown = report_path.relative_to(config.root) if report_path.is_relative_to(config.root) else report_path
        display.note(f"feedback: {shown}")
    return entry


def feedback_path(folder: Path, entry: Entry) -> Path:
    """feedback/<commit>.md, or feedback/env/<id>@<hash>/<run_id>.md for an `--env` evaluation (its own file:
    never a run commit's, never another evaluation's)."""
    return folder / entry.feedback_name


def pointer_feedback(entry: Entry, source_feedback: Path) -> str:
    """feedback/<commit>.md of a cache hit: what it points at, then the source's own feedback."""
    source = entry.cached_from or ""
    head = (f"# {entry.commit[:12]}: cached from {source[:12]}\n\n{entry.verdict.reason}\n\n"
            f"This commit is not a new result: its numbers, traces and plot are those of {source[:12]} "
            f"(feedback/{source}.md, reproduced below).\n\n---\n\n")
    try:
        return head + source_feedback.read_text(encoding="utf-8")
    except OSError:
        return head + f"(feedback/{source}.md is missing.)\n"


def others_writes(ctx: Context) -> list[str]:
    """What someone other than the harness wrote to the ledger since preflight (then restored and set aside)."""
    if ctx.ledger_seen is None:
        return []
    return restore_if_written(ctx.config.path("log_file"), ctx.ledger_seen, ctx.repo.notes, ctx.out / FOUND)


def ledger_written(ctx: Context, entry: Entry, written: list[str]) -> Entry:
    """The ledger was written during the evaluation by someone other than the harness: the
    commit is recorded as tampered (never kept, never a baseline)."""
    log = ctx.config.path("log_file").name
    who = ("the candidate ran unconfined (sandbox: none), so its code could" if ctx.sandbox == "none"
           else "the candidate ran in a sandbox that keeps it out, so something outside the evaluation did")
    reason = (f"{log} was written during this evaluation by someone other than the harness "
              f"({'; '.join(written)}): {who}. The ledger was restored to the lines preflight verified; what "
              f"was found is kept in outputs/{ctx.head.commit}/{FOUND}.")
    display.tampered([*written, f"restored; what was found: outputs/{ctx.head.commit[:12]}…/{FOUND}"],
                     why=f"{log} was written during the evaluation by someone other than the harness")
    return entry.model_copy(update={"verdict": Verdict(verdict="tampered", reason=reason),
                                    "tampered": [*entry.tampered, f"{log} (written during the evaluation)"]})


def draw_run(ctx: Context, entry: Entry) -> Path | None:
    """outputs/<commit>/plot.png: the run so far, this evaluation included."""
    out = ctx.out / "plot.png"
    try:
        return plot_run(run_so_far(Project(repo=ctx.repo, config=ctx.config), entry), ctx.config.bands, out)
    except Exception as error:  # a figure must never cost the evaluation its record
        display.warn(f"the run plot could not be drawn ({type(error).__name__}: {error})")
        return None


def note_text(entry: Entry) -> str:
    parts = [f"autoenv: {entry.verdict.verdict}"]
    if entry.gates is not None and not entry.gates.passed:
        parts.append(f"gates failed: {len(entry.gates.failed)}")
    for role in ROLES:
        s = entry.stats.get(role)
        if s:
            parts.append(f"{role} {s.mean if s.mean is not None else '–'} ({s.model})")
    if entry.offline:
        parts.append("offline")
    if entry.cached_from:
        parts.append(f"cached from {entry.cached_from[:12]}")
    return " | ".join(parts) + f"\n{entry.verdict.reason}"
