"""The probes played through real rollouts, seat by seat in a multi-seat env: the audit's path for
candidates that in-process scoring cannot reach (tools, a custom Env, hooks on the reply, rewards that
need the runtime).

Each probe plays every sampled task as a real rollout against the embedded endpoint
(autoenv.endpoint), which answers as the probe. In a multi-seat env one seat is probed at a
time while verifiers' per-seat `AgentConfig.model` pins the other seats to the reference
policy of autoenv.gates.seats.seat_reference; a record is the probed seat's alone, with the
reference seats' results under `others`, so the rules (autoenv.gates.seat_rules) can tell a
harvest from a reference seat that did not play. The answer-field oracle of a tools or
custom-Env candidate is inferred here too, each format's answer played as the final reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from autoenv.child.task_fields import answer_forms, other_fields
from autoenv.child.tasks import build_env, write_run_config
from autoenv.child.worker import LOCAL_KEY_VAR
from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.core.messages import Reply, ambiguity, message_text
from autoenv.core.traces import said, to_rollout
from autoenv.endpoint.policies import Policies, advertised_names
from autoenv.endpoint.server import Endpoint
from autoenv.gates.answer_oracle import ANSWER, TRIAL_TASKS, answer_fields, answer_of, candidate_formats
from autoenv.gates.families import (
    FAMILIES,
    NOT_APPLICABLE,
    ROLLOUT_ONLY,
    ROLLOUT_STRATEGIES,
    family_replies,
    holds_constant,
    shared_surface,
    unwrapped,
)
from autoenv.gates.oracle import OracleBook, has_hook
from autoenv.gates.plain_channel import hiding_rule
from autoenv.gates.probes import IN_PROCESS_ONLY, NEEDS_ORACLE, strategy_names
from autoenv.gates.rejections import rejection
from autoenv.gates.scoring import NO_ORACLE, reward_record, same_rewards, skipped, task_messages, total_reward
from autoenv.gates.seats import NEVER_PLAYED, reference_failed, seat_reference, turns


async def infer_oracle_rollouts(vf, job: Job, env, tasks: list, seats: list[str], learnt: tuple[str, ...] = ()
                                ) -> tuple[str | None, str | None, dict[str, float]]:
    """The answer-field oracle of a tools or custom-Env candidate without a hook: each candidate field's value in
    each format played as the final reply through real rollouts on a few tasks (not recorded as probes). Returns
    (format, field, what each earned); rollouts cost more than in-process scores, so three fields at most. Every
    trial runs in one rollout session (the env's tool servers started once), each field's formats together."""
    fields = [(field, trial_tasks) for field in answer_fields(tasks, limit=3)
              if (trial_tasks := [t for t in tasks if answer_of(t, field) not in (None, "")][:TRIAL_TASKS])]
    combos = [(field, form, trial_tasks) for field, trial_tasks in fields
              for form in candidate_formats(trial_tasks, learnt)]
    books = [OracleBook(tasks, form, field) for field, form, _ in combos]
    best: tuple[float, str | None, str | None] = (0.0, None, None)
    tried: dict[str, float] = {}
    if not combos:
        return None, None, tried

    def trial(request: Any, param: str | None) -> Reply:
        reply = books[int(param or 0)].next_message(request.messages, request.task)
        return advertised_names(reply, request.tools) if reply is not None else Reply()

    async def run(play_more: Callable[[list[str], list], Awaitable[list[dict]]]) -> None:
        nonlocal best
        for field, trial_tasks in fields:
            mine = [i for i, (f, _, _) in enumerate(combos) if f == field]
            records = await play_more([f"trial:{i}" for i in mine], trial_tasks)
            for i in mine:
                form = combos[i][1]
                scored = [v for r in records if r.get("probe") == f"trial:{i}" and not r.get("skipped")
                          and not r.get("error") for v in [sum(x * r["weights"].get(k, 1.0) for k, x in
                                                               (r.get("components") or {}).items()
                                                               if isinstance(x, (int, float)))]]
                mean = round(sum(scored) / len(scored), 4) if scored else 0.0
                tried[form if field == ANSWER else f"{field}: {form}"] = mean
                if mean > best[0] + 1e-9:
                    best = (mean, form, field)
            if best[0] >= 1.0 - 1e-9:
                break

    await probe_rollouts(vf, job, env, tasks, fields[0][1][:1], [], seats, keep=False,
                         serve={"trial": (trial, "the answer-field oracle's trials, by field and format")}, then=run)
    return best[1], best[2], tried


async def probe_rollouts(vf, job: Job, env, tasks_all, sample, probes, seats: list[str] | None = None,
                         answer_format: str | None = None, keep: bool = True, answer_field: str | None = None,
                         serve: dict[str, tuple[Any, str]] | None = None,
                         then: Callable[[Callable[..., Awaitable[list[dict]]]], Awaitable[Any]] | None = None,
                         joint: bool = False) -> tuple[list[dict], bool | None]:
    """Each probe played as real rollouts. In a multi-seat env each probe plays one seat at a time while the
    other seats are pinned (verifiers' per-seat `AgentConfig.model`) to the reference policy of
    `seat_reference`; a record is the probed seat's alone, the reference seats' results under `others`.
    `serve`: more scripted policies for the endpoint, by name (the reward search's plans); `then`: awaited after
    the probes with a function that plays more policies on given tasks and returns their records (the search,
    which chooses each generation from the last, while the env's tool servers keep running). With `joint`, that
    function also plays every seat of an episode with the same policy (`together=True`: the plain-channel probe,
    autoenv.gates.plain_channel), each record marked with what its seat received and the hiding rule it was told."""
    from verifiers.v1.utils.trace_store import append_episode  # deferred: verifiers only inside the child

    out = job.audit_dir
    book = OracleBook(tasks_all, answer_format, answer_field)
    book.surface = shared_surface([task_messages(t) for t in sample])  # constants every probed task offers
    policies = Policies(book, seed=job.seed)
    for name, (handler, doc) in (serve or {}).items():
        policies.serve(name, handler, doc)
    endpoint = await Endpoint(policies).start()
    os.environ[LOCAL_KEY_VAR] = "local"
    semaphore = asyncio.Semaphore(job.max_concurrent)
    turn = asyncio.Semaphore(job.max_concurrent)  # a probe's turn to start: after a tool hung, the rest are not played
    lock = asyncio.Lock()
    records: list[dict] = []
    rescored: list[bool] = []
    reference = seat_reference(seats or [], sample[0])
    roots = [Path(job.candidate_dir).resolve()]
    modules = list(dict.fromkeys([job.module, *(job.check_modules or [])]))
    envs: dict[str | None, Any] = {None: env}
    if reference:
        envs = {seat: build_env(vf, job, {o: reference["policy"] for o in seats or [] if o != seat})
                for seat in seats or []}
    policy = reference["policy"] if reference else None

    async def play(probe: str, task, probed: str | None, together: bool = False) -> None:
        async with turn:
            if hung_tools:  # each further rollout would wait out the same limit: the probe is untested, said why
                records.append(skipped(probe, task, f"not played: {hung_tools[0]}, and the rollouts after it would "
                                                    "each wait that long"))
                emit("probe", probe=probe)
                return
            await play_one(probe, task, probed, together)

    async def play_one(probe: str, task, probed: str | None, together: bool = False) -> None:
        ctx = vf.ModelContext(model=probe, client=vf.EvalClientConfig(base_url=endpoint.base_url, api_key_var=LOCAL_KEY_VAR),
                              sampling=vf.SamplingConfig())
        seat_env: Any = env if together else envs[probed]
        episode = await seat_env.run_slot(seat_env.slots(task, 1)[0], ctx, semaphore, on_trace=endpoint.follow)
        if keep and not (out / probe).is_dir():
            (out / probe).mkdir(exist_ok=True)
            write_run_config(out / probe, seat_env, probe)
        if keep:
            await append_episode(out / probe, episode, lock)
        wire = json.loads(episode.model_dump_json(exclude_none=True))
        unknown = ambiguity(json.dumps([wire.get("errors"), [t.get("errors") for t in wire.get("traces") or []]]))
        if unknown:  # the endpoint could not tell which task this rollout plays: untested here, never judged
            records.append({**skipped(probe, task, unknown), **({"probed_seat": probed} if probed is not None else {})})
            emit("probe", probe=probe)
            return
        rejected = rejection(wire.get("errors") or [], roots, modules)
        mine, others = [], []
        sent = [t.assistant_messages[-1].content or "" for t in episode.traces if t.assistant_messages]
        for trace, wire_trace in zip(episode.traces, wire.get("traces") or []):
            rollout = to_rollout(wire_trace, wire)
            reply = trace.assistant_messages[-1].content if trace.assistant_messages else ""
            seat = getattr(trace.agent, "name", None) if trace.agent is not None else None
            if probed is not None and seat == probed and turns(trace) == 0:
                mine.append(skipped(probe, task, NEVER_PLAYED))
                continue
            full = " ".join(str(e.get("message", "")) for e in (wire_trace.get("errors") or []) + (wire.get("errors") or []))
            error = None if rollout.outcome == "ok" else tool_timeout(trace, task, job, full) or rollout.error
            record = reward_record(trace, probe, task, reply or "", error)
            if probe == "surface":  # a constant that is this task's own data value is right by the data
                record["constant_in_data"] = holds_constant(unwrapped(reply or ""), task.data)
            if probe == "constant":  # right by the data, not by the reward: the constant's fair share
                constant = getattr(endpoint.policies.oracle, "constant", None)
                record["answer_is_constant"] = str(answer_of(task, answer_field)) == constant
            record["outcome"] = rollout.outcome
            record["seat"] = getattr(trace.agent, "name", None) if trace.agent is not None else None
            record["episode"] = episode.id
            record["tool_calls"] = len(trace.tool_messages)
            if together:  # what the seat was told itself, apart from what the other seats sent it
                record.update(told_apart(trace, [s for s in sent if s and s != reply]))
            if rejected and rollout.outcome == "env_error":
                record["rejected"] = rejected
            if probed is not None and record["seat"] != probed:
                others.append({"seat": record["seat"], "policy": policy, "reward": total_reward(trace),
                               "outcome": rollout.outcome, "reply": (reply or "")[:200], "turns": turns(trace),
                               "failed": reference_failed(rollout.outcome, reply or "", turns(trace))})
                continue
            mine.append(record)
            if probe == "oracle" and rollout.outcome == "ok":
                copy = trace.model_copy(deep=True)
                copy.rewards, copy.metrics = {}, {}
                try:
                    await task.score(copy)
                    rescored.append(same_rewards(trace.rewards, copy.rewards))
                except Exception:
                    rescored.append(False)
        if probed is not None and episode.traces and not mine:  # the probed seat left no trace: it never played
            mine.append(skipped(probe, task, NEVER_PLAYED + (f" (the episode ended: {rejected})" if rejected else "")))
        for record in mine:
            if probed is not None:
                record.update(probed_seat=probed, reference=policy, others=others,
                              other_failed=any(o["failed"] for o in others))
            records.append(record)
        if not episode.traces:
            records.append({"probe": probe, "key": task.key, "idx": task.data.idx, "components": {}, "weights": {},
                            "error": "; ".join(said(e.type, e.message, e.traceback) for e in episode.errors)
                            or "no trace",
                            "outcome": "env_error", **({"rejected": rejected} if rejected else {}),
                            **({"probed_seat": probed} if probed is not None else {})})
        emit("probe", probe=probe)

    async def play_more(more: list[str], tasks: list, together: bool = False) -> list[dict]:
        """Play `more` policies on `tasks` now (`together`: every seat of an episode by the same policy); their
        records are returned, not kept with the probes'."""
        start = len(records)
        await asyncio.gather(*(play(probe, task, probed, together) for probe in more for task in tasks
                               for probed in ([None] if together else envs)))
        found = records[start:]
        del records[start:]
        return found

    played: list[tuple[str, Any]] = []
    trials: dict[str, dict[str, list[str]]] = defaultdict(dict)  # probe -> task key -> the strategies it can play
    forms = answer_forms(tasks_all, answer_field) if "field-copy" in probes else set()
    book.fields_of = lambda task: other_fields(task, answer_field, forms)
    for probe in probes:
        reason = ("scores many replies per task: played only where replies are scored in-process"
                  if probe in IN_PROCESS_ONLY else NO_ORACLE if probe in NEEDS_ORACLE | {"oracle"}
                  and not has_hook(sample[0]) and not answer_format else None)
        if reason:
            records.extend(skipped(probe, task, reason) for task in sample)
            continue
        for task in sample:  # a family whose shape the task lacks (no options, no function) is n/a there
            if probe in ROLLOUT_STRATEGIES:  # each strategy tried, then the best (play_trials)
                answer = answer_of(task, answer_field)
                names = strategy_names(probe, answer=None if answer in (None, "") else str(answer),
                                       answers=book.answers, messages=task_messages(task), surface=book.surface,
                                       fields=book.fields_of(task) if probe == "field-copy" else None)
                if names:
                    trials[probe][task.key] = names
                else:
                    records.append(skipped(probe, task, NOT_APPLICABLE[probe] if probe in FAMILIES or answer not in (
                        None, "") else "the task has no answer to change"))
            elif probe in FAMILIES and probe not in ROLLOUT_ONLY and not family_replies(
                    probe, messages=task_messages(task), answers=[], surface=book.surface):
                records.append(skipped(probe, task, NOT_APPLICABLE[probe]))
            else:
                played.append((probe, task))
    try:
        async with contextlib.AsyncExitStack() as stack:
            for seat_env in [*envs.values(), *([env] if joint and env not in envs.values() else [])]:
                await stack.enter_async_context(seat_env.serving())
            await asyncio.gather(*(play(probe, task, probed) for probe, task in played for probed in envs))
            if trials:
                records.extend(await play_trials(play_more, trials, sample, book))
            if then is not None:  # more rollouts chosen from these results, with the same tool servers running
                await then(play_more)
    finally:
        await endpoint.stop()
    # in the order they were asked for, never the order they finished in (which the machine's load decides): a
    # rule that names the first error, or lists the seats, says the same in every run
    rank = {p: i for i, p in enumerate(probes)}
    place = {t.key: i for i, t in enumerate(sample)}
    seat_rank = {s: i for i, s in enumerate(seats or [])}
    records.sort(key=lambda r: (rank.get(r.get("probe"), len(rank)), place.get(r.get("key"), len(place)),
                                seat_rank.get(str(r.get("probed_seat")), -1), seat_rank.get(str(r.get("seat")), -1),
                                json.dumps(r.get("components") or {}, sort_keys=True), str(r.get("reply") or "")))
    return records, (all(rescored) if rescored else None)


STRATEGY_TRIAL = 3
"""Sampled tasks each strategy of a probe of ROLLOUT_STRATEGIES is tried on before the best plays the rest."""
STRATEGY_MAX = 8
"""Strategies of one probe tried through rollouts at most (the first listed: field-copy's first four fields)."""


async def play_trials(play_more: Callable[..., Awaitable[list[dict]]], trials: dict[str, dict[str, list[str]]],
                      sample: list, book: OracleBook) -> list[dict]:
    """Each probe of `trials` (probe -> task key -> its strategies' names) through rollouts as in process, the best
    strategy over the tasks counting: every strategy (`probe:I`, the I-th name of `book.strategies`) on STRATEGY_TRIAL
    tasks, then the one that earned most on the rest; its records renamed to the probe, named by the strategy."""
    kept: list[dict] = []
    for probe, per_task in trials.items():
        listed = book.strategies[probe] = list(dict.fromkeys(n for names in per_task.values() for n in names))[
            :STRATEGY_MAX]
        tasks = [t for t in sample if t.key in per_task]
        trial, rest = tasks[:STRATEGY_TRIAL], tasks[STRATEGY_TRIAL:]
        emit("probe-plan-more", more=(len(listed) - 1) * len(trial))
        found = await play_more([f"{probe}:{i}" for i in range(len(listed))], trial)
        by: dict[str, list[dict]] = defaultdict(list)
        for r in found:
            by[r["probe"]].append(r)
        best = max(range(len(listed)), key=lambda i: (earned(by[f"{probe}:{i}"]), -i))
        chosen = by[f"{probe}:{best}"] + (await play_more([f"{probe}:{best}"], rest) if rest else [])
        kept += [{**r, "probe": probe, "strategy": listed[best], "strategies": len(listed)} for r in chosen]
    return kept


def earned(records: list[dict]) -> float:
    """The mean weighted reward of `records` (an error or an unscored trace earns nothing)."""
    totals = [0.0 if r.get("error") or r.get("skipped") else sum(
        v * r["weights"].get(k, 1.0) for k, v in (r.get("components") or {}).items() if isinstance(v, (int, float)))
        for r in records]
    return sum(totals) / len(totals) if totals else 0.0


RECEIVED_CHARS = 12
"""A reply at least this long found in a seat's messages was received; a shorter one only as a message whole."""


def told_apart(trace: Any, sent: list[str]) -> dict[str, Any]:
    """What a seat's own messages (system and user) told it, apart from the replies other seats `sent` that they
    hold: whether it received one, and the hiding rule its own words state (autoenv.gates.plain_channel)."""
    texts = [message_text(m.model_dump().get("content")) for m in trace.messages
             if getattr(m, "role", None) in ("system", "user")]
    text = " ".join(texts)
    # a short reply ("0") is found in many a message by chance: it counts where it is long or a message whole
    received = [s for s in sent if s.strip() and s.strip() in text
                and (len(s.strip()) >= RECEIVED_CHARS or any(t.strip() == s.strip() for t in texts))]
    for s in received:
        text = text.replace(s.strip(), " ")
    return {"received": bool(received), "rule": hiding_rule(text)}


hung_tools: list[str] = []


def tool_timeout(trace, task, job: Job, error: str | None) -> str | None:
    """A rollout that died on a tool call past checks.max_tool_seconds (verifiers' harness
    tool_timeout: the chat program's MCP client reads a timeout), named by its last tool call."""
    if not error or "ReadTimeout" not in error:
        return None
    calls = [call for message in trace.assistant_messages for call in (getattr(message, "tool_calls", None) or [])]
    name = calls[-1].name if calls else "(unknown)"
    message = (f"tool {name!r} on task idx {task.data.idx} in the audit stage did not return within "
               f"{job.limits.tool_seconds:g} s (checks.max_tool_seconds)")
    if message not in hung_tools:
        hung_tools.append(message)
    return message
