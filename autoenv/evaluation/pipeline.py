"""One evaluation, top to bottom: preflight, install, gates, rollouts, stats, verdict, judge, record.

Preflight compares the protected files with the run's base (autoenv.run.runbase): a commit
that changed the rules is recorded as `tampered` straight away, without any model call.
An evaluation whose cache key (autoenv.run.cache) matches a finished one of the run is
recorded again from it, `cached_from` that commit, without any model call either. An
evaluation of the commit that was interrupted (SIGINT, SIGTERM, a killed machine) left its
finished rollouts in outputs/<commit>/: the rerun continues from them (`--restart`: not).

Read `evaluate` from the top to see the whole pipeline. Each stage's body lives with its
part: preflight (autoenv.evaluation.preflight), the stages that run the candidate in its
child (child_stages: install, gates, rollouts, derived probes; the rules themselves in
autoenv.gates), the numbers and the verdict (decision), the judge and the record (recording).
Failures before any work (config, git state, a missing API key) raise and record
nothing: they are the user's to fix. A failure after preflight is the candidate's: it is
recorded as a `crash` entry with a report, so the agent gets feedback either way. The
provider's failures are nobody's commit: preflight asks each real endpoint before any
gate runs (autoenv.evaluation.provider), and a smoke rollout that still fails at the provider after
its retries ends the evaluation as `inconclusive: provider unavailable` (exit 3).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from autoenv.core import display
from autoenv.containers.access import engine_failure
from autoenv.core.errors import AutoEnvError, EngineUnavailable
from autoenv.core.record import (
    ROLES,
    Entry,
)
from autoenv.core.traces import (
    PROVIDER_OUTCOMES,
)
from autoenv.endpoint.reference import no_reference_policy, oracle_inferred
from autoenv.evaluation.child_stages import (
    derived_gates,
    gates,
    inspect,
    install,
    rescored,
    rollout_plan,
    smoke_unavailable,
    start_worker,
)
from autoenv.evaluation.context import Context, EvalOptions, EvaluationCrashed, Outcome, timed
from autoenv.evaluation.decision import compute_stats, reuse, verdict
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recording import judge, record
from autoenv.evaluation.rescore import find_source
from autoenv.review import figures
from autoenv.run.cache import cached
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import read_entries
from autoenv.sandbox.rollouts import HarnessPatched


def evaluate(options: EvalOptions) -> Entry:
    """Run one evaluation and return the ledger entry it recorded."""
    repo = Repo(options.cwd)
    commit = repo.head().commit
    with one_at_a_time(repo, commit, "env-" + hashlib.sha256(options.env.encode()).hexdigest()[:16]
                       if options.env else commit):
        return evaluate_locked(options)


@contextmanager
def one_at_a_time(repo: Repo, commit: str, name: str | None = None) -> Iterator[None]:
    """Refuse a second evaluation of `commit` in this worktree while one runs (they would share outputs/<commit>/).

    The lock file (.git/autoenv-eval-<name>.lock) holds the stage running now as JSON (commit, stage, pid, and the
    evaluation's start in epoch seconds), and is removed when the evaluation ends, so they do not pile up."""
    path = repo.git_dir / f"autoenv-eval-{name or commit}.lock"
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AutoEnvError(f"another evaluation of commit {commit[:12]} is running in this worktree",
                               where=str(path), fix="wait for it to finish; its entry is the result") from None
        started = time.time()

        def where(stage: str) -> None:  # read by a driver waiting on this evaluation (autoenv.driver.loop)
            try:
                lock.seek(0)
                lock.truncate()
                lock.write(json.dumps({"commit": commit, "stage": stage, "pid": os.getpid(), "started": started}))
                lock.flush()
            except OSError:
                pass

        try:
            with display.stages_to(where):
                yield
        finally:
            path.unlink(missing_ok=True)  # still holding the lock: no other evaluation is between open and flock
            fcntl.flock(lock, fcntl.LOCK_UN)


def evaluate_locked(options: EvalOptions) -> Entry:
    ctx = preflight(options)
    if ctx.rules.changed:  # judged by rules the agent changed: nothing runs, no model is called
        return record(ctx, verdict(ctx, Outcome()))
    hit = None if options.force else cached(read_entries(ctx.config.path("log_file")), ctx.cache_key,
                                            branch=ctx.head.branch, run_base=ctx.rules.base)
    if hit is not None:
        return record(ctx, reuse(ctx, hit))
    if not options.force and not options.env and not ctx.resuming:
        ctx.rescore, ctx.rescore_refused = find_source(ctx.repo, ctx.head, ctx.config,
                                                       read_entries(ctx.config.path("log_file")),
                                                       offline=options.offline, run_base=ctx.rules.base)
    outcome = run_stages(ctx)
    entry = verdict(ctx, outcome)
    if outcome.error is None:
        entry = judge(ctx, entry)
    entry = record(ctx, entry)
    if outcome.error is not None:
        raise EvaluationCrashed(outcome.error, entry)
    return entry


def raise_engine_fault(ctx: Context) -> None:
    """A container runtime's engine that did not answer makes the stage's failures infrastructure (inconclusive)."""
    fault = engine_failure(ctx.config.runtime.type, ctx.engine_guard)
    if fault is not None:
        raise fault


def run_stages(ctx: Context) -> Outcome:
    """install -> gates -> smoke + rollouts -> stats; a candidate's failure ends in a crash outcome.

    Everything that runs the candidate runs in one child process (autoenv.child.main), started
    after the install and ended when the stages are done, whatever happens.
    """
    stage_name = "install"
    with ExitStack() as stack:
        try:
            with timed(ctx, "install"), display.stage("install", "candidate into the venv, import in the child process"):
                install(ctx)
                worker = stack.enter_context(start_worker(ctx))
                inspect(ctx, worker)
            stage_name = "gates"
            figures.prewarm()  # the run plot's matplotlib, imported while the child plays the probes
            with timed(ctx, "gates"), display.stage("check + probe", "dataset, determinism, oracle and exploits; no model"):
                ctx.gates = gates(ctx, worker)
            if not ctx.gates.passed:
                raise_engine_fault(ctx)
                display.warn(f"{len(ctx.gates.failed)} gate(s) failed: " + "; ".join(ctx.gates.failed))
                if not ctx.config.probes.continue_on_failure:
                    display.note("skipping the model evaluation (probes.continue_on_failure = false)")
                    return Outcome()
            missing = no_reference_policy({role: getattr(ctx.config.offline, role) for role in ROLES}, ctx.candidate,
                                          ctx.options.offline, oracle_inferred(ctx.gates))
            if missing:
                display.warn(f"{missing}: no rollout is run (an oracle hook, or real models, give a reference)")
                return Outcome(no_reference=missing)
            stage_name = "rollouts"
            result = rescored(ctx, worker) if ctx.rescore else None
            if result is None:
                with timed(ctx, "rollouts"), display.stage("smoke + rollouts", rollout_plan(ctx)):
                    result = worker.run("rollouts")
                raise_engine_fault(ctx)
            if result.smoke and result.smoke["outcome"] in PROVIDER_OUTCOMES:
                stage_name = "smoke"
                raise smoke_unavailable(ctx, result.smoke)
            if result.smoke and result.smoke["outcome"] != "ok":
                stage_name = "smoke"
                raise AutoEnvError(
                    f"the smoke rollout failed ({result.smoke['outcome']}): {result.smoke.get('error')}",
                    where=str(ctx.out / "smoke" / "traces.jsonl"),
                    fix="an env_error is the candidate's: read the smoke trace's error and fix the candidate",
                )
            stage_name = "derived probes"
            with timed(ctx, "derived"), display.stage("derived probes", "the models' best replies, mutated; no model"):
                ctx.gates = derived_gates(ctx, worker)
        except AutoEnvError as error:
            if isinstance(error, HarnessPatched):
                ctx.patched = error.names
            fault = error if isinstance(error, EngineUnavailable) else \
                engine_failure(ctx.config.runtime.type, ctx.engine_guard)
            return Outcome(error=fault or error, failed_stage=stage_name)
    if result.loaded_tasks:
        ctx.candidate = ctx.candidate.model_copy(update={"tasks": result.loaded_tasks,
                                                         "load_seconds": result.load_seconds})
    with timed(ctx, "stats"), display.stage("stats"):
        stats = compute_stats(ctx)
        display.console.print(display.summary_table(stats, ctx.config.bands))
    return Outcome(stats=stats)
