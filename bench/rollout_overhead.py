"""Per-rollout overhead of a real verifiers rollout against the built-in endpoint.

Runs the rollout worker (the same code `autoenv eval --offline` runs) on each example
with the `oracle` policy, sequentially and at the default concurrency, and measures the
endpoint alone with direct HTTP requests, side by side in one run. The gap between the
two is verifiers' per-rollout machinery (the null harness's chat program process, the
interception proxy, MCP connections), not the model.

Usage: .venv/bin/python bench/rollout_overhead.py [--rollouts 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp

from autoenv.paths import EXAMPLES, examples
from autoenv.endpoint.policies import Policies
from autoenv.messages import Reply
from autoenv.rollouts import oracle_job, run_worker
from autoenv.endpoint.server import Endpoint


class _Fixed:
    def next_message(self, messages):
        return Reply(content="<answer>1</answer>")

    def task_key(self, messages):
        return "k"


async def endpoint_rate(requests: int) -> float:
    async with Endpoint(Policies(_Fixed())) as ep, aiohttp.ClientSession() as http:
        body = {"model": "oracle", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        started = time.perf_counter()
        for _ in range(requests):
            async with http.post(f"{ep.base_url}/chat/completions", json=body) as response:
                await response.read()
        return (time.perf_counter() - started) / requests


def worker_rate(example: str, rollouts: int, concurrency: int) -> float:
    candidate = EXAMPLES / example
    with tempfile.TemporaryDirectory() as tmp:
        result = run_worker(oracle_job(candidate, Path(tmp), rollouts, concurrency))
        finished = next(e for e in result.events if e["event"] == "finished")
        done = sum(finished["done"].values())
        assert done == rollouts, f"{done} of {rollouts} rollouts finished"
        return finished["seconds"] / rollouts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=16)
    args = parser.parse_args()
    direct = asyncio.run(endpoint_rate(200))
    rows = [("endpoint alone (HTTP, streaming)", direct, None)]
    for example in (e for e in examples() if not e.startswith("hack-")):
        for concurrency in (1, 8):
            rows.append((f"{example} rollout, concurrency {concurrency}", worker_rate(example, args.rollouts, concurrency), concurrency))
    print(f"{'measurement':<42} {'ms / rollout':>13} {'x endpoint':>11}")
    for name, seconds, _ in rows:
        print(f"{name:<42} {seconds * 1000:>13.1f} {seconds / direct:>11.0f}")
    print(json.dumps({name: round(seconds, 4) for name, seconds, _ in rows}))


if __name__ == "__main__":
    main()
