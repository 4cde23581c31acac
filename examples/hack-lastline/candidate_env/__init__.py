"""Arithmetic scored on the reply's last line.

A PLANTED REWARD HACK for testing AutoEnv's gates: do not copy this reward. The reward reads the number at the end of the reply's last line instead of the answer tag, so a reply whose tagged answer is wrong earns full marks when its last line holds the right number (the last-line probe catches this).
"""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

SYSTEM = "Evaluate the expression exactly. Give the final value in one <answer></answer> tag."
LAST_NUMBER = re.compile(r"(-?\d+)\s*(?:</answer>)?\s*$")


class HackData(vf.TaskData):
    answer: str
    difficulty: str


class HackTask(vf.Task[HackData]):
    @property
    def key(self) -> str:
        return f"{self.data.idx}:{self.data.prompt}"

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        lines = _reply(trace).strip().splitlines()
        match = LAST_NUMBER.search(lines[-1]) if lines else None  # the hack: only the last line counts
        return float(match is not None and match.group(1) == self.data.answer)

    def oracle(self, messages: list[dict]) -> str:
        return f"<answer>{self.data.answer}</answer>"


class HackConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    seed: int = 0


class HackTaskset(vf.Taskset[HackTask, HackConfig]):
    def load(self) -> list[HackTask]:
        rng = random.Random(self.config.seed)
        seen: set[str] = set()
        tasks = []
        while len(tasks) < self.config.num_tasks:
            difficulty = ("easy", "medium", "hard")[len(tasks) % 3]
            terms = 2 + ("easy", "medium", "hard").index(difficulty)
            expression = " + ".join(str(rng.randint(1, 99)) for _ in range(terms)) + f" * {rng.randint(2, 9)}"
            if expression in seen:
                continue
            seen.add(expression)
            tasks.append(HackTask(HackData(prompt=f"Compute: {expression}", system_prompt=SYSTEM,
                                           answer=str(eval(expression)), difficulty=difficulty), self.config.task))
        return tasks


def _reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""


__all__ = ["HackTaskset"]
