"""Per-rollout overhead of a real verifiers rollout: stock null harness vs the in-process harness.

Runs the rollout worker (the same code `autoenv eval --offline` runs) on each clean example
with the `oracle` policy, sequentially and at concurrency 8, once with verifiers' stock null
harness (a chat-program process per rollout) and once with AutoEnv's in-process harness
(the same program as a coroutine), and measures the endpoint alone with direct HTTP
requests, side by side in one run. A rollout's cost is the rollout phase's wall time (from
the worker's `planned` event to its last `rollout` event, as the parent received them:
taskset loading and tool-server start-up are excluded) divided by the rollouts.

Usage: .venv/bin/python bench/rollout_overhead.py [--rollouts 16] [--examples arithmetic shopping]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import aiohttp

from autoenv.core.messages import Reply
from autoenv.core.paths import EXAMPLES, examples
from autoenv.core.traces import read_rollouts
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint
from autoenv.sandbox.rollouts import oracle_job, run_worker

HARNESSES = ("stock", "inprocess")


class _Fixed:
    def next_message(self, messages, key=None):
        return Reply(content="<answer>1</answer>")

    def task_key(self, messages, key=None):
        return "k"


async def endpoint_rate(requests: int) -> float:
    async with Endpoint(Policies(_Fixed())) as ep, aiohttp.ClientSession() as http:
        body = {"model": "oracle", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        started = time.perf_counter()
        for _ in range(requests):
            async with http.post(f"{ep.base_url}/chat/completions", json=body) as response:
                await response.read()
        return (time.perf_counter() - started) / requests


def worker_rate(example: str, rollouts: int, concurrency: int, harness: str) -> float:
    candidate = EXAMPLES / example
    with tempfile.TemporaryDirectory() as tmp:
        result = run_worker(oracle_job(candidate, Path(tmp), rollouts, concurrency, harness))
        ok = [r for r in read_rollouts(Path(tmp) / "target") if r.outcome == "ok"]
        assert len(ok) == rollouts, f"{example} {harness}: {len(ok)} of {rollouts} rollouts ok"
        planned = next(e["received"] for e in result.events if e["event"] == "planned")
        last = max(e["received"] for e in result.events if e["event"] == "rollout")
        return (last - planned) / rollouts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--examples", nargs="*", default=[e for e in examples() if not e.startswith("hack-")])
    args = parser.parse_args()
    direct = asyncio.run(endpoint_rate(200))
    rows = [("endpoint alone (HTTP, streaming)", direct)]
    ratios = []
    for example in args.examples:
        for concurrency in (1, 8):
            rate = {h: worker_rate(example, args.rollouts, concurrency, h) for h in HARNESSES}
            for harness in HARNESSES:
                rows.append((f"{example}, concurrency {concurrency}, {harness}", rate[harness]))
            ratios.append((f"{example}, concurrency {concurrency}", rate["stock"] / rate["inprocess"]))
    print(f"{'measurement (cores: ' + str(os.cpu_count()) + ')':<48} {'ms / rollout':>13} {'x endpoint':>11}")
    for name, seconds in rows:
        print(f"{name:<48} {seconds * 1000:>13.1f} {seconds / direct:>11.0f}")
    for name, ratio in ratios:
        print(f"stock / in-process, {name:<28} {ratio:>13.1f}x")
    print(json.dumps({name: round(seconds, 4) for name, seconds in rows}))


if __name__ == "__main__":
    main()
