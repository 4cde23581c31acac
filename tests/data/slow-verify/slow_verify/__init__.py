"""slow-verify: the sum of two numbers, scored by a slow verifier. Mirrors verifiers' gsm8k on a loaded two-core
machine: its reward takes the rollout's runtime and runs `uv run verify.py` (12-19 s alone there), and calls made
beside each other share the machine, so each takes longer the more run at once. Here the verifier is one call's
worth of work (VERIFY_SECONDS) that holds the machine while it runs: N calls at once take N times as long, the last
of them. Local data: pairs generated from a seed."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import verifiers.v1 as vf

VERIFY_SECONDS = 0.5
MACHINE = threading.Lock()


def verify(gold: str, reply: str) -> float:
    """The verifier process: VERIFY_SECONDS of the machine's time, which one call holds at a time."""
    with MACHINE:
        time.sleep(VERIFY_SECONDS)
    return 1.0 if reply.strip() == gold else 0.0


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.reward
    async def correct(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        return await asyncio.to_thread(verify, self.data.answer, trace.last_reply or "")

    def oracle(self, messages: list[dict]) -> str:
        return self.data.answer


class SumConfig(vf.TasksetConfig):
    pass


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self) -> list[SumTask]:
        rng = random.Random(11)
        tasks = []
        for i in range(40):
            a, b = rng.randint(100, 999), rng.randint(100, 999)
            prompt = f"What is {a} + {b}? Reply with the number only."
            tasks.append(SumTask(SumData(idx=i, prompt=prompt, answer=str(a + b)), self.config.task))
        return tasks


__all__ = ["SumTaskset"]
