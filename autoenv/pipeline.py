"""One evaluation, top to bottom: config, preflight, install, smoke + rollouts, stats, record.

Read `evaluate` from the top to see the whole pipeline. Failures before any work
(config, git state, a missing API key) raise and record nothing: they are the user's to
fix. A failure after preflight is the candidate's: it is recorded as a `crash` entry
with a report, so the agent gets feedback either way.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from autoenv import display
from autoenv.config import CONFIG_NAME, Config, load_config
from autoenv.errors import AutoEnvError
from autoenv.gates import GateReport, run_gates
from autoenv.gitrepo import Head, Repo
from autoenv.install import TASKSET_ID, inspect_candidate, install_candidate
from autoenv.judge import render as judge_render
from autoenv.ledger import append_entry, read_entries, last_kept
from autoenv.report import render, write_report
from autoenv.rollouts import run_worker
from autoenv.runtime import check_ready
from autoenv.stats import model_stats
from autoenv.traces import read_rollouts
from autoenv.verdict import comparable, decide, rl_readiness

ROLES = ("target", "strong")


@dataclass
class EvalOptions:
    cwd: Path = field(default_factory=Path.cwd)
    config: Path | None = None
    description: str = ""
    offline: bool = False


@dataclass
class Context:
    """What the stages share: the config, the commit, the paths, timings."""

    config: Config
    repo: Repo
    head: Head
    options: EvalOptions
    run_id: str
    out: Path
    timings: dict[str, float] = field(default_factory=dict)
    candidate: dict = field(default_factory=dict)
    gates: GateReport | None = None


def evaluate(options: EvalOptions) -> dict:
    """Run one evaluation and return the ledger entry it recorded."""
    ctx = preflight(options)
    stage_name = "install"
    try:
        with timed(ctx, "install"), display.stage("install", "candidate into the venv, import in a fresh process"):
            install(ctx)
        stage_name = "gates"
        with timed(ctx, "gates"), display.stage("check + probe", "dataset, determinism, oracle and exploits; no model"):
            ctx.gates = run_gates(ctx.config, ctx.out / "gates")
            for table in display.gates_tables(ctx.gates):
                display.console.print(table)
        if not ctx.gates.passed:
            display.warn(f"{len(ctx.gates.failed)} gate(s) failed: " + "; ".join(ctx.gates.failed))
            if not ctx.config.probes.continue_on_failure:
                display.note("skipping the model evaluation (probes.continue_on_failure = false)")
                return record(ctx, stats={})
        stage_name = "rollouts"
        with timed(ctx, "rollouts"), display.stage("smoke + rollouts", rollout_plan(ctx)):
            worker = run_worker(worker_job(ctx), ctx.out, ctx.config.path("candidate"))
        if worker.smoke and worker.smoke["outcome"] != "ok":
            stage_name = "smoke"
            raise AutoEnvError(
                f"the smoke rollout failed ({worker.smoke['outcome']}): {worker.smoke.get('error')}",
                where=str(ctx.out / "smoke" / "traces.jsonl"),
                fix="a provider_error means the endpoint or key is wrong; an env_error is the candidate's",
            )
    except AutoEnvError as error:
        entry = record(ctx, stats={}, error=error, failed_stage=stage_name)
        raise EvaluationCrashed(error, entry) from None
    with timed(ctx, "stats"), display.stage("stats"):
        stats = compute_stats(ctx)
        display.console.print(display.summary_table(stats, ctx.config.bands))
    return record(ctx, stats=stats, load_seconds=worker.load_seconds, loaded_tasks=worker.loaded_tasks)


class EvaluationCrashed(AutoEnvError):
    """The candidate failed after preflight; a crash entry was recorded."""

    def __init__(self, error: AutoEnvError, entry: dict):
        super().__init__(error.what, where=error.where, fix=error.fix)
        self.entry = entry


@contextmanager
def timed(ctx: Context, name: str):
    """Record the stage's wall time in the entry's `timings`, whether or not it fails."""
    started = time.time()
    try:
        yield
    finally:
        ctx.timings[name] = round(time.time() - started, 2)


def preflight(options: EvalOptions) -> Context:
    with display.stage("preflight", "config, git state, keys"):
        repo = Repo(options.cwd)
        config = load_config(options.config or repo.root / CONFIG_NAME)
        head = repo.head()
        dirty = [p for p in repo.dirty_paths() if not harness_owned(config, repo.root / p)]
        if dirty:
            shown = "\n".join(f"  {p}" for p in dirty[:12]) + ("\n  ..." if len(dirty) > 12 else "")
            raise AutoEnvError(
                f"the working tree has uncommitted changes; results are keyed by commit "
                f"{head.commit[:12]}, which would not be what was evaluated:\n{shown}",
                where=str(repo.root),
                fix="commit your change (git add -A && git commit -m '...') or stash it, then run again",
            )
        candidate = config.path("candidate")
        if not candidate.is_dir():
            raise AutoEnvError(
                f"no candidate directory at {candidate}",
                where=f"{config.root / CONFIG_NAME} [paths] candidate",
                fix="create candidate/ (see program.md) or point paths.candidate at it",
            )
        if not options.offline:
            check_keys(config)
        check_ready(config.runtime.type, config.root / CONFIG_NAME)
        run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        out = config.path("outputs") / head.commit
        archive_previous(out)
        display.note(f"commit {head.commit[:12]} on {head.branch or '(detached HEAD)'}: {head.subject}")
        if options.offline:
            display.note(f"offline: target = {config.offline.target}, strong = {config.offline.strong} (scripted)")
    return Context(config=config, repo=repo, head=head, options=options, run_id=run_id, out=out)


def harness_owned(config: Config, path: Path) -> bool:
    """Paths the harness itself writes (results), which never make the tree dirty."""
    owned = [config.path("outputs"), config.path("feedback")]
    log = config.path("log_file")
    owned_files = {log, log.with_name(log.name + ".lock")}
    path = path.resolve()
    return path in owned_files or any(path.is_relative_to(d.resolve()) for d in owned)


def check_keys(config: Config) -> None:
    for role, model in config.models().items():
        if model.api_key_var and not os.environ.get(model.api_key_var):
            raise AutoEnvError(
                f"the {role} model needs an API key in ${model.api_key_var}, which is not set",
                where=f"{config.root / CONFIG_NAME} [{role}] api_key_var",
                fix=f"export {model.api_key_var}=... (never write the key into a file), "
                "or run offline with scripted policies: bash evaluate.sh --offline",
            )


def archive_previous(out: Path) -> None:
    """Never delete results: an earlier run on this commit moves under previous/<run_id>/."""
    if not out.is_dir() or not any(p.name != "previous" for p in out.iterdir()):
        return
    try:
        old_id = json.loads((out / "run.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        old_id = dt.datetime.fromtimestamp(out.stat().st_mtime, dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = out / "previous" / old_id
    target.mkdir(parents=True, exist_ok=True)
    for item in list(out.iterdir()):
        if item.name != "previous":
            shutil.move(str(item), str(target / item.name))


def install(ctx: Context) -> None:
    candidate = ctx.config.path("candidate")
    changed = install_candidate(candidate)
    display.note("installed (editable)" if changed else "already installed; code edits are picked up")
    info = inspect_candidate(candidate)
    ctx.candidate = {
        "taskset": info.taskset, "env": info.env, "task": info.task,
        "oracle_hook": info.has_oracle, "import_seconds": info.import_seconds,
    }
    display.note(f"exports {info.taskset}" + (f" + {info.env}" if info.env else "")
                 + f"; oracle hook: {'yes' if info.has_oracle else 'no'}; import {info.import_seconds:.1f} s")


def rollout_plan(ctx: Context) -> str:
    b = ctx.config.budget
    return (f"{b.examples} tasks x {b.rollouts_per_example} rollouts x 2 models, "
            f"{b.max_concurrent} at a time, {b.rollout_timeout:g} s timeout")


def worker_job(ctx: Context) -> dict:
    c, b = ctx.config, ctx.config.budget
    roles = {}
    for role, model in c.models().items():
        spec = {"model": model.model, "base_url": model.base_url, "api_key_var": model.api_key_var,
                "sampling": {"temperature": model.sampling.temperature, "max_tokens": model.sampling.max_tokens,
                             "top_p": model.sampling.top_p}}
        if ctx.options.offline:
            spec.update(model=getattr(c.offline, role), embedded=True, base_url="", api_key_var="")
        roles[role] = spec
    ctx.out.mkdir(parents=True, exist_ok=True)
    (ctx.out / "run.json").write_text(json.dumps({"run_id": ctx.run_id, "commit": ctx.head.commit}))
    return {
        "candidate_dir": str(c.path("candidate")), "taskset_id": TASKSET_ID, "out_dir": str(ctx.out),
        "seed": c.seed, "examples": b.examples, "rollouts": b.rollouts_per_example,
        "max_concurrent": b.max_concurrent, "rollout_timeout": b.rollout_timeout, "max_turns": b.max_turns,
        "roles": roles, "embedded_seed": c.seed, "embedded_latency": c.offline.latency, "smoke": True,
        "runtime": c.runtime.job(),
    }


def compute_stats(ctx: Context, out: Path | None = None, models: dict[str, str] | None = None) -> dict:
    out = out or ctx.out
    job = json.loads((out / "job.json").read_text()) if (out / "job.json").is_file() else {}
    names = models or {role: spec["model"] for role, spec in job.get("roles", {}).items()}
    models = ctx.config.models()
    return {
        role: model_stats(names.get(role, role), read_rollouts(out / role), ctx.config.bands.solve_threshold,
                          price=None if ctx.options.offline else models[role].price, seed=ctx.config.seed).to_dict()
        for role in ROLES if (out / role).is_dir()
    }


def record(ctx: Context, stats: dict, error: AutoEnvError | None = None, failed_stage: str | None = None,
           load_seconds: float | None = None, loaded_tasks: int | None = None) -> dict:
    """Append the ledger entry, write feedback/<commit>.md and the git note."""
    config = ctx.config
    log_path = config.path("log_file")
    entries = read_entries(log_path)
    success = error is None
    readiness = rl_readiness(stats, config.bands) if success else {}
    kept = last_kept(entries, lambda e: comparable(e, stats, ctx.options.offline))
    verdict = decide(stats, config.bands, kept, eval_success=success,
                     error=error.what.splitlines()[0] if error else None,
                     gates_failed=ctx.gates.failed if ctx.gates else None,
                     confidence=config.verdict.confidence, seed=config.seed)
    strong = stats.get("strong") or {}
    entry = {
        "commit": ctx.head.commit,
        "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "description": ctx.options.description,
        "eval_success": success,
        "stats": stats,
        "rl_readiness": readiness,
        "strong_model": {"model": strong.get("model"), "mean": strong.get("mean"),
                         "solvable": readiness.get("strong_above_floor")},
        "verdict": verdict,
        "run_id": ctx.run_id,
        "branch": ctx.head.branch,
        "offline": ctx.options.offline,
        "budget": vars(config.budget) | {"seed": config.seed},
        "candidate": ctx.candidate | ({"tasks": loaded_tasks, "load_seconds": load_seconds} if loaded_tasks else {}),
        "timings": ctx.timings,
        "gates": ctx.gates.to_dict() if ctx.gates else None,
        "outputs": str(ctx.out.relative_to(config.root)) if ctx.out.is_relative_to(config.root) else str(ctx.out),
    }
    if error is not None:
        entry["failed_stage"] = failed_stage
        entry["error"] = str(error)
    sections = []
    if success:
        with timed(ctx, "judge"), display.stage("judge", "an isolated reader of the rollouts"):
            result = judge_entry(ctx, entry, entries)
            entry["judge"] = result.to_dict()
            sections.append(judge_render(result))
            display.note(f"{result.backend} judge" + (" ok" if result.ok else f" failed ({result.error}); offline review used"))
    with display.stage("record", "ledger entry, feedback file, git note"):
        report_path = config.path("feedback") / f"{ctx.head.commit}.md"
        write_report(report_path, render(entry, config.bands, sections))
        entry = append_entry(log_path, entry)
        ctx.repo.add_note(ctx.head.commit, note_text(entry))
        display.note(f"feedback: {report_path.relative_to(config.root) if report_path.is_relative_to(config.root) else report_path}")
    return entry


def judge_entry(ctx: Context, entry: dict, entries: list[dict], backend: str | None = None):
    """Build a fresh workspace of copies under outputs/<commit>/judge/<time>/ and judge it."""
    import dataclasses

    from autoenv.judge import run_judge
    from autoenv.judge_workspace import build

    cfg = ctx.config
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    base = ctx.out / "judge" / stamp
    previous = next((e for e in reversed(entries) if e.get("commit") != ctx.head.commit), None)
    previous_feedback = cfg.path("feedback") / f"{previous['commit']}.md" if previous else None
    ids = build(base / "workspace", repo_root=cfg.root, candidate=cfg.path("candidate"), out=ctx.out,
                entry=entry, previous_feedback=previous_feedback)
    judge_cfg = dataclasses.replace(cfg.judge, backend=backend) if backend else cfg.judge
    result = run_judge(judge_cfg, offline=ctx.options.offline and backend is None, workspace=base / "workspace",
                       entry=entry, bands=cfg.bands, rollout_ids=ids, state_dir=base / "claude-config")
    (base / "judge.json").write_text(json.dumps(result.to_dict(), indent=1))
    return result


def note_text(entry: dict) -> str:
    verdict = entry.get("verdict") or {}
    parts = [f"autoenv: {verdict.get('verdict')}"]
    if entry.get("gates") and not entry["gates"]["passed"]:
        parts.append(f"gates failed: {len(entry['gates']['failed'])}")
    for role in ROLES:
        s = (entry.get("stats") or {}).get(role)
        if s:
            parts.append(f"{role} {s.get('mean') if s.get('mean') is not None else '–'} ({s.get('model')})")
    if entry.get("offline"):
        parts.append("offline")
    return " | ".join(parts) + f"\n{verdict.get('reason', '')}"


def recompute(cwd: Path, config: Path | None = None, outputs_dir: Path | None = None, log_file: Path | None = None,
              commit: str = "HEAD", description: str = "", eval_success: bool = True) -> dict:
    """Re-score a commit from its stored traces and record a fresh entry (feedback.py)."""
    import dataclasses

    repo = Repo(cwd)
    cfg = load_config(config or repo.root / CONFIG_NAME)
    overrides = {}
    if outputs_dir is not None:
        overrides["outputs"] = str(Path(outputs_dir).resolve())
    if log_file is not None:
        overrides["log_file"] = str(Path(log_file).resolve())
    cfg = dataclasses.replace(cfg, paths=dataclasses.replace(cfg.paths, **overrides))
    head = repo.commit_info(commit)
    out = cfg.path("outputs") / head.commit
    if not (out / "job.json").is_file():
        raise AutoEnvError(
            f"no stored evaluation for commit {head.commit[:12]}",
            where=str(out),
            fix="evaluate the commit first (bash evaluate.sh), or pass --outputs-dir where its traces are",
        )
    job = json.loads((out / "job.json").read_text())
    offline = any(spec.get("embedded") for spec in job.get("roles", {}).values())
    try:
        run_id = json.loads((out / "run.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        run_id = "unknown"
    ctx = Context(config=cfg, repo=repo, head=head, run_id=run_id, out=out,
                  options=EvalOptions(cwd=cwd, description=description, offline=offline))
    if not eval_success:
        error = AutoEnvError("recorded as failed (feedback --eval-success false)")
        return record(ctx, stats={}, error=error, failed_stage="feedback")
    with display.stage("stats", f"from stored traces in {out}"):
        stats = compute_stats(ctx)
        display.console.print(display.summary_table(stats, cfg.bands))
    return record(ctx, stats=stats)


def audit_only(cwd: Path, config: Path | None = None, probes: bool = True) -> GateReport:
    """`autoenv check` / `autoenv probe`: the gates alone, on the candidate as it is on disk.

    No clean tree, no key and nothing recorded: the agent runs this before every commit.
    Traces of the probe rollouts go to outputs/scratch/<time>/.
    """
    try:
        root = Repo(cwd).root
    except AutoEnvError:
        root = Path(cwd).resolve()
    cfg = load_config(config or root / CONFIG_NAME)
    with display.stage("install", "candidate into the venv, import in a fresh process"):
        candidate = cfg.path("candidate")
        install_candidate(candidate)
        inspect_candidate(candidate)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = cfg.path("outputs") / "scratch" / f"{stamp}-{'probe' if probes else 'check'}"
    with display.stage("check + probe" if probes else "check", str(out.relative_to(cfg.root)) if out.is_relative_to(cfg.root) else str(out)):
        report = run_gates(cfg, out, probes=probes)
    tables = display.gates_tables(report)
    for table in tables if probes else tables[:1]:
        display.console.print(table)
    return report


def rejudge(cwd: Path, commit: str, backend: str | None = None, config: Path | None = None) -> dict:
    """`autoenv judge <commit>`: judge an evaluated commit again from its stored traces.

    The feedback file is rewritten (the one it replaces is kept beside the new judgement
    under outputs/<commit>/judge/); the ledger is not touched: it records evaluations.
    """
    repo = Repo(cwd)
    cfg = load_config(config or repo.root / CONFIG_NAME)
    head = repo.commit_info(commit)
    entries = read_entries(cfg.path("log_file"))
    mine = [e for e in entries if e.get("commit") == head.commit]
    if not mine:
        raise AutoEnvError(f"commit {head.commit[:12]} has no ledger entry", where=str(cfg.path("log_file")),
                           fix="evaluate it first: bash evaluate.sh")
    entry = dict(mine[-1])
    ctx = Context(config=cfg, repo=repo, head=head, run_id=entry.get("run_id", ""), out=cfg.path("outputs") / head.commit,
                  options=EvalOptions(cwd=cwd, description=entry.get("description", ""), offline=bool(entry.get("offline"))))
    with display.stage("judge", f"{backend or cfg.judge.backend} backend"):
        earlier = entries[: entries.index(mine[-1])]  # what the judge would have seen back then
        result = judge_entry(ctx, entry, earlier, backend=backend)
    entry["judge"] = result.to_dict()
    report_path = cfg.path("feedback") / f"{head.commit}.md"
    if report_path.is_file():
        newest = sorted((ctx.out / "judge").iterdir())[-1]
        shutil.copy(report_path, newest / "replaced_feedback.md")
    write_report(report_path, render(entry, cfg.bands, [judge_render(result)]))
    display.note(f"{result.backend} judge" + (" ok" if result.ok else f" failed ({result.error}); offline review used")
                 + f"; feedback rewritten: {report_path}")
    return entry
