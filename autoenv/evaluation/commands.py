"""Commands around an evaluation that reuse its stages: recompute, rejudge, and the gates alone.

- `recompute` (feedback.py, `autoenv feedback`): statistics and verdict again from stored
  traces, recorded as a fresh entry;
- `rejudge` (`autoenv judge <commit>`): the judge stage again on an evaluated commit;
- `audit_only` (`autoenv check` / `autoenv probe`): the model-free gates on the candidate as
  it is on disk, recording nothing;
- `verify` (`autoenv verify [--rebuild]`): the ledger against the git notes (autoenv.run.integrity).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from autoenv.containers.access import engine_access
from autoenv.core import display
from autoenv.core.config import CONFIG_NAME, load_config, with_env
from autoenv.core.errors import AutoEnvError
from autoenv.core.formats import stamp
from autoenv.core.job import Job
from autoenv.core.paths import spec_warnings
from autoenv.core.record import ROLES, CandidateInfo, Entry, GateReport
from autoenv.core.venvseal import check_from_outside
from autoenv.evaluation.child_stages import config_job
from autoenv.evaluation.context import Context, EvalOptions, Outcome
from autoenv.evaluation.decision import compute_stats, verdict
from autoenv.evaluation.recheck import config_at, forged
from autoenv.evaluation.recording import judge, record
from autoenv.evaluation.report import GATES_FILE, render, render_gates, write_report
from autoenv.gates.derived_rules import run_derived
from autoenv.gates.rules import audit_plan, run_gates
from autoenv.judge.render import render as judge_render
from autoenv.run.gitrepo import Repo
from autoenv.run.integrity import check as check_integrity
from autoenv.run.integrity import own_commits
from autoenv.run.integrity import rebuild
from autoenv.run.ledger import read_entries
from autoenv.run.ledger import verify as verify_ledger
from autoenv.run.runbase import RulesCheck
from autoenv.sandbox.confine import choose
from autoenv.sandbox.install import inspect_candidate, install_candidate
from autoenv.sandbox.rollouts import Worker


def recompute(cwd: Path, config: Path | None = None, outputs_dir: Path | None = None, log_file: Path | None = None,
              commit: str = "HEAD", description: str = "", eval_success: bool = True) -> Entry:
    """Re-score a commit from its stored traces and record a fresh entry (feedback.py)."""
    repo = Repo(cwd)
    cfg = load_config(config or repo.root / CONFIG_NAME)
    overrides = {}
    if outputs_dir is not None:
        overrides["outputs"] = str(Path(outputs_dir).resolve())
    if log_file is not None:
        overrides["log_file"] = str(Path(log_file).resolve())
    cfg = dataclasses.replace(cfg, paths=dataclasses.replace(cfg.paths, **overrides))
    for message in verify_ledger(cfg.path("log_file")):  # before the judge spends anything
        display.note(message)
    head = repo.commit_info(commit)
    out = cfg.path("outputs") / head.commit
    if not (out / "job.json").is_file():
        raise AutoEnvError(
            f"no stored evaluation for commit {head.commit[:12]}",
            where=str(out),
            fix="evaluate the commit first (bash evaluate.sh), or pass --outputs-dir where its traces are",
        )
    job = Job.read(out / "job.json")
    offline = bool(job.rollouts and any(seat.embedded for seat in job.rollouts.roles.values()))
    try:
        run_id = json.loads((out / "run.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        run_id = "unknown"
    # an older commit is not checked out: its run (branch) and candidate are the ones it was evaluated with
    recorded = next((e for e in reversed(read_entries(cfg.path("log_file"))) if e.commit == head.commit), None)
    if recorded is not None:
        head = dataclasses.replace(head, branch=head.branch or recorded.branch)
    ctx = Context(config=cfg, repo=repo, head=head, run_id=run_id, out=out,
                  options=EvalOptions(cwd=cwd, description=description, offline=offline),
                  candidate=recorded.candidate if recorded is not None else CandidateInfo(),
                  rules=RulesCheck(base=recorded.run_base if recorded is not None else None),
                  warnings=spec_warnings(cfg.root))
    if not eval_success:
        error = AutoEnvError("recorded as failed (feedback --eval-success false)")
        return record(ctx, verdict(ctx, Outcome(error=error, failed_stage="feedback")))
    with display.stage("stats", f"from stored traces in {out}"):
        stats = compute_stats(ctx)
        display.console.print(display.summary_table(stats, cfg.bands))
    return record(ctx, judge(ctx, verdict(ctx, Outcome(stats=stats))))


def rejudge(cwd: Path, commit: str, backend: str | None = None, config: Path | None = None) -> Entry:
    """`autoenv judge <commit>`: judge an evaluated commit again from its stored traces.

    The feedback file is rewritten (the one it replaces is kept beside the new judgement
    under outputs/<commit>/judge/); the ledger is not touched: it records evaluations.
    """
    repo = Repo(cwd)
    cfg = load_config(config or repo.root / CONFIG_NAME)
    head = repo.commit_info(commit)
    entries = read_entries(cfg.path("log_file"))
    mine = [i for i, e in enumerate(entries) if e.commit == head.commit]
    if not mine:
        raise AutoEnvError(f"commit {head.commit[:12]} has no ledger entry", where=str(cfg.path("log_file")),
                           fix="evaluate it first: bash evaluate.sh")
    entry = entries[mine[-1]]
    ctx = Context(config=cfg, repo=repo, head=head, run_id=entry.run_id, out=cfg.path("outputs") / head.commit,
                  options=EvalOptions(cwd=cwd, description=entry.description, offline=entry.offline))
    # the judge sees only what it would have seen back then: the entries before this one
    entry = judge(ctx, entry, backend=backend, entries=entries[: mine[-1]])
    assert entry.judge is not None
    report_path = cfg.path("feedback") / f"{head.commit}.md"
    if report_path.is_file():
        newest = sorted((ctx.out / "judge").iterdir())[-1]
        shutil.copy(report_path, newest / "replaced_feedback.md")
    plot = ctx.out / "plot.png"
    details = ctx.out / GATES_FILE
    if entry.gates is not None and not details.is_file():  # an evaluation recorded before gates.md existed
        write_report(details, render_gates(entry))
    write_report(report_path, render(entry, cfg.bands, [judge_render(entry.judge)],
                                     plot=plot if plot.is_file() else None, where=report_path.parent,
                                     details=details if details.is_file() else None, out=ctx.out))
    display.note(f"feedback rewritten: {report_path}")
    return entry


def audit_only(cwd: Path, config: Path | None = None, probes: bool = True, env: str | None = None,
               env_id: str = "", from_commit: str | None = None) -> GateReport:
    """`autoenv check` / `autoenv probe`: the gates alone, on the candidate as it is on disk.

    No clean tree, no key and nothing recorded: the agent runs this before every commit.
    Traces of the probe rollouts go to outputs/scratch/<time>/. With `from_commit`, the
    probes derived from that evaluation's stored rollouts (outputs/<commit>/) are added.
    """
    try:
        found = Repo(cwd)
        repo: Repo | None = found
        root = found.root
    except AutoEnvError:
        repo, root = None, Path(cwd).resolve()
    cfg = load_config(config or root / CONFIG_NAME)
    if env:
        cfg = with_env(cfg, env, env_id)
    candidate = cfg.path("candidate")
    out = cfg.path("outputs") / "scratch" / f"{stamp()}-{'probe' if probes else 'check'}"
    job = config_job(cfg, out, audit=audit_plan(cfg, probes))
    if from_commit:
        commit = repo.resolve(from_commit) if repo is not None else from_commit
        reference = cfg.path("outputs") / commit
        if not any((reference / role / "traces.jsonl").is_file() for role in ROLES):
            raise AutoEnvError(f"no stored rollouts of commit {from_commit} ({commit[:12]})",
                               where=str(reference), fix="evaluate that commit first (bash evaluate.sh), "
                               "or name a commit listed in the ledger")
        job = job.model_copy(update={"reference_dir": str(reference)})
    if cfg.candidate.install:
        with display.stage("install", f"{cfg.candidate.taskset} into the venv"):
            install_candidate(candidate)
    sandbox = choose()
    with engine_access(job, sandbox.kind) as (job, engine_env, _), Worker(job, env=engine_env, sandbox=sandbox) as worker:
        with display.stage("import", "the candidate in the child process"):
            inspect_candidate(candidate, worker)
        gates_dir = out / "gates"
        shown = str(gates_dir.relative_to(cfg.root)) if gates_dir.is_relative_to(cfg.root) else str(gates_dir)
        with display.stage("check + probe" if probes else "check", shown):
            report = run_gates(cfg, worker)
        if from_commit:
            with display.stage("derived probes", f"the best replies stored in {job.reference_dir}, mutated"):
                report = run_derived(cfg, worker, report)
    tables = display.gates_tables(report)
    for table in tables if probes else tables[:1]:
        display.console.print(table)
    return report


def verify(cwd: Path, config: Path | None = None, restore: bool = False) -> tuple[list[str], int]:
    """`autoenv verify`: the problems found in the ledger and the notes, and its entries (after `restore`)."""
    repo = Repo(cwd)
    cfg = load_config(config or repo.root / CONFIG_NAME)
    log = cfg.path("log_file")
    notes = repo.notes()
    if restore:
        count = rebuild(log, cfg.path("outputs"), notes)
        display.note(f"rebuilt {log.name}: {count} entries from {cfg.path('outputs')} and the git notes")
    problems = check_integrity(log, notes, own_commits(cfg.path("outputs"), repo.ancestors("HEAD")))
    if not problems:
        problems = forged(read_entries(log), cfg, show=config_at(repo, cfg))
    venv = check_from_outside()
    problems += [f"harness venv: {line}" for line in venv or []]
    return problems, len(read_entries(log)) if not problems else -1
