"""The audit stage: measures the candidate without a model, inside the evaluation's child process.

autoenv.child.main runs it between the install check and the rollouts. It loads the taskset
twice (determinism), measures the dataset, imports every module of the candidate
package (a tool server that dies at start costs minutes per rollout inside verifiers),
and plays the probes: the oracle (the hook, else the answer-field oracle of
autoenv.gates.answer_oracle) and the exploits of autoenv.gates.probes. A probe that cannot
be played here is recorded as skipped with its reason, never scored as a pass. The
embedded endpoint runs throughout, its address in AUTOENV_GRADER_URL, so a model-graded
reward can reach a scripted grader.

Single-turn candidates (no tools, no custom Env, no @vf.intercept/@vf.stop hooks) are scored
in-process, here: the reply is put into a trace and the task's own `score` runs on it
(autoenv.gates.scoring), which costs a fraction of a millisecond instead of a rollout
process. Multi-turn, tool and multi-seat candidates are played through real rollouts
against the embedded endpoint, seat by seat (autoenv.child.rollout_probes). The
measurements go to `audit.json` as the typed record of autoenv.gates.audit_record;
autoenv.gates.rules judges them against config.toml.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import pkgutil
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from autoenv.child import netwatch
from autoenv.child.judge_routing import grader_outage
from autoenv.child.limits import (
    Breached,
    TimeLimitExceeded,
    batchable,
    breaches,
    fresh_breaches,
    run_limited,
    run_watched,
    watch_stopped,
    watch_unit,
)
from autoenv.child.task_fields import answer_forms, other_fields
from autoenv.child.rollout_probes import hung_tools, infer_oracle_rollouts, probe_rollouts
from autoenv.child.search_stage import ActionSearch, oracle_text, read_candidate, search_in_process
from autoenv.child.task_rows import data_reach, dataset_rows
from autoenv.child.tasks import load_tasks, seat_names
from autoenv.child.worker import sample_tasks
from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.core.messages import Reply
from autoenv.endpoint.policies import GRADER_URL_VAR, Policies
from autoenv.endpoint.server import Endpoint
from autoenv.gates import dataset, shapes
from autoenv.gates.action_search import FINALISTS as ACTION_FINALISTS
from autoenv.gates.action_search import ROLLOUTS as ACTION_ROLLOUTS
from autoenv.gates.answer_oracle import answer_of, format_reply, infer_answer
from autoenv.gates.audit_record import AUDIT_FILE, AuditRecord
from autoenv.gates.families import (
    FAMILIES,
    NOT_APPLICABLE,
    SEARCHED,
    data_values,
    holds_constant,
    normal,
    shared_surface,
    unwrapped,
)
from autoenv.gates.gold import defines_gold, gold_check
from autoenv.gates.oracle import HOOK, OracleBook, has_hook
from autoenv.gates.probes import (
    ANSWER_VARIANTS,
    EXPLOITS,
    MULTI_STRATEGY,
    NEEDS_ANSWER,
    NEEDS_ORACLE,
    NEEDS_TOOLS,
    probe_replies,
    prompt_spans,
)
from autoenv.gates.scoring import (
    NO_ORACLE,
    Scaffold,
    reward_record,
    same_rewards,
    score_in_process,
    skipped,
    task_messages,
    total_reward,
)
from autoenv.gates.search import HELD_TASKS
from autoenv.gates.plain_channel import POLICY as CHANNEL_POLICY
from autoenv.gates.plain_channel import PlainChannel, planned
from autoenv.gates.seats import seat_reference
from autoenv.gates.source_reading import read_sources
from autoenv.sandbox.scripts import script_kind

STRATEGY_SAMPLE = 100
"""Tasks a many-strategy probe (prompt-copy) is scored on: its best of ~24 strategies needs more
than the usual sample, or one lucky strategy on 30 tasks looks like a leak."""
PROBE_REPLY_SECONDS = 5.0
"""The bound on building one task's replies for one probe (harness code, not the candidate's)."""
PROBE_BUDGET_SECONDS = 90.0
"""The bound on one probe over all its sampled tasks in-process (reply building and scoring together)."""
HARNESS = Path(__file__).resolve().parent.parent
SCORE_BATCH = 8
"""Replies of one task scored at once (the strategies of a many-strategy probe): few enough that a reward's
own time limit is not eaten by its neighbours on two cores."""


def fingerprint(tasks: list) -> list[str]:
    return [f"{t.key}\x1f{t.data.model_dump_json()}" for t in tasks]


def import_modules(package: str) -> list[dict]:
    """Import every module of `package` (tool servers start from these); scripts are recognised, not imported."""
    results = []
    try:
        root = importlib.import_module(package)
    except Exception as e:  # the install stage already showed this; record it anyway
        return [{"module": package, "ok": False, "error": f"{type(e).__name__}: {e}"}]
    paths = getattr(root, "__path__", None)
    names = [package] + ([m.name for m in pkgutil.walk_packages(paths, prefix=f"{package}.",
                                                                  onerror=lambda name: None)] if paths else [])
    for name in names:
        spec = importlib.util.find_spec(name) if name != package else None
        origin = Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None
        kind = script_kind(origin) if origin is not None else None
        if kind:
            results.append({"module": name, "ok": True, "script": kind})
            continue
        try:
            module = importlib.import_module(name)
            source = Path(getattr(module, "__file__", "") or "")
            serves = source.is_file() and ".run()" in source.read_text(errors="replace")
            results.append({"module": name, "ok": True, "tool_server": serves})
        except BaseException as e:
            results.append({"module": name, "ok": False,
                            "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-1500:]})
    return results


def oracle_reply(job: Job, task, messages: list[dict]):
    """The task's oracle hook under the reward limit; a hook that hung once is not called again."""
    key = f"{type(task).__qualname__}.{HOOK}"
    if key in _hung_hooks:
        raise TimeLimitExceeded(f"{_hung_hooks[key]}; not called again")
    what = f"the oracle hook on task idx {task.data.idx} in the audit stage (checks.max_reward_seconds)"
    try:
        return run_limited(lambda: getattr(task, HOOK)(messages), job.limits.reward_seconds, what, job.candidate_dir)
    except TimeLimitExceeded as e:
        _hung_hooks[key] = str(e)
        raise


_hung_hooks: dict[str, str] = {}


async def infer_oracle(vf, tasks: list, learnt: tuple[str, ...] = ()) -> tuple[str | None, str | None, dict[str, float]]:
    """The answer-field oracle of a single-turn candidate without a hook: (format, data field, what each earned).
    `learnt`: the formats read from the reward's source, tried after those the instructions state."""
    async def score(task, text: str) -> float | None:
        trace, error = await score_in_process(vf, task, Reply(content=text))
        return None if error else total_reward(trace)
    return await infer_answer(tasks, score, learnt=learnt)


def reference_text(job: Job, task, answer_format: str | None, answer_field: str | None) -> str | None:
    """The reference reply's text on `task` (the hook's, else the answer-field oracle's), None when there is none
    or the hook failed: the reward search reads it only to find the components the reference never earns."""
    hook = None
    if callable(getattr(task, HOOK, None)):
        try:
            hook = oracle_reply(job, task, task_messages(task))
        except Exception:  # the oracle finding names a failing hook; the search goes on without a ceiling
            return None
    return oracle_text(task, hook, answer_format, answer_of(task, answer_field))


async def probe_in_process(vf, job: Job, tasks_all, sample, probes, answer_format: str | None = None,
                           answer_field: str | None = None) -> tuple[list[dict], bool | None]:
    known = [(t, str(a)) for t in tasks_all if (a := answer_of(t, answer_field)) is not None]
    counts = Counter(a for _, a in known)
    answers, constant = sorted(counts), (counts.most_common(1)[0][0] if counts else None)
    forms = answer_forms(tasks_all, answer_field) if "field-copy" in probes else set()
    records, deterministic, checked = [], True, False
    strategies: dict[str, list[tuple]] = {p: [] for p in probes if p in MULTI_STRATEGY}
    wide = sample_tasks(tasks_all, max(len(sample), STRATEGY_SAMPLE), job.seed)
    surface = shared_surface([task_messages(t) for t in wide]) if "surface" in probes else None
    stalled: dict[str, str] = {}
    for probe in probes:
        begun = time.time()
        for task in wide if probe in strategies else sample:
            if probe not in stalled and time.time() - begun > PROBE_BUDGET_SECONDS:
                stalled[probe] = (f"probe {probe} ran past its budget of {PROBE_BUDGET_SECONDS:g} s before task idx "
                                  f"{task.data.idx}: skipped on the remaining tasks (untested)")
            messages = task_messages(task)
            oracle, oracle_error = None, None
            answer = answer_of(task, answer_field)
            if callable(getattr(task, HOOK, None)):
                try:
                    oracle = Reply.coerce(oracle_reply(job, task, messages))
                except TimeLimitExceeded as e:
                    oracle_error = str(e)
                except Exception as e:
                    oracle_error = f"the oracle hook raised {type(e).__name__}: {e}"
            elif answer_format and answer not in (None, ""):
                oracle = Reply(content=format_reply(answer, answer_format))
            if probe in stalled:
                records.append(skipped(probe, task, stalled[probe]))
                emit("probe", probe=probe)
                continue
            if probe == "oracle":
                replies = {} if oracle is None else {"oracle": oracle}
            else:
                try:
                    replies = bounded_replies(probe, task, oracle=oracle, answer=None if answer is None else str(answer),
                                              answers=answers, messages=messages, tools=[], key=task.key,
                                              seed=job.seed, constant=constant, surface=surface,
                                              fields=other_fields(task, answer_field, forms))
                except TimeLimitExceeded as e:  # a harness-side probe ran away: named, the rest untested
                    stalled[probe] = f"{e}; the probe was skipped on the remaining tasks (untested)"
                    records.append(skipped(probe, task, stalled[probe]))
                    emit("probe", probe=probe)
                    continue
            if not replies:
                numeric_miss = (probe in ANSWER_VARIANTS and oracle is not None and answer not in (None, "")
                                and str(answer) in (oracle.content or ""))  # an answer of no form it changes
                reason = (NO_ORACLE if oracle is None and probe in NEEDS_ORACLE | {"oracle"} and not oracle_error
                          else NOT_APPLICABLE[probe] if numeric_miss
                          else "the task has no `answer` in the oracle's reply" if probe in NEEDS_ANSWER
                          else NOT_APPLICABLE.get(probe))
                records.append(skipped(probe, task, reason, oracle_error if probe == "oracle" else None))
                emit("probe", probe=probe)
                continue
            tried: dict[str, tuple[float, dict]] = {}
            scored = await score_batch(vf, task, list(replies.values()), job.candidate_dir)
            for (strategy, reply), (trace, error) in zip(replies.items(), scored):
                if probe == "oracle" and error is None:
                    again, _ = await score_in_process(vf, task, reply)
                    deterministic &= same_rewards(trace.rewards, again.rewards)
                    checked = True
                record = reward_record(trace, probe, task, reply.content, error)
                if grader_outage(error):  # the grader of a model-graded reward unreachable: infrastructure
                    record["outcome"] = "provider_error"
                tried[strategy] = (-1.0 if error else (total_reward(trace) or 0.0), record)
            if probe in strategies:
                strategies[probe].append((task, tried))
            else:
                record = next(iter(tried.values()))[1]
                if probe == "constant":  # right by the data, not by the reward: the constant's fair share
                    record["answer_is_constant"] = str(answer) == constant
                records.append(record)
            emit("probe", probe=probe)
    for probe, per_task in strategies.items():
        records += await best_strategy(vf, probe, per_task)
    return records, (deterministic if checked else None)


async def score_batch(vf, task, replies: list[Reply], source: str | None = None) -> list[tuple]:
    """Each reply scored on `task`, in order. All of them in one worker hop where the task's rewards allow it
    (autoenv.child.limits.run_watched: each call keeps its own limit); else SCORE_BATCH at a time, each reward call in
    a worker of its own, so a many-strategy probe's replies wait on their reward workers together."""
    scaffold = Scaffold(vf, task)
    gate = asyncio.Semaphore(SCORE_BATCH)

    async def one(reply: Reply) -> tuple:
        async with gate:
            return await score_in_process(vf, task, reply, scaffold)

    hooks = [*task.hooks("reward"), *task.hooks("metric")]
    if task.config.judges or not batchable(hooks):
        return list(await asyncio.gather(*(one(reply) for reply in replies)))
    scored: list[tuple] = []

    async def batch() -> None:
        for i, reply in enumerate(replies):
            if watch_stopped() or not batchable(hooks):  # given up on, or a reward turned out to wait
                return
            watch_unit(i)
            scored.append(await score_in_process(vf, task, reply, scaffold))

    try:
        await run_watched(batch, source)
        return scored + list(await asyncio.gather(*(one(reply) for reply in replies[len(scored):])))
    except Breached as e:
        # the replies after the stuck one as lone calls, as they would have run beside it (a call that hangs in
        # one of them is cut at its own limit); then the stuck one, which says it breached (autoenv.child.limits)
        rest = list(await asyncio.gather(*(one(reply) for reply in replies[e.unit + 1:])))
        with fresh_breaches(e.fresh):
            stuck = await score_in_process(vf, task, replies[e.unit], scaffold)
        return [*scored[:e.unit], stuck, *rest]


async def best_strategy(vf, probe: str, per_task: list[tuple]) -> list[dict]:
    """The records of the one strategy (e.g. `number -1`) that earns most over all tasks;
    a task the strategy finds nothing to copy from gets an empty reply."""
    names = {name for _, tried in per_task for name in tried}
    if not names:  # no task had anything to try (each recorded as skipped, with its reason)
        return []
    # a surface constant that is a task's own data value is right by the data there: worth nothing to the strategy
    values = [data_values(task.data) if probe == "surface" else set() for task, _ in per_task]
    def held(i: int, record: dict) -> bool:
        constant = unwrapped(record.get("reply") or "")
        return bool(constant) and normal(constant) in values[i]
    def mean(name: str) -> float:
        return sum(max(tried[name][0], 0.0) if name in tried and not held(i, tried[name][1]) else 0.0
                   for i, (_, tried) in enumerate(per_task)) / len(per_task)
    best = max(sorted(names), key=mean)
    records = []
    for task, tried in per_task:
        if best in tried:
            record = tried[best][1]
        else:
            trace, error = await score_in_process(vf, task, Reply(content=""))
            record = reward_record(trace, probe, task, "", error)
        record["strategy"] = best
        record["strategies"] = len(names)
        record["choices"] = sum(1 for name in tried if name.startswith("position ") and name.endswith(" bare"))
        if probe == "surface":
            record["constant_in_data"] = holds_constant(unwrapped(record.get("reply") or ""), task.data)
        if probe == "prompt-copy":  # what was copied, and whether it is the task's answer (a span shared by
            copied = prompt_spans(task_messages(task), []).get(best)  # every task is a constant answer)
            answer = getattr(task.data, "answer", None)
            record.update(copied=copied, answer_is_copy=copied is not None and str(answer) == copied)
        records.append(record)
    return records


def bounded_replies(probe: str, task, **kw) -> dict[str, Reply]:
    """`probe_replies` under PROBE_REPLY_SECONDS: building a probe's replies is harness code, and a
    runaway one (a prompt shape it loops on) must cost one bound, named with its task idx, not the
    audit stage's deadline."""
    what = f"probe {probe} building its replies (every strategy) on task idx {task.data.idx}"
    return run_limited(lambda: probe_replies(probe, **kw), PROBE_REPLY_SECONDS, what, str(HARNESS))


def response_hooks(task) -> list[str]:
    """The task's hooks that act on the model's response inside a rollout, which in-process scoring of a bare
    reply would skip, so such candidates are probed through real rollouts: every `@vf.intercept` (it rewrites
    the reply), and a `@vf.stop` guard that reads the response or whose stop condition a reward reads (the
    design of verifiers' `interception` env). A plain turn limit (`trace.num_turns >= 1`) changes nothing a
    single-turn reply is scored on: such candidates keep in-process scoring (more tasks, every strategy)."""
    from verifiers.v1.utils.decorators import discover_decorated  # deferred: verifiers only in the child

    found = [f"@vf.intercept {fn.__name__}" for fn in discover_decorated(task, "intercept")]
    scoring = [fn for kind in ("reward", "metric") for fn in task.hooks(kind)]
    reads_stop = any("stop_condition" in _source(fn) for fn in scoring)
    for fn in task.hooks("stop"):
        if reads_stop or "response" in inspect.signature(fn).parameters:
            found.append(f"@vf.stop {fn.__name__}")
    return found


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):  # no source to read (built at run time): assume it may read anything
        return "stop_condition"


def runtime_rewards(task) -> list[str]:
    """The task's rewards and metrics that need the rollout's runtime (a `runtime` parameter without a default).

    verifiers skips them when scoring without a runtime, so in-process probe scoring would
    see no reward at all: such candidates are probed through real rollouts instead.
    """
    found = []
    for kind in ("reward", "metric"):
        for fn in task.hooks(kind):
            param = inspect.signature(fn).parameters.get("runtime")
            if param is not None and param.default is inspect.Parameter.empty:
                found.append(fn.__name__)
    return found


async def audit(job: Job) -> None:
    import verifiers.v1 as vf  # deferred: verifiers costs seconds and is needed only inside the child

    plan = job.audit
    if plan is None:
        raise ValueError("the job has no audit plan")
    out = job.audit_dir
    out.mkdir(parents=True, exist_ok=True)
    netwatch.watch()  # the hosts a network failure names (`needs network: HOST`)
    result: dict = {}
    begun = started = time.time()
    try:
        env, tasks = await load_tasks(vf, job, "audit")
        result["load_seconds"] = round(time.time() - started, 3)
        emit("loaded", tasks=len(tasks), seconds=result["load_seconds"])
        _, again = await load_tasks(vf, job, "audit")
    except TimeLimitExceeded as e:  # nothing to measure without tasks: the gates fail on it
        result["time_limits"] = [str(e)]
        (out / AUDIT_FILE).write_text(AuditRecord.model_validate(result).to_json())
        emit("finished", seconds=round(time.time() - begun, 3), done={})
        return
    first, second = fingerprint(tasks), fingerprint(again)
    result["deterministic_load"] = first == second
    if first != second:
        result["load_difference"] = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b),
                                         min(len(first), len(second)))
    result["dataset"] = dataset.measure(dataset_rows(tasks), plan.near_threshold, data_reach(vf, env))
    if not env.taskset.bounded:
        result["infinite"] = {"taken": len(tasks), "bound": job.infinite_take}
    result["modules"] = [m for package in (job.check_modules or [job.module]) for m in import_modules(package)]

    taskset_cls = type(env.taskset)
    task_cls = taskset_cls.task_type()
    has_tools = bool(task_cls.toolsets(env.taskset.config.task)) or bool(taskset_cls.toolsets(env.taskset.config))
    custom_env = type(env) is not vf.SingleAgentEnv
    runtime_signals = runtime_rewards(tasks[0]) if tasks else []
    hooks = response_hooks(tasks[0]) if tasks else []
    mode = "rollouts" if has_tools or custom_env or runtime_signals or hooks else "in-process"
    declared = getattr(task_cls, "reward_range", None) or getattr(type(env), "reward_range", None)
    if declared is not None:
        result["reward_range"] = [float(declared[0]), float(declared[1])]
    result["seats"] = seat_names(vf, job.taskset_id, job.env_id)
    result.update(mode=mode, has_tools=has_tools, custom_env=custom_env, runtime_rewards=runtime_signals,
                  response_hooks=hooks,
                  has_oracle=bool(tasks) and has_hook(tasks[0]))
    grader = await Endpoint(Policies(OracleBook(tasks), seed=job.seed)).start() if plan.probes and tasks else None
    if grader is not None:
        os.environ[GRADER_URL_VAR] = grader.base_url
    try:
        await play_probes(vf, job, env, tasks, result, mode, has_tools)
    finally:
        if grader is not None:
            await grader.stop()
    result["time_limits"] = list(breaches()) + hung_tools[:3]
    unprepared = job.out / "scripts.json"  # autoenv.sandbox.confine.prepare_scripts: what could not be resolved beforehand
    if unprepared.is_file():
        result["unprepared_scripts"] = json.loads(unprepared.read_text()).get("unprepared") or []
    result["reached_hosts"] = netwatch.reached()
    (out / AUDIT_FILE).write_text(AuditRecord.model_validate(result).to_json())
    emit("finished", seconds=round(time.time() - begun, 3), done={})


async def play_probes(vf, job: Job, env, tasks: list, result: dict, mode: str, has_tools: bool) -> None:
    """The oracle (hook, else inferred from the answer field) and the exploit probes, into `result`."""
    plan = job.audit
    assert plan is not None, "audit() checked the plan"
    answer_format, answer_field = None, None
    reading = read_candidate(tasks[0], job.candidate_dir) if plan.probes and tasks else read_sources([])
    if reading.formats or reading.keys or reading.strings:
        result["learnt"] = {"formats": list(reading.formats), "keys": list(reading.keys),
                            "strings": list(reading.strings[:20]), "numbers": list(reading.numbers[:10])}
    if plan.probes and tasks and not result["has_oracle"] and mode == "in-process":
        answer_format, answer_field, tried = await infer_oracle(vf, tasks, reading.formats)
        result.update(oracle_format=answer_format, oracle_formats_tried=tried, oracle_field=answer_field)
    elif plan.probes and tasks and not result["has_oracle"] and len(result["seats"]) < 2:
        answer_format, answer_field, tried = await infer_oracle_rollouts(vf, job, env, tasks, result["seats"],
                                                                         reading.formats)
        result.update(oracle_format=answer_format, oracle_formats_tried=tried, oracle_field=answer_field)
    if plan.probes and tasks:
        size = plan.probe_sample if mode == "in-process" else plan.rollout_sample
        sample = sample_tasks(tasks, size, job.seed)
        if defines_gold(vf, sample[0]):
            result["gold"] = await gold_check(vf, job, env, result["seats"][0], sample)
        probes = ["oracle"] + [p for p in EXPLOITS if (has_tools or p not in NEEDS_TOOLS)
                               and not (p in FAMILIES and len(result["seats"]) > 1)]  # a fixed strategy may fairly
        # beat a multi-seat game's reference seat: the families judge single-agent rewards against their range
        wide = [p for p in probes if p in MULTI_STRATEGY and p not in SEARCHED] if mode == "in-process" else []
        searched = [p for p in probes if p in SEARCHED]
        search_events = HELD_TASKS if mode == "in-process" else ACTION_ROLLOUTS + (ACTION_FINALISTS + 1) * len(sample)
        extra_events = planned(len(sample), reading.formats) if mode == "rollouts" and len(result["seats"]) > 1 else 0
        emit("probe-plan", total=extra_events + (len(probes) - len(wide) - len(searched)) * len(sample)
             + len(wide) * max(len(sample), STRATEGY_SAMPLE) + len(searched) * search_events, mode=mode)
        started = time.time()
        if mode == "in-process":
            records, deterministic = await probe_in_process(vf, job, tasks, sample,
                                                            [p for p in probes if p not in SEARCHED], answer_format,
                                                            answer_field)
            if "search" in probes:
                found, trace = await search_in_process(
                    vf, job, tasks, score_batch, lambda task: reference_text(job, task, answer_format, answer_field),
                    answer_format, reading)
                records += found
                result["search"] = trace
        else:
            searching = ActionSearch(job, tasks, sample, answer_format, reading, has_tools) if "search" in probes \
                else None
            channel = PlainChannel(tasks, reading.formats) if len(result["seats"]) > 1 else None
            serve: dict[str, tuple[Any, str]] = {}
            if searching is not None:
                serve["search"] = (searching.handler, "the reward search's action plans")
            if channel is not None:
                serve[CHANNEL_POLICY] = (channel.handler, "the plain-channel probe: every seat talks plainly")

            async def then(play_more) -> None:
                if searching is not None:
                    await searching.run(play_more)
                if channel is not None:
                    await channel.run(lambda more, some: play_more(more, some, together=True), sample)

            records, deterministic = await probe_rollouts(
                vf, job, env, tasks, sample, [p for p in probes if p not in SEARCHED], result["seats"], answer_format,
                answer_field=answer_field, serve=serve or None, then=then if serve else None,
                joint=channel is not None)
            result["seat_reference"] = seat_reference(result["seats"], sample[0])
            if searching is not None:
                records += searching.records
                result["search"] = searching.trace
            if channel is not None and channel.records:
                result["channel"] = {"strategy": channel.strategy, "tried": channel.tried, "records": channel.records}
        if deterministic is not None:  # None: no reference reply was scored, nothing to compare
            result["deterministic_scoring"] = deterministic
        result.update(probes=records, probe_seconds=round(time.time() - started, 3),
                      probe_tasks=len(sample), probe_names=probes, oracle_source=(
                          "hook" if result["has_oracle"] else f"inferred:{answer_format}" if answer_format else None))

