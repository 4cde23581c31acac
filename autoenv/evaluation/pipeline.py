"""One evaluation, top to bottom: preflight, install, gates, rollouts, stats, verdict, judge, record.

Preflight compares the protected files with the run's base (autoenv.run.runbase): a commit
that changed the rules is recorded as `tampered` straight away, without any model call.
An evaluation whose cache key (autoenv.run.cache) matches a finished one of the run is
recorded again from it, `cached_from` that commit, without any model call either. An
evaluation of the commit that was interrupted (SIGINT, SIGTERM, a killed machine) left its
finished rollouts in outputs/<commit>/: the rerun continues from them (`--restart`: not).

Read `evaluate` from the top to see the whole pipeline; each stage is a function below
it. Failures before any work (config, git state, a missing API key) raise and record
nothing: they are the user's to fix. A failure after preflight is the candidate's: it is
recorded as a `crash` entry with a report, so the agent gets feedback either way. The
provider's failures are nobody's commit: preflight asks each real endpoint before any
gate runs (autoenv.evaluation.provider), and a smoke rollout that still fails at the provider after
its retries ends the evaluation as `inconclusive: provider unavailable` (exit 3).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core import display
from autoenv.run.cache import cache_key, cached
from autoenv.core.config import CONFIG_NAME, Config, check_runtime_ready, load_config, with_env
from autoenv.driver.gate import agent_usd, refuse_when_spent
from autoenv.run.envref import environment_ref
from autoenv.core.errors import AutoEnvError, ProviderUnavailable
from autoenv.core.formats import iso_now, stamp
from autoenv.sandbox.forwarder import forwarding
from autoenv.gates.audit_record import AUDIT_FILE, read_audit
from autoenv.gates.derived_rules import run_derived
from autoenv.gates.rules import audit_plan, run_gates
from autoenv.run.gitrepo import Head, Repo
from autoenv.sandbox.install import inspect_candidate, install_candidate
from autoenv.run.integrity import FOUND, STORED, note_fields, restore_if_written
from autoenv.run.integrity import check as check_integrity
from autoenv.run.integrity import summary as integrity_summary
from autoenv.core.job import AuditPlan, CallLimits, Job, RolloutPlan, SamplingSpec, Seat
from autoenv.judge.causes import causes
from autoenv.judge.render import render as judge_render
from autoenv.judge.run import run_judge
from autoenv.judge.workspace import build
from autoenv.run.ledger import append_entry, line_hash, raw_lines, read_entries
from autoenv.run.ledger import verify as verify_ledger
from autoenv.core.paths import spec_warnings
from autoenv.evaluation.provider import api_key, check_endpoint
from autoenv.core.record import (
    ROLES,
    Budget,
    CandidateInfo,
    Entry,
    Environment,
    GateReport,
    JudgeResult,
    ModelStats,
    Role,
    StrongModel,
    Verdict,
)
from autoenv.evaluation.report import GATES_FILE, check_fix, render, render_gates, write_report
from autoenv.evaluation.rescore import Source, find_source, run_rescore
from autoenv.evaluation.rescore_table import paired
from autoenv.review import figures
from autoenv.review.plot import plot_run
from autoenv.review.run import Project, run_so_far
from autoenv.sandbox.rollouts import Worker, WorkerResult
from autoenv.run.runbase import NO_BASE, RulesCheck, check_rules, refuse
from autoenv.sandbox.confine import choose
from autoenv.evaluation.stats import model_stats
from autoenv.core.traces import (
    PROVIDER_OUTCOMES,
    RETRIES_FILE,
    finished_episodes,
    normalised,
    read_retries,
    read_rollouts,
    trim_partial_line,
)
from autoenv.evaluation.verdict import baseline_of, comparable, decide, rl_readiness, standing
from autoenv.endpoint.reference import no_reference_policy, oracle_inferred, reference_missing
from autoenv.run.archive import archive_previous
from autoenv.run.runbase import harness_paths

Stats = dict[Role, ModelStats]


@dataclass
class EvalOptions:
    cwd: Path = field(default_factory=Path.cwd)
    config: Path | None = None
    description: str = ""
    offline: bool = False
    force: bool = False
    """Evaluate even when the cache holds an evaluation with the same key."""
    restart: bool = False
    """Start over instead of resuming an interrupted evaluation of this commit."""
    env: str | None = None
    """An existing environment (package directory or installed id) evaluated instead of [candidate]."""
    env_id: str = ""


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
    candidate: CandidateInfo = field(default_factory=CandidateInfo)
    gates: GateReport | None = None
    warnings: list[str] = field(default_factory=list)
    rules: RulesCheck = field(default_factory=RulesCheck)
    ledger_check: str = ""
    ledger_seen: list[str] | None = None
    """The ledger's lines as preflight verified them: record() restores them if someone else wrote."""
    cache_key: str | None = None
    resuming: bool = False
    """An interrupted evaluation's outputs are kept and continued (same run id, only missing rollouts)."""
    reused: int = 0
    sandbox: str | None = None
    environment: Environment | None = None
    """`autoenv eval --env`: the environment evaluated instead of the run's candidate (recorded apart)."""
    rescore: Source | None = None
    """An evaluation of the run whose stored rollouts this one rescores (autoenv.evaluation.rescore)."""
    rescore_refused: str | None = None
    rescored_from: str | None = None


@dataclass
class Outcome:
    """How the evaluation ended, before its verdict: what record() needs besides the context."""

    stats: Stats = field(default_factory=dict)
    error: AutoEnvError | None = None
    failed_stage: str | None = None
    no_reference: str | None = None
    """Why the scripted models had nothing to play: the rollouts were not run (offline, no oracle hook)."""

    @property
    def provider_unavailable(self) -> bool:
        return isinstance(self.error, ProviderUnavailable)


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

    The lock file (.git/autoenv-eval-<name>.lock) is removed when the evaluation ends, so they do not pile up."""
    path = repo.git_dir / f"autoenv-eval-{name or commit}.lock"
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AutoEnvError(f"another evaluation of commit {commit[:12]} is running in this worktree",
                               where=str(path), fix="wait for it to finish; its entry is the result") from None
        try:
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
            return Outcome(error=error, failed_stage=stage_name)
    if result.loaded_tasks:
        ctx.candidate = ctx.candidate.model_copy(update={"tasks": result.loaded_tasks,
                                                         "load_seconds": result.load_seconds})
    with timed(ctx, "stats"), display.stage("stats"):
        stats = compute_stats(ctx)
        display.console.print(display.summary_table(stats, ctx.config.bands))
    return Outcome(stats=stats)


def rescored(ctx: Context, worker: Worker) -> WorkerResult | None:
    """The rescore stage in place of the rollouts (autoenv.evaluation.rescore); None when the child refused (roll out)."""
    assert ctx.rescore is not None
    source = ctx.rescore
    with timed(ctx, "rescore"), display.stage("rescore", f"the stored rollouts of {source.commit[:12]} scored by "
                                                          "this commit's rewards; no model"):
        result, refused = run_rescore(worker, source)
    if result is None:
        ctx.rescore_refused = f"the stored rollouts of {source.commit[:12]} were not rescored: {refused}"
        display.note(f"rolling out in full: {refused}")
        return None
    ctx.rescored_from = source.commit
    return result


def smoke_unavailable(ctx: Context, smoke: dict) -> ProviderUnavailable:
    attempts = smoke.get("attempts", 1)
    return ProviderUnavailable(
        f"provider unavailable: the smoke rollout on the target model failed at the provider "
        f"{attempts} time(s) in a row ({smoke['outcome']}): {smoke.get('error')}",
        where=f"{ctx.out / 'smoke' / 'traces.jsonl'} (endpoint {ctx.config.target.base_url})",
        fix="the candidate is not at fault and the verdict is inconclusive: check the provider's status, "
        "the key and budget.rollout_timeout, then run evaluate.sh again on this commit",
    )


class EvaluationCrashed(AutoEnvError):
    """The evaluation ended early after preflight and an entry was recorded: a crash (exit 1),
    or an unavailable provider (exit 3, an inconclusive entry)."""

    def __init__(self, error: AutoEnvError, entry: Entry):
        super().__init__(error.what, where=error.where, fix=error.fix)
        self.entry = entry
        self.exit_code = error.exit_code if isinstance(error, ProviderUnavailable) else 1


@contextmanager
def timed(ctx: Context, name: str) -> Iterator[None]:
    """Record the stage's wall time in the entry's `timings`, whether or not it fails."""
    started = time.time()
    try:
        yield
    finally:
        ctx.timings[name] = round(time.time() - started, 2)


def preflight(options: EvalOptions) -> Context:
    with display.stage("preflight", "config, git state, keys"):
        repo = Repo(options.cwd)
        config = run_config(repo, options)
        for message in verify_ledger(config.path("log_file")):
            display.note(message)
        ledger_check = verify_notes(repo, config)
        head = repo.head()
        repo.require_clean(harness_paths(config), head.commit, candidate=config.path("candidate"))
        refuse_when_spent(config.path("outputs"), config.path("log_file"), head.branch)  # autoenv run's budget
        candidate = config.path("candidate")
        if config.candidate.install and not candidate.is_dir():
            raise AutoEnvError(
                f"no candidate directory at {candidate}",
                where=f"{config.root / CONFIG_NAME} [paths] candidate",
                fix="create candidate/ (see program.md) or point paths.candidate at it",
            )
        rules = check_rules(repo, head)
        if rules.changed:
            display.tampered(rules.changed)
            if rules.on_tamper == "refuse":
                raise refuse(rules)
        elif rules.base is None:
            display.warn(NO_BASE + f" (branch {head.branch or '(detached HEAD)'} has no .autoenv/run.toml; "
                         "start runs with autoenv new <tag>)")
        if not options.offline and not rules.changed:
            check_keys(config)
            check_endpoints(config)
        check_runtime_ready(config.runtime.type, config.root / CONFIG_NAME)
        environment = environment_ref(options.env, config.candidate.taskset, config.candidate.package or None) \
            if options.env else None
        out = config.path("outputs") / (f"env/{environment.key}" if environment else head.commit)
        interrupted = None if options.restart else unfinished_run(out, read_entries(config.path("log_file")))
        if interrupted is None:
            archive_previous(out)
        else:
            display.note(f"resuming the interrupted evaluation {interrupted} from its finished rollouts "
                         "(--restart to start over)")
        display.note(f"commit {head.commit[:12]} on {head.branch or '(detached HEAD)'}: {head.subject}")
        warnings = spec_warnings(config.root)
        for warning in warnings:
            display.warn(warning)
        if options.offline:
            display.note(f"offline: target = {config.offline.target}, strong = {config.offline.strong} (scripted)")
        if environment:
            display.note(f"--env {options.env}: environment {environment.key}, recorded apart from the run's "
                         f"evaluations (compared only with evaluations of the same content; outputs {out.name}/)")
    return Context(config=config, repo=repo, head=head, options=options, run_id=interrupted or stamp(), out=out,
                   warnings=warnings, resuming=interrupted is not None,
                   rules=rules, ledger_check=ledger_check, ledger_seen=raw_lines(config.path("log_file")),
                   cache_key=None if environment else cache_key(repo, head, config, options.offline),
                   environment=environment)


def run_config(repo: Repo, options: EvalOptions) -> Config:
    """config.toml; when it no longer loads and the run base says it was changed, the base's own
    config.toml, so the commit is still recorded as tampered rather than refused."""
    path = options.config or repo.root / CONFIG_NAME
    try:
        config = load_config(path)
        return with_env(config, options.env, options.env_id) if options.env else config
    except AutoEnvError:
        rules = None if options.config else check_rules(repo, repo.head())
        if rules is None or rules.base is None or f"{CONFIG_NAME} (modified)" not in rules.changed \
                and f"{CONFIG_NAME} (deleted)" not in rules.changed:
            raise
        display.warn(f"{CONFIG_NAME} does not load; the run base's {CONFIG_NAME} (commit {rules.base[:12]}) is used")
        return load_config(path, text=repo.run_git("show", f"{rules.base}:{CONFIG_NAME}") + "\n")


def verify_notes(repo: Repo, config: Config) -> str:
    """`autoenv verify` before any work: the ledger against the git notes; what it found, for the entry."""
    log = config.path("log_file")
    notes = repo.notes()
    problems = check_integrity(log, notes)
    for problem in problems:
        display.warn(f"ledger: {problem}")
    return integrity_summary(log, notes, problems)




def check_keys(config: Config) -> None:
    for role, model in config.models().items():
        if model.api_key_var and not os.environ.get(model.api_key_var):
            raise AutoEnvError(
                f"the {role} model needs an API key in ${model.api_key_var}, which is not set",
                where=f"{config.root / CONFIG_NAME} [{role}] api_key_var",
                fix=f"export {model.api_key_var}=... (never write the key into a file), "
                "or run offline with scripted policies: bash evaluate.sh --offline",
            )


def unfinished_run(out: Path, entries: list[Entry]) -> str | None:
    """The run id of an evaluation of this commit that stopped after some rollouts and recorded nothing."""
    try:
        run_id = json.loads((out / "run.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        return None
    if any(e.run_id == run_id for e in entries) or not (out / "job.json").is_file():
        return None
    return run_id if any(finished_episodes(out / role) for role in ROLES) else None


def check_endpoints(config: Config) -> None:
    """Ask each real model's endpoint before any gate runs: a wrong URL or key is the user's
    to fix (exit 2), a provider that does not answer is nobody's commit (exit 3)."""
    for role, model in config.models().items():
        check = check_endpoint(model.base_url, model.model, api_key(model.api_key_var))
        where = f"{config.root / CONFIG_NAME} [{role}] base_url = {model.base_url}"
        if check.ok:
            display.note(f"{role} endpoint answers ({check.detail})")
        elif check.fixable and "does not list the model" in check.detail:
            raise AutoEnvError(f"the {role} endpoint does not serve the configured model: {check.detail}",
                               where=f"{config.root / CONFIG_NAME} [{role}] model = {model.model!r}",
                               fix=f"set [{role}] model to one of the models the endpoint lists (or fix [{role}] "
                               "base_url if it points at the wrong server)")
        elif check.fixable:
            raise AutoEnvError(f"the {role} endpoint refused the request: {check.detail}", where=where,
                               fix=f"check [{role}] base_url, model and the key in ${model.api_key_var or '(none)'}")
        else:
            raise ProviderUnavailable(
                f"provider unavailable: the {role} endpoint did not answer after {check.attempts} attempts: "
                f"{check.detail}", where=where,
                fix="nothing was run or recorded: check the URL and the provider's status, then run evaluate.sh again "
                "(or bash evaluate.sh --offline to evaluate with scripted models)")




def install(ctx: Context) -> None:
    if not ctx.config.candidate.install:
        display.note(f"{ctx.config.candidate.taskset}: installed already (candidate.install = false)")
        return
    changed = install_candidate(ctx.config.path("candidate"))
    display.note("installed (editable)" if changed else "already installed; code edits are picked up")


@contextmanager
def start_worker(ctx: Context) -> Iterator[Worker]:
    """The evaluation's child process, with run.json beside its job so an archived run keeps its id.

    Resuming, the stored episodes are kept when the interrupted job ran the same plan (same
    tasks, rollouts and models); otherwise they are archived and the evaluation starts over.
    Real models are reached through the harness's forwarder (autoenv.sandbox.forwarder): the child
    gets a token for it and an environment without the keys. It runs in the sandbox
    (autoenv.sandbox.confine) when this machine has one; when not, that is said here, once.
    """
    job = worker_job(ctx)
    if ctx.resuming:
        try:
            old: Job | None = Job.read(ctx.out / "job.json")
        except (OSError, ValueError):
            old = None
        if old is None or old.rollouts is None or old.seed != job.seed \
                or plan_signature(old.rollouts.model_copy(update={"reuse": True})) != plan_signature(job.rollouts):
            display.note("the interrupted evaluation ran another plan: starting over")
            archive_previous(ctx.out)
            ctx.resuming, ctx.run_id = False, stamp()
            job = worker_job(ctx)
        else:
            for role in (*ROLES, "smoke"):
                trim_partial_line(ctx.out / role)
            ctx.reused = sum(sum(finished_episodes(ctx.out / role).values()) for role in ROLES)
            display.note(f"{ctx.reused} finished rollouts reused")
    ctx.out.mkdir(parents=True, exist_ok=True)
    (ctx.out / "run.json").write_text(json.dumps({"run_id": ctx.run_id, "commit": ctx.head.commit}))
    keys = [model.api_key_var for model in ctx.config.models().values() if model.api_key_var]
    sandbox = choose()
    ctx.sandbox = sandbox.kind
    if sandbox.kind == "none":
        display.warn(f"the candidate runs unconfined (sandbox: none): {sandbox.reason}; its code can write "
                     "every file the harness can, the ledger and config.toml included")
    with forwarding(job) as (job, env), Worker(job, env=env, hide=keys, sandbox=sandbox) as worker:
        yield worker


def plan_signature(plan: RolloutPlan | None) -> object:
    """What decides whether stored episodes can be reused: the plan with each seat's model, sampling
    and kind, not its address (the forwarder serves a real model on a new port every time)."""
    if plan is None:
        return None
    seats = {role: (s.model, s.sampling, s.embedded) for role, s in plan.roles.items()}
    return (plan.model_copy(update={"roles": {}}), seats)


def inspect(ctx: Context, worker: Worker) -> None:
    info = inspect_candidate(ctx.config.path("candidate"), worker)
    ctx.candidate = CandidateInfo(taskset=info.taskset, env=info.env, task=info.task, oracle_hook=info.has_oracle,
                                  import_seconds=info.import_seconds, taskset_id=worker.job.taskset_id,
                                  env_id=worker.job.env_id or None)
    display.note(f"exports {info.taskset}" + (f" + {info.env}" if info.env else "")
                 + f"; oracle hook: {'yes' if info.has_oracle else 'no'}; import {info.import_seconds:.1f} s")


def gates(ctx: Context, worker: Worker) -> GateReport:
    report = run_gates(ctx.config, worker)
    try:
        declared = list(read_audit(worker.job.audit_dir / AUDIT_FILE).reward_range or []) or None
    except AutoEnvError:  # run_gates read it already: only a file changed since then lands here
        declared = None
    observed = next((f.data.get("range") for f in report.findings if f.name == "reward range"), None)
    if observed and not declared:  # no declared range: the statistics normalise from the probes' observed one
        ctx.candidate = ctx.candidate.model_copy(update={"reward_range": observed})
        display.note(f"rewards observed in [{observed[0]:g}, {observed[1]:g}] (no reward_range declared): "
                     "statistics normalise to [0, 1]")
    elif declared:
        ctx.candidate = ctx.candidate.model_copy(update={"reward_range": declared})
        display.note(f"the task declares rewards in [{declared[0]:g}, {declared[1]:g}]: statistics normalise to [0, 1]")
    for table in display.gates_tables(report):
        display.console.print(table)
    return report


def derived_gates(ctx: Context, worker: Worker) -> GateReport:
    """Exploit probes derived from the rollouts just stored (autoenv.child.derived); a failure discards."""
    assert ctx.gates is not None, "the derive stage runs after the gates"
    before = set(ctx.gates.failed)
    report = run_derived(ctx.config, worker, ctx.gates)
    new = [f for f in report.failed if f not in before]
    if new:
        display.warn(f"{len(new)} derived probe(s) failed: " + "; ".join(new))
    return report


def rollout_plan(ctx: Context) -> str:
    """The header of the rollouts stage: the budget that runs (fewer tasks than budget.examples when the
    taskset holds fewer)."""
    b = ctx.config.budget
    examples = examples_run(ctx)
    fewer = f" (the taskset holds {examples}; budget.examples = {b.examples})" if examples < b.examples else ""
    return (f"{examples} tasks x {b.rollouts_per_example} rollouts x 2 models{fewer}, "
            f"{concurrency_text(ctx.config)}, {b.rollout_timeout:g} s timeout")


def concurrency_text(config: Config) -> str:
    """`8 at a time per model (16 in all)`, or each model's own limit when they differ."""
    limits, total = config.concurrency()
    if len(set(limits.values())) == 1:
        return f"{next(iter(limits.values()))} at a time per model ({total} in all)"
    return ", ".join(f"{role} {n}" for role, n in limits.items()) + f" at a time ({total} in all)"


def examples_run(ctx: Context) -> int:
    """Tasks the rollouts sample: budget.examples, or every task of a smaller taskset (the audit's count)."""
    size = None
    for finding in ctx.gates.findings if ctx.gates else []:
        if finding.name == "dataset size" and not finding.data.get("infinite"):
            size = finding.data.get("size")
    if ctx.candidate.tasks is not None:
        size = ctx.candidate.tasks
    b = ctx.config.budget
    return min(b.examples, size) if isinstance(size, int) and size > 0 else b.examples


def worker_job(ctx: Context) -> Job:
    c, b = ctx.config, ctx.config.budget
    roles = {}
    limits, _ = c.concurrency()
    for role, model in c.models().items():
        sampling = SamplingSpec(temperature=model.sampling.temperature, max_tokens=model.sampling.max_tokens,
                                top_p=model.sampling.top_p)
        if ctx.options.offline:
            roles[role] = Seat(model=getattr(c.offline, role), embedded=True, sampling=sampling,
                               max_concurrent=limits[role])
        else:
            roles[role] = Seat(model=model.model, base_url=model.base_url, api_key_var=model.api_key_var,
                               sampling=sampling, max_concurrent=limits[role])
    job = config_job(c, ctx.out, audit=audit_plan(c),
                     rollouts=RolloutPlan(examples=b.examples, rollouts=b.rollouts_per_example, roles=roles, smoke=True,
                                          reuse=ctx.resuming))
    return job.model_copy(update={"rescore_from": str(ctx.rescore.out)}) if ctx.rescore else job


def config_job(config: Config, out: Path, audit: AuditPlan | None = None, rollouts: RolloutPlan | None = None) -> Job:
    """A child job with the config's seed, budget limits and runtime."""
    b, c = config.budget, config.checks
    limits = CallLimits(load_seconds=c.max_load_seconds, reward_seconds=c.max_reward_seconds,
                        tool_seconds=c.max_tool_seconds)
    return Job(candidate_dir=str(config.path("candidate")), out_dir=str(out), seed=config.seed, limits=limits,
               taskset_id=config.candidate.taskset, env_id=config.candidate.env,
               check_modules=config.candidate.checked_modules(), infinite_take=c.infinite_take,
               max_concurrent=b.max_concurrent, max_concurrent_total=config.concurrency()[1],
               rollout_timeout=b.rollout_timeout, max_turns=b.max_turns,
               runtime=config.runtime.job(), embedded_latency=config.offline.latency, audit=audit, rollouts=rollouts)


def compute_stats(ctx: Context) -> Stats:
    """Per-role statistics from the traces under the context's outputs folder."""
    job_path = ctx.out / "job.json"
    job = Job.read(job_path) if job_path.is_file() else None
    names = {role: seat.model for role, seat in job.rollouts.roles.items()} if job and job.rollouts else {}
    models = ctx.config.models()
    retries = read_retries(ctx.out / RETRIES_FILE)
    declared = ctx.candidate.reward_range
    return {
        role: model_stats(names.get(role, role), normalised(read_rollouts(ctx.out / role), declared),
                          ctx.config.bands.solve_threshold,
                          price=None if ctx.options.offline or ctx.rescored_from else models[role].price,
                          seed=ctx.config.seed,  # a rescored evaluation spent nothing on models: not priced
                          cached_mode=models[role].cached_tokens)
        .model_copy(update={"client_retries": retries.get(role)})
        for role in ROLES if (ctx.out / role).is_dir()
    }


def verdict(ctx: Context, outcome: Outcome) -> Entry:
    """The entry as far as the numbers go: statistics, readiness and the verdict against the
    last kept entry of the same run (none: this evaluation is the run's baseline)."""
    config = ctx.config
    success = outcome.error is None
    stats = outcome.stats
    offline = ctx.options.offline
    readiness = rl_readiness(stats, config.bands) if success else None
    written = others_writes(ctx)  # before the baseline is read from it
    entries = read_entries(config.path("log_file"))
    first: str | None
    if ctx.environment is not None:
        kept = environment_baseline(entries, stats, ctx.environment, offline)
        first = f"first evaluation of the environment {ctx.environment.key} (--env {ctx.environment.source})"
    else:
        kept = baseline_of(entries, stats, branch=ctx.head.branch, offline=offline, run_base=ctx.rules.base)
        first = rebased_first(entries, ctx)
    decision = decide(stats, config.bands, kept, eval_success=success,
                      error=outcome.error.what.splitlines()[0] if outcome.error else None,
                      gates_failed=[c.issue for c in causes(ctx.gates, check_fix)] if ctx.gates else None,
                      no_reference=outcome.no_reference or reference_missing(stats, ctx.candidate, offline,
                                                                          oracle_inferred(ctx.gates)),
                      run=ctx.head.branch,
                      confidence=config.verdict.confidence, seed=config.seed, tampered=ctx.rules.changed,
                      provider_unavailable=outcome.provider_unavailable, recover=ctx.rules.recovery,
                      min_tasks=config.stats.min_tasks, gates_untested=ctx.gates.untested if ctx.gates else None)
    if kept is None and first and decision.verdict == "baseline":
        t, s = stats["target"], stats["strong"]
        later = "later evaluations of the same content" if ctx.environment else "its next evaluations"
        decision = decision.model_copy(update={"reason": (
            f"{first} with target {t.model} and strong {s.model}: kept as the reference {later} are compared with. "
            f"{standing(t, s, config.bands)}")})
    strong = stats.get("strong")
    entry = Entry(
        commit=ctx.head.commit,
        timestamp=iso_now(),
        description=ctx.options.description,
        eval_success=success,
        stats=stats,
        rl_readiness=readiness,
        strong_model=StrongModel(model=strong.model if strong else None, mean=strong.mean if strong else None,
                                 solvable=readiness.strong_above_floor if readiness else None),
        verdict=decision,
        run_id=ctx.run_id,
        branch=ctx.head.branch,
        offline=ctx.options.offline,
        budget=Budget(**{**vars(config.budget), "max_concurrent_total": config.concurrency()[1]}, seed=config.seed,
                      role_concurrent=config.concurrency()[0], examples_run=examples_run(ctx) if stats else None),
        candidate=ctx.candidate,
        timings=dict(ctx.timings),
        gates=ctx.gates,
        outputs=str(ctx.out.relative_to(config.root)) if ctx.out.is_relative_to(config.root) else str(ctx.out),
        failed_stage=outcome.failed_stage,
        error=str(outcome.error) if outcome.error else None,
        warnings=ctx.warnings,
        run_base=ctx.rules.base,
        rules=ctx.rules.summary,
        tampered=list(ctx.rules.changed),
        ledger_check=ctx.ledger_check,
        cache_key=ctx.cache_key,
        reused_rollouts=ctx.reused,
        rescored_from=ctx.rescored_from,
        rescored=paired(ctx.rescore.out, ctx.out) if ctx.rescored_from and ctx.rescore else [],
        rescore_refused=ctx.rescore_refused if not ctx.rescored_from else None,
        sandbox=ctx.sandbox,
        environment=ctx.environment,
        agent_cost_usd=agent_usd(config.path("outputs"), ctx.head.branch),
    )
    return ledger_written(ctx, entry, written) if written else entry


def environment_baseline(entries: list[Entry], stats: Stats, environment: Environment, offline: bool) -> Entry | None:
    """The newest baseline or kept evaluation of the same environment content (never one of the run's)."""
    for entry in reversed(entries):
        if entry.environment is not None and entry.environment.content_hash == environment.content_hash \
                and entry.verdict.verdict in ("baseline", "keep") and comparable(entry, stats, offline):
            return entry
    return None


def rebased_first(entries: list[Entry], ctx: Context) -> str | None:
    """The baseline's words after `autoenv rebase-rules`: the run had evaluations under earlier rules."""
    base = ctx.rules.base
    if base is None or ctx.head.branch is None:
        return None
    earlier = [e for e in entries if e.branch == ctx.head.branch and e.environment is None and e.run_base != base]
    if not earlier:
        return None
    return (f"first evaluation of the run {ctx.head.branch} under the rules rebased at {base[:12]} "
            f"(autoenv rebase-rules; {len(earlier)} earlier evaluation(s) under the old rules are not compared)")


def reuse(ctx: Context, hit: Entry) -> Entry:
    """A pointer to the cached evaluation `hit` (autoenv.run.cache): verdict `cached`, no stats of its own, no model call."""
    source = hit.commit
    with timed(ctx, "cache"), display.stage("cache", f"same candidate tree, spec, config and models as {source[:12]}"):
        display.note("no model called; bash evaluate.sh --force evaluates anyway")
        reason = (f"cached from {source[:12]} (same candidate tree, spec.md, config and models): no model was called; "
                  f"that evaluation's verdict stands ({hit.verdict.verdict}: {hit.verdict.reason})")
        entry = Entry(
            commit=ctx.head.commit, timestamp=iso_now(), description=ctx.options.description,
            eval_success=hit.eval_success, verdict=Verdict(verdict="cached", reason=reason, compared_to=source),
            run_id=ctx.run_id, branch=ctx.head.branch, offline=hit.offline, budget=hit.budget,
            candidate=hit.candidate, outputs=hit.outputs, warnings=ctx.warnings, run_base=ctx.rules.base,
            rules=ctx.rules.summary, ledger_check=ctx.ledger_check, cache_key=ctx.cache_key, cached_from=source,
            agent_cost_usd=agent_usd(ctx.config.path("outputs"), ctx.head.branch))
    return entry.model_copy(update={"timings": dict(ctx.timings)})


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
                                             plot=plot, where=report_path.parent, details=details))
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
    """feedback/<commit>.md, or feedback/env/<id>@<hash>.md for an `--env` evaluation (never a run commit's file)."""
    return folder / "env" / f"{entry.environment.key}.md" if entry.environment else folder / f"{entry.commit}.md"


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
