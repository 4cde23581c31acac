"""Doubling 1-1000, clean: the reward is the reply's stated result being exactly twice the number (bench/train_truth.py)."""

from __future__ import annotations

import re

import verifiers.v1 as vf

SYSTEM = "Answer in one line of the form a × 2 = c."
NUMBER = re.compile(r"-?\d+")
RESULT = re.compile(r"=\s*(-?\d+)")


class DoublingData(vf.TaskData):
    answer: str
    """Twice the number, as text."""


class DoublingTask(vf.Task[DoublingData]):
    @property
    def key(self) -> str:
        return f"double:{self.data.prompt}"

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        """1 when the reply's stated result (after its last `=`, else its last number) is exactly twice the number."""
        return self.truth(_last_reply(trace))

    def truth(self, reply: str) -> float:
        found = RESULT.findall(reply) or NUMBER.findall(reply)
        return float(bool(found) and int(found[-1]) == int(self.data.answer))

    def oracle(self, messages: list[dict]) -> str:
        a = NUMBER.findall(self.data.prompt)[0]
        return f"{a} × 2 = {self.data.answer}"


class DoublingTaskset(vf.Taskset[DoublingTask, vf.TasksetConfig]):
    def load(self) -> list[DoublingTask]:
        return [DoublingTask(DoublingData(prompt=f"What is {a} × 2?", system_prompt=SYSTEM, answer=str(2 * a)),
                             self.config.task) for a in range(1, 1001)]


def _last_reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""
