"""The rollout worker: runs inside a fresh subprocess, speaks verifiers' API, writes traces.

Run as `python -m autoenv.worker JOB.json`. A fresh process per evaluation picks up the
candidate as it is on disk now (a package installed after an interpreter started is not
importable in it), and a candidate that crashes the interpreter cannot take the harness
down with it. The worker prints one `AUTOENV-EVENT {json}` line per event on stdout for
the parent's progress display; everything verifiers logs goes to the job's log file.

Job fields: candidate_dir, taskset_id, out_dir, seed, examples, rollouts, max_concurrent,
rollout_timeout, max_turns, roles {role: {model, base_url, api_key_var, sampling,
embedded}}, embedded_seed, embedded_latency, runtime {type, harness, settings} (autoenv.runtime;
absent: the subprocess runtime with the in-process harness).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

EVENT_PREFIX = "AUTOENV-EVENT "
NO_KEY_VAR = "AUTOENV_NO_KEY"
LOCAL_KEY_VAR = "AUTOENV_LOCAL_KEY"


def emit(kind: str, **fields) -> None:
    sys.stdout.write(EVENT_PREFIX + json.dumps({"event": kind, **fields}) + "\n")
    sys.stdout.flush()


def seat_names(vf, taskset_id: str) -> list[str]:
    """The env's agent seats: `agent` for a plain taskset, its own names for a custom Env."""
    config_type = vf.env_config_type(taskset_id)
    return [
        name
        for name, field in config_type.model_fields.items()
        if isinstance(field.default, vf.AgentConfig)
    ] or ["agent"]


_told: set[str] = set()


def build_env(vf, job: dict):
    from autoenv.runtime import choose_harness, seat_runtime

    harness, note = choose_harness(job.get("runtime"))
    if note and note not in _told:  # once per worker, though the audit builds the env twice
        _told.add(note)
        emit("note", message=note)
    seat = {
        "harness": {"id": harness},
        "runtime": seat_runtime(job.get("runtime")),
        "timeout": {"rollout": float(job["rollout_timeout"])},
        "max_turns": int(job["max_turns"]),
    }
    raw = {"taskset": {"id": job["taskset_id"]}}
    for name in seat_names(vf, job["taskset_id"]):
        raw[name] = dict(seat)
    return vf.load_environment(vf.resolve_env_config(raw))


def all_tasks(taskset, limit: int = 100_000) -> list:
    """Every task of `taskset` (an infinite one is bounded at `limit`)."""
    return list(taskset if taskset.bounded else taskset.take(limit))


def task_row(task) -> dict:
    data = task.data
    row = {"idx": data.idx, "key": task.key}
    for name in ("id", "difficulty", "category", "answer"):
        value = getattr(data, name, None)
        if value is not None:
            row[name] = value if isinstance(value, (str, int, float, bool)) else str(value)
    return row


async def run(job: dict) -> None:
    import verifiers.v1 as vf
    from verifiers.v1.utils.trace_store import append_episode

    from autoenv.oracle import OracleBook
    from autoenv.policies import Policies
    from autoenv.sampling import TaskRef, choose_tasks
    from autoenv.server import Endpoint, Faults

    out = Path(job["out_dir"])
    started = time.time()
    env = build_env(vf, job)
    tasks = all_tasks(env.taskset)
    if not tasks:
        raise RuntimeError("the candidate's taskset loaded no tasks")
    emit("loaded", tasks=len(tasks), seconds=round(time.time() - started, 3))
    refs = [TaskRef(t.data.idx, t.key, getattr(t.data, "difficulty", None)) for t in tasks]
    chosen_keys = {r.key for r in choose_tasks(refs, int(job["examples"]), int(job["seed"]))}
    chosen = [t for t in tasks if t.key in chosen_keys]
    (out / "tasks.json").write_text(json.dumps([task_row(t) for t in chosen], indent=1))

    endpoint = None
    if any(spec.get("embedded") for spec in job["roles"].values()):
        faults = Faults(latency=float(job.get("embedded_latency", 0.0)))
        endpoint = await Endpoint(Policies(OracleBook(tasks), seed=int(job.get("embedded_seed", 0))), faults).start()
        os.environ[LOCAL_KEY_VAR] = "local"
    os.environ.setdefault(NO_KEY_VAR, "none")

    contexts = {}
    for role, spec in job["roles"].items():
        base_url = endpoint.base_url if spec.get("embedded") else spec["base_url"]
        key_var = LOCAL_KEY_VAR if spec.get("embedded") else (spec.get("api_key_var") or NO_KEY_VAR)
        sampling = {k: v for k, v in spec.get("sampling", {}).items() if v is not None}
        contexts[role] = vf.ModelContext(
            model=spec["model"],
            client=vf.EvalClientConfig(base_url=base_url, api_key_var=key_var),
            sampling=vf.SamplingConfig(**sampling),
        )

    semaphore = asyncio.Semaphore(int(job["max_concurrent"]))
    lock = asyncio.Lock()
    rollouts = int(job["rollouts"])
    total = {role: len(chosen) * rollouts for role in contexts}
    done = {role: 0 for role in contexts}

    async def play(role: str, slot, directory: Path) -> None:
        async def saved(episode) -> None:
            await append_episode(directory, episode, lock)
            done[role] += 1
            emit("rollout", role=role, done=done[role], total=total[role], ok=bool(episode.ok))

        await env.run_slot(slot, contexts[role], semaphore, on_complete=saved)

    try:
        async with env.serving():
            if job.get("smoke"):
                # One rollout on the target model first: a broken candidate costs one rollout.
                (out / "smoke").mkdir(exist_ok=True)
                slot = env.slots(chosen[0], 1)[0]
                episode = await env.run_slot(slot, contexts["target"], semaphore)
                await append_episode(out / "smoke", episode, lock)
                smoke = smoke_outcome(episode)
                emit("smoke", **smoke)
                if smoke["outcome"] != "ok":
                    return
            for role in contexts:
                (out / role).mkdir(parents=True, exist_ok=True)
            emit("planned", total=total)
            # Interleave the models so both progress together and share the machine fairly.
            plan = [
                (role, slot)
                for task in chosen
                for slot_group in zip(*(env.slots(task, rollouts) for _ in contexts))
                for role, slot in zip(contexts, slot_group)
            ]
            await asyncio.gather(*(play(role, slot, out / role) for role, slot in plan))
    finally:
        if endpoint is not None:
            await endpoint.stop()
    emit("finished", seconds=round(time.time() - started, 3), done=done)


def smoke_outcome(episode) -> dict:
    """Classify the smoke rollout exactly as the statistics will (autoenv.traces)."""
    from autoenv.traces import to_rollout

    wire = json.loads(episode.model_dump_json(exclude_none=True))
    traces = wire.get("traces") or [{}]
    rollout = to_rollout(traces[0], wire)
    return {"outcome": rollout.outcome, "reward": rollout.reward, "error": rollout.error}


def main(argv: list[str] | None = None, runner=None) -> int:
    """Run `runner(job)` (default: the rollouts) on JOB.json, reporting failures as events."""
    runner = runner or run
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    out = Path(job["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, job["candidate_dir"])
    logging.basicConfig(
        filename=str(out / job.get("log_name", "worker.log")), level=logging.INFO, force=True,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(runner(job))
    except BaseException as e:  # report every failure as an event; the parent decides
        emit("error", type=type(e).__name__, message=str(e), traceback=traceback.format_exc())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
