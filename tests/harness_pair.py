"""Run the same tasks through verifiers' stock null harness and the in-process harness, in one fresh interpreter.

`python tests/harness_pair.py SPEC.json` prints one JSON line: for each harness, one record
per rollout (what the statistics read from a trace: outcome, reward, components, turns,
tool calls, tokens, stop condition, error types) ordered by task, and the process's open
file descriptors before and after. A fresh interpreter per call because every example's
package is `candidate_env`. The rollouts are real: the worker's own `build_env`, the
project's endpoint (autoenv.endpoint.server) on 127.0.0.1 with its Faults, verifiers' run_slot.

SPEC: candidate_dir, model, tasks, harnesses, and optionally faults {Faults fields},
rollout_timeout, max_turns, concurrency, warmup (rollouts run before the descriptor count, so
verifiers' own connection pools are full before it), hold_clients (keep every client the
in-process program opens alive, so only closing it frees its sockets; counts how many were closed).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
from pathlib import Path

from autoenv.core.job import Job, RuntimeSpec


def open_fds(pooled_port: int | None = None) -> tuple[int, int]:
    """(open descriptors, of which verifiers' pools: listening sockets and connections to or from `pooled_port`).

    verifiers' interception proxy keeps a keep-alive pool of connections to the model
    endpoint that grows with concurrency and expires idle ones on a timer, and its elastic
    pool of interception servers (one listening socket each) grows with peak load: the
    count a harness could leak is the total minus those."""
    ports = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            listening = fields[3] == "0A"
            ports[fields[9]] = {int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)} | \
                ({pooled_port} if listening else set())
    total, pooled = 0, 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        total += 1
        if link.startswith("socket:[") and pooled_port in ports.get(link[8:-1], ()):
            pooled += 1
    return total, pooled


def record(episode) -> list[dict]:
    from autoenv.core.traces import to_rollout

    wire = json.loads(episode.model_dump_json(exclude_none=True))
    out = []
    for trace in wire.get("traces") or [{}]:
        rollout = to_rollout(trace, wire)
        errors = list(trace.get("errors") or []) + list(wire.get("errors") or [])
        out.append({
            "key": rollout.task_key, "outcome": rollout.outcome, "reward": rollout.reward,
            "components": rollout.components, "turns": rollout.turns,
            "tool_calls": sum(1 for n in trace.get("nodes") or [] if (n.get("message") or {}).get("role") == "tool"),
            "input_tokens": rollout.input_tokens, "output_tokens": rollout.output_tokens,
            "stop_condition": trace.get("stop_condition"), "is_timeout": bool(trace.get("is_timeout")),
            "error_types": sorted({e.get("type", "") for e in errors}), "error": rollout.error,
        })
    return out


async def run_harness(vf, spec: dict, harness: str, tasks_all: list) -> dict:
    from autoenv.child.tasks import build_env
    from autoenv.child.worker import LOCAL_KEY_VAR
    from autoenv.endpoint.policies import Policies
    from autoenv.endpoint.server import Endpoint, Faults
    from autoenv.gates.oracle import OracleBook

    job = Job(candidate_dir=".", out_dir=".", rollout_timeout=spec.get("rollout_timeout", 60),
              max_turns=spec.get("max_turns", 10), runtime=RuntimeSpec(type="subprocess", harness=harness))
    env = build_env(vf, job)
    tasks = tasks_all[: spec["tasks"]]
    faults = Faults(**spec.get("faults", {}))
    endpoint = await Endpoint(Policies(OracleBook(tasks_all), seed=0), faults).start()
    os.environ[LOCAL_KEY_VAR] = "local"
    ctx = vf.ModelContext(model=spec["model"], client=vf.EvalClientConfig(base_url=endpoint.base_url, api_key_var=LOCAL_KEY_VAR),
                          sampling=vf.SamplingConfig())
    semaphore = asyncio.Semaphore(spec.get("concurrency", len(tasks)))
    result: dict = {}
    try:
        async with env.serving():
            if spec.get("warmup"):
                await asyncio.gather(*(env.run_slot(env.slots(t, 1)[0], ctx, semaphore) for t in tasks_all[-spec["warmup"]:]))
                gc.collect()
                await asyncio.sleep(0.5)
                result["fds_before"], result["pooled_before"] = open_fds(endpoint.port)
            episodes = await asyncio.gather(*(env.run_slot(env.slots(t, 1)[0], ctx, semaphore) for t in tasks))
            if spec.get("warmup"):
                gc.collect()
                await asyncio.sleep(0.5)
                result["fds_after"], result["pooled_after"] = open_fds(endpoint.port)
    finally:
        await endpoint.stop()
    records = [r for episode in episodes for r in record(episode)]
    order = {t.key: i for i, t in enumerate(tasks)}
    result["records"] = sorted(records, key=lambda r: order.get(r["key"], -1))
    result["requests"] = endpoint.counts["requests"]
    return result


def hold_clients(install=setattr) -> list:
    """Keep every client the program opens alive, so only closing (not garbage collection) frees its sockets.

    `install(module, name, value)` puts the holding class in place (a test passes monkeypatch.setattr)."""
    from autoenv.child import inprocess

    module = inprocess.program()
    held = []

    class Holding(module.AsyncOpenAI):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            held.append(self)

    install(module, "AsyncOpenAI", Holding)
    return held


async def main(spec: dict) -> dict:
    import verifiers.v1 as vf

    from autoenv.child.tasks import all_tasks, build_env

    job = Job(candidate_dir=".", out_dir=".", rollout_timeout=60, max_turns=10, runtime=RuntimeSpec(harness="stock"))
    tasks_all = all_tasks(build_env(vf, job).taskset)
    held = hold_clients() if spec.get("hold_clients") else []
    result = {harness: await run_harness(vf, spec, harness, tasks_all) for harness in spec["harnesses"]}
    if spec.get("hold_clients"):
        result["clients"] = {"opened": len(held), "closed": sum(1 for c in held if c.is_closed())}
    return result


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text())
    sys.path.insert(0, spec["candidate_dir"])
    os.chdir(spec["candidate_dir"])
    print("RESULT " + json.dumps(asyncio.run(main(spec))))
