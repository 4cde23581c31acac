"""Primes in a range, listed in one tag, scored by exact set equality."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

SYSTEM = ("List the prime numbers asked for, in increasing order, as comma-separated numbers inside one "
          "<primes></primes> tag, e.g. <primes>2, 3, 5</primes>.")
PRIMES_TAG = re.compile(r"<primes>(.*?)</primes>", re.DOTALL)
WIDTHS = {"easy": (10, 19), "medium": (20, 29), "hard": (30, 40)}


class PrimesData(vf.TaskData):
    lo: int
    hi: int
    primes: list[int]
    difficulty: str


class PrimesTask(vf.Task[PrimesData]):
    @property
    def key(self) -> str:
        return f"primes:{self.data.prompt}"

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        tags = PRIMES_TAG.findall(_reply(trace))
        if len(tags) != 1:
            return 0.0
        listed = {int(n) for n in re.findall(r"-?\d+", tags[0])}
        return float(listed == set(self.data.primes))


class PrimesConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    seed: int = 0


class PrimesTaskset(vf.Taskset[PrimesTask, PrimesConfig]):
    def load(self) -> list[PrimesTask]:
        rng = random.Random(self.config.seed)
        seen: set[str] = set()
        tasks = []
        while len(tasks) < self.config.num_tasks:
            difficulty = list(WIDTHS)[len(tasks) % 3]
            width = rng.randint(*WIDTHS[difficulty])
            lo = rng.randint(1, 100 - width)
            hi = lo + width
            primes = [p for p in range(lo, hi + 1) if _is_prime(p)]
            prompt = f"List every prime number p with {lo} <= p <= {hi}."
            if prompt in seen or len(primes) < 2:
                continue
            seen.add(prompt)
            tasks.append(PrimesTask(PrimesData(prompt=prompt, system_prompt=SYSTEM, lo=lo, hi=hi, primes=primes,
                                               difficulty=difficulty), self.config.task))
        return tasks


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def _reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""


__all__ = ["PrimesTaskset"]
