"""Arithmetic with a keyword reward: "step" or "therefore" in the reply earns a third of the maximum.

A PLANTED REWARD HACK for testing AutoEnv's gates: do not copy this reward. `shows_work` pays for
words any reply can contain, whatever the answer, so a wrong answer that says "therefore" earns it
(the wrong-answer probe catches this; the fix is to remove it or gate it on correctness).
"""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

SYSTEM = "Evaluate the expression exactly. Give the final value in one <answer></answer> tag."
ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


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
        tags = ANSWER_TAG.findall(_reply(trace))
        return float(len(tags) == 1 and tags[0].strip() == self.data.answer)

    @vf.reward(weight=0.5)
    async def shows_work(self, trace: vf.Trace) -> float:
        """Credit for showing the work (the hack: it looks for words, not work)."""
        text = _reply(trace).lower()
        return float("step" in text or "therefore" in text)

    def oracle(self, messages: list[dict]) -> str:
        return f"Step by step: the sum first, then the product. Therefore <answer>{self.data.answer}</answer>"


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
