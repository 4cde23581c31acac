"""The rollouts stage: the smoke rollout, then every model's rollouts, through verifiers' API.

It runs inside the evaluation's child process (autoenv.child.main), after the audit: a fresh
process per evaluation picks up the candidate as it is on disk now, and a candidate that
crashes the interpreter cannot take the harness down with it. Progress goes out as
`AUTOENV-EVENT {json}` lines for the parent's display; traces go to the job's out_dir.

The job is an `autoenv.core.job.Job` with a `rollouts` plan.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import time
from collections import Counter
from pathlib import Path

from autoenv.child.inprocess import HARNESS_ID, client_retries
from autoenv.child.inprocess import seat as retry_seat
from autoenv.child.permits import role_permits
from autoenv.child.runtime import choose_harness
from autoenv.child.sampling import TaskRef, choose_tasks
from autoenv.child.tasks import load_tasks, task_row, write_run_config
from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.core.traces import PROVIDER_OUTCOMES, RETRIES_FILE, finished_episodes, to_rollout
from autoenv.core.canaries import CANARY_FILE, Canaries, served_before
from autoenv.endpoint.policies import GRADER_URL_VAR, Policies
from autoenv.endpoint.server import Endpoint, Faults
from autoenv.gates.answer_oracle import inferred
from autoenv.gates.oracle import OracleBook
from autoenv.run.fingerprint import write_fingerprint

SMOKE_BACKOFF_SECONDS = 2.0  # before the second attempt; doubled before each later one
NO_KEY_VAR = "AUTOENV_NO_KEY"
LOCAL_KEY_VAR = "AUTOENV_LOCAL_KEY"


async def run(job: Job) -> None:
    import verifiers.v1 as vf  # deferred: verifiers costs seconds and is needed only inside the child
    from verifiers.v1.utils.trace_store import append_episode  # deferred with it

    plan = job.rollouts
    if plan is None:
        raise ValueError("the job has no rollout plan")
    out = job.out
    started = time.time()
    env, tasks = await load_tasks(vf, job, "rollouts")
    if not tasks:
        raise RuntimeError("the candidate's taskset loaded no tasks")
    emit("loaded", tasks=len(tasks), seconds=round(time.time() - started, 3))
    chosen = sample_tasks(tasks, plan.examples, job.seed)
    (out / "tasks.json").write_text(json.dumps([task_row(t) for t in chosen], indent=1))
    write_fingerprint(job, env, chosen)

    endpoint = None
    if any(seat.embedded for seat in plan.roles.values()):
        faults = Faults(latency=job.embedded_latency)
        endpoint = await Endpoint(Policies(OracleBook(tasks, *inferred(job.audit_dir)), seed=job.seed), faults).start()
        os.environ[LOCAL_KEY_VAR] = "local"
        os.environ[GRADER_URL_VAR] = endpoint.base_url
    os.environ.setdefault(NO_KEY_VAR, "none")

    # the embedded endpoint learns each rollout's task from the harness, never from its text
    follow = endpoint.follow if endpoint is not None else None
    contexts = {}
    for role, seat in plan.roles.items():
        base_url = endpoint.seat_url(role) if endpoint is not None and seat.embedded else seat.base_url
        key_var = LOCAL_KEY_VAR if seat.embedded else (seat.api_key_var or NO_KEY_VAR)
        sampling = seat.sampling.model_dump(exclude_none=True)
        contexts[role] = vf.ModelContext(
            model=seat.model,
            client=vf.EvalClientConfig(base_url=base_url, api_key_var=key_var),
            sampling=vf.SamplingConfig(**sampling),
        )

    extra = extra_slots(plan.canaries, chosen, job.seed)  # one more rollout on that many tasks: the canaries
    canary_roles = [role for role, n in plan.canaries.items() if n and plan.roles[role].embedded]
    limits = {role: seat.max_concurrent or job.max_concurrent for role, seat in plan.roles.items()}
    permits = role_permits(limits, job.max_concurrent_total or sum(limits.values()))
    lock = asyncio.Lock()
    rollouts = plan.rollouts
    total = {role: len(chosen) * rollouts + sum(extra.get(role, {}).values()) for role in contexts}
    # a resumed evaluation keeps the episodes stored by the interrupted one: same tasks (same seed), fewer slots
    have = {role: finished_episodes(out / role) if plan.reuse else Counter() for role in contexts}
    wanted = {role: {t.key: max(0, rollouts + extra.get(role, {}).get(t.key, 0) - have[role][t.key]) for t in chosen}
              for role in contexts}
    done = {role: total[role] - sum(wanted[role].values()) for role in contexts}
    left = {role: sum(wanted[role].values()) for role in contexts}
    if endpoint is not None:  # resumed: the canaries the interrupted stage served count
        endpoint.canaries = {role: Canaries(plan.canaries[role] - served_before(out / CANARY_FILE, role), left[role],
                                            record=out / CANARY_FILE, role=role) for role in canary_roles}

    async def play(role: str, slot, directory: Path) -> None:
        async def saved(episode) -> None:
            await append_episode(directory, episode, lock)
            done[role] += 1
            emit("rollout", role=role, done=done[role], total=total[role], ok=bool(episode.ok))

        retry_seat.set(role)  # this task's own context: the chat program's client counts its retries under it
        await env.run_slot(slot, contexts[role], permits[role], on_complete=saved, on_trace=follow)

    try:
        async with env.serving():
            if plan.smoke and not (plan.reuse and finished_episodes(out / "smoke")):
                # One rollout on the target model first: a broken candidate costs one rollout.
                (out / "smoke").mkdir(exist_ok=True)
                for attempt in range(1, plan.smoke_attempts + 1):
                    slot = env.slots(chosen[0], 1)[0]
                    token = retry_seat.set("target")
                    try:
                        episode = await env.run_slot(slot, contexts["target"], permits["target"], on_trace=follow)
                    finally:
                        retry_seat.reset(token)
                    await append_episode(out / "smoke", episode, lock)
                    smoke = {**smoke_outcome(episode), "attempts": attempt}
                    if smoke["outcome"] not in PROVIDER_OUTCOMES or attempt == plan.smoke_attempts:
                        break
                    # The provider failed, not the candidate: try again after a pause.
                    pause = SMOKE_BACKOFF_SECONDS * 2 ** (attempt - 1)
                    emit("note", message=f"smoke rollout attempt {attempt} failed at the provider "
                         f"({smoke['outcome']}: {smoke['error']}); retrying in {pause:g} s")
                    await asyncio.sleep(pause)
                emit("smoke", **smoke)
                if smoke["outcome"] != "ok":
                    return
            for role in contexts:
                (out / role).mkdir(parents=True, exist_ok=True)
                write_run_config(out / role, env, plan.roles[role].model)
            for canaries in endpoint.canaries.values() if endpoint is not None else ():
                canaries.arm()  # after the smoke rollout: never a canary
            emit("planned", total=total, left=left)
            # Interleave the models so both progress together and share the machine fairly.
            slots = []
            for task in chosen:
                groups = [[(role, s) for s in env.slots(task, n)] if (n := wanted[role][task.key]) else []
                          for role in contexts]
                slots += [pair for row in itertools.zip_longest(*groups) for pair in row if pair is not None]
            await asyncio.gather(*(play(role, slot, out / role) for role, slot in slots))
    finally:
        if endpoint is not None:
            await endpoint.stop()
        if choose_harness(job.runtime)[0] == HARNESS_ID:  # the stock harness's client runs in a process of its own
            (out / RETRIES_FILE).write_text(json.dumps({role: client_retries[role] for role in contexts}))
    emit("finished", seconds=round(time.time() - started, 3), done=done)


def extra_slots(canaries: dict[str, int], chosen: list, seed: int) -> dict[str, Counter[str]]:
    """Per role, the tasks (by key) that get one more rollout for the canaries, drawn with the seed; which of a
    role's rollouts are the canaries is not this: whoever answers the seat picks them as they start."""
    out: dict[str, Counter[str]] = {}
    for role, n in canaries.items():
        rng = random.Random(f"{seed}:canary-slots:{role}")
        keys = [t.key for t in chosen]
        picks = rng.sample(keys, min(n, len(keys))) + [rng.choice(keys) for _ in range(max(0, n - len(keys)))] \
            if keys else []
        out[role] = Counter(picks)
    return out


def smoke_outcome(episode) -> dict:
    """Classify the smoke rollout exactly as the statistics will (autoenv.core.traces)."""
    wire = json.loads(episode.model_dump_json(exclude_none=True))
    traces = wire.get("traces") or [{}]
    rollout = to_rollout(traces[0], wire)
    return {"outcome": rollout.outcome, "reward": rollout.reward, "error": rollout.error}


def sample_tasks(tasks: list, examples: int, seed: int) -> list:
    """The harness's own seeded, difficulty-stratified sample of `tasks`, in load order."""
    refs = [TaskRef(t.data.idx, t.key, getattr(t.data, "difficulty", None)) for t in tasks]
    chosen = {r.key for r in choose_tasks(refs, examples, seed)}
    return [t for t in tasks if t.key in chosen]
