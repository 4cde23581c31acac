"""The entry as far as the numbers go: statistics per model, the verdict against the last kept entry, a cache
hit's pointer, and `tampered` for a candidate whose code misused the model forwarder (autoenv.sandbox.forwarder)."""

from __future__ import annotations

from autoenv.core import display
from autoenv.core.formats import iso_now
from autoenv.core.job import Job
from autoenv.core.record import (
    ROLES,
    Budget,
    Entry,
    Environment,
    Forwarded,
    StrongModel,
    Verdict,
)
from autoenv.core.traces import (
    RETRIES_FILE,
    normalised,
    read_retries,
    read_rollouts,
)
from autoenv.driver.gate import agent_usd
from autoenv.endpoint.reference import oracle_inferred, reference_missing
from autoenv.evaluation.child_stages import examples_run
from autoenv.evaluation.context import Context, Outcome, Stats, timed
from autoenv.evaluation.recheck import config_at, genuine
from autoenv.evaluation.recording import ledger_written, others_writes
from autoenv.evaluation.report import check_fix
from autoenv.evaluation.rescore_table import paired
from autoenv.evaluation.stats import model_stats, route_usd
from autoenv.evaluation.verdict import baseline_of, comparable, decide, rl_readiness, standing
from autoenv.judge.causes import causes
from autoenv.run.ledger import read_entries


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
    entries = genuine(read_entries(config.path("log_file")), config, show=config_at(ctx.repo, config))
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
        forwarded=priced(ctx),
        environment=ctx.environment,
        agent_cost_usd=agent_usd(config.path("outputs"), ctx.head.branch),
    )
    if entry.forwarded is not None and entry.forwarded.misused:
        entry = forwarder_misused(ctx, entry, entry.forwarded)
    if ctx.patched:
        entry = harness_patched(ctx, entry)
    return ledger_written(ctx, entry, written) if written else entry


def priced(ctx: Context) -> Forwarded | None:
    """The forwarder's account with each route's tokens priced as the statistics price the traces' (the
    driver's max_usd counts the larger of the two: autoenv.driver.budget)."""
    report = ctx.forwarded
    if report is None:
        return None
    models = ctx.config.models()
    return report.model_copy(update={"routes": {
        role: route.model_copy(update={"cost_usd": route_usd(models[role], route)}) if role in models else route
        for role, route in report.routes.items()}})


def forwarder_misused(ctx: Context, entry: Entry, report: Forwarded) -> Entry:
    """The candidate's code used the evaluation's model token for requests no rollout sends (another model,
    another path, more tokens than the seat's, past the plan's bound): the commit is recorded as tampered, as a
    ledger written during the evaluation is (never kept, never a baseline). The requests never reached the
    provider as asked: refused, or clamped to the seat's sampling."""
    where = f"outputs/{ctx.head.commit}/forwarder.json"
    reason = (f"the candidate's code sent the harness's model forwarder requests that are not rollouts "
              f"({report.summary()}). The forwarder serves the seats' rollouts only: they were refused or clamped "
              f"and never reached the provider as asked; {where} lists them. Remove the code that calls the model "
              "endpoint from the candidate (the rollouts are the harness's to run) and evaluate again.")
    display.tampered([f"{r.method} {r.path}: {r.action} ({r.reason})" for r in report.requests[:5]],
                     why="the candidate's code misused the model forwarder")
    return entry.model_copy(update={"verdict": Verdict(verdict="tampered", reason=reason), "tampered": [
        *entry.tampered, f"forwarder: {report.refused} request(s) refused, {report.clamped} clamped ({where})"]})


def harness_patched(ctx: Context, entry: Entry) -> Entry:
    """The candidate's code changed AutoEnv's code in the child (the stage table, a probe's scoring, a function's
    code: autoenv.child.tripwire): what the gates measured may be what the candidate chose to show them, so the
    commit is recorded as tampered (never kept, never a baseline), naming what was changed."""
    names = ", ".join(ctx.patched[:8]) + (f" and {len(ctx.patched) - 8} more" if len(ctx.patched) > 8 else "")
    reason = (f"the candidate's code changed AutoEnv's own code in the evaluation's child process: {names}. A reward "
              "that knows when it is audited can pay differently then, so nothing measured in that process counts. "
              "Remove the code that replaces, wraps or traces AutoEnv's functions and evaluate again.")
    display.tampered(ctx.patched[:5], why="the candidate's code patched AutoEnv's code in the child")
    return entry.model_copy(update={"verdict": Verdict(verdict="tampered", reason=reason), "tampered": [
        *entry.tampered, f"child: patched {names}"]})


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
