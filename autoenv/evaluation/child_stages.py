"""The stages that run the candidate, driven from the harness: install, the child, the gates, the rollouts, the derived probes.

Everything that runs the candidate runs in one child process (autoenv.child.main, started by
autoenv.sandbox.rollouts); these functions start it, ask it for each stage and read what it
wrote. The gates' rules live in autoenv.gates, the probes they play in autoenv.child.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from autoenv.containers.access import engine_access
from autoenv.core import display
from autoenv.core.config import Config
from autoenv.core.errors import AutoEnvError, ProviderUnavailable
from autoenv.core.formats import stamp
from autoenv.core.job import AuditPlan, CallLimits, Job, RolloutPlan, SamplingSpec, Seat
from autoenv.core.record import (
    ROLES,
    CandidateInfo,
    GateReport,
)
from autoenv.core.traces import (
    finished_episodes,
    trim_partial_line,
)
from autoenv.driver.gate import usd_left
from autoenv.evaluation.canary_split import split_canaries
from autoenv.evaluation.context import Context, timed
from autoenv.evaluation.rescore import run_rescore
from autoenv.evaluation.stats import route_usd
from autoenv.gates.audit_record import AUDIT_FILE, read_audit
from autoenv.gates.derived_rules import run_derived
from autoenv.gates.rules import audit_plan, run_gates
from autoenv.gates.telltales import telltale_finding
from autoenv.run.archive import archive_previous
from autoenv.sandbox.confine import choose
from autoenv.sandbox.forwarder import SpendCap, forwarding
from autoenv.sandbox.install import inspect_candidate, install_candidate
from autoenv.sandbox.rollouts import Worker, WorkerResult


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


def smoke_unavailable(ctx: Context, smoke: dict[str, Any]) -> ProviderUnavailable:
    attempts = smoke.get("attempts", 1)
    return ProviderUnavailable(
        f"provider unavailable: the smoke rollout on the target model failed at the provider "
        f"{attempts} time(s) in a row ({smoke['outcome']}): {smoke.get('error')}",
        where=f"{ctx.out / 'smoke' / 'traces.jsonl'} (endpoint {ctx.config.target.base_url})",
        fix="the candidate is not at fault and the verdict is inconclusive: run evaluate.sh again on this commit "
        "later (the provider's status, the key and budget.rollout_timeout are the person's to check)",
    )


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
    gets a token for it and an environment without the keys; under `autoenv run` it passes no request
    once the models cost what the run had left of max_usd (spend_cap), and its account (tokens,
    refusals) lands in ctx.forwarded when the child has ended. It runs in the sandbox
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
    with forwarding(job, recorded=lambda report: setattr(ctx, "forwarded", report), cap=spend_cap(ctx)) \
            as (job, env), \
            engine_access(job, sandbox.kind) as (job, engine_env, guard), \
            Worker(job, env={**env, **engine_env}, hide=keys, sandbox=sandbox) as worker:
        ctx.engine_guard = guard
        yield worker


def spend_cap(ctx: Context) -> SpendCap | None:
    """Under `autoenv run`: what the run has left of its max_usd, priced as the statistics price tokens, for
    the forwarder to stop at (None: no live driver, no cap)."""
    left = usd_left(ctx.config.path("outputs"), ctx.head.branch)
    if left is None:
        return None
    models = ctx.config.models()
    return SpendCap(usd=left, cost=lambda role, route: route_usd(models[role], route) if role in models else None)


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
    telltales = telltale_finding(ctx.config.path("candidate"))
    if telltales is not None:  # a warning that points at the blind probes, never a failure by itself
        report = report.model_copy(update={"findings": [*report.findings, telltales]})
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
    """In a fresh child: the stored rollouts scored again (autoenv.child.reproduce_stage), then the exploit probes
    derived from them (autoenv.child.derived); a failure discards."""
    assert ctx.gates is not None, "the derive stage runs after the gates"
    before = set(ctx.gates.failed)
    plan = worker.job.rollouts
    planned = sum(plan.canaries.values()) if plan is not None and not ctx.rescored_from else 0
    split = split_canaries(ctx.out, planned)  # before anything reads the models' traces
    canaries = ([(r.role, r.probe, r.total, r.weights) for r in split.rows], planned, split.unmatched)
    with timed(ctx, "restart"):  # a fresh child: nothing the candidate kept in memory while audited and rolled out
        worker.restart()
    with timed(ctx, "reproduce"):
        worker.run("reproduce")
    report = run_derived(ctx.config, worker, ctx.gates, canaries)
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
    canaries = {role: math.ceil(c.probes.canaries * examples_run(ctx) * b.rollouts_per_example) for role in roles}
    job = config_job(c, ctx.out, audit=audit_plan(c),
                     rollouts=RolloutPlan(examples=b.examples, rollouts=b.rollouts_per_example, roles=roles, smoke=True,
                                          reuse=ctx.resuming, canaries={r: n for r, n in canaries.items() if n > 0}))
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
               runtime=config.runtime.job(), embedded_latency=config.offline.latency, audit=audit, rollouts=rollouts,
               resources=config.limits.job())
