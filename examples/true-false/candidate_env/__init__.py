"""True/false statements about divisibility: two near-balanced labels, scored exactly."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

SYSTEM = "Say whether the statement is true. Answer with one <answer>true</answer> or <answer>false</answer> tag."
ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


class StatementData(vf.TaskData):
    answer: str
    difficulty: str


class StatementTask(vf.Task[StatementData]):
    @property
    def key(self) -> str:
        return f"tf:{self.data.prompt}"

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        messages = trace.assistant_messages
        tags = ANSWER_TAG.findall((messages[-1].content or "") if messages else "")
        return float(len(tags) == 1 and tags[0].strip().lower() == self.data.answer)


class StatementConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    seed: int = 0
    true_share: float = 0.526
    """The share of true statements."""


class StatementTaskset(vf.Taskset[StatementTask, StatementConfig]):
    def load(self) -> list[StatementTask]:
        rng = random.Random(self.config.seed)
        seen: set[str] = set()
        tasks = []
        trues = round(self.config.true_share * self.config.num_tasks)
        while len(tasks) < self.config.num_tasks:
            truth = len(tasks) < trues
            difficulty = ("easy", "medium", "hard")[len(tasks) % 3]
            divisor = rng.randint(3, 9 if difficulty == "easy" else 19 if difficulty == "medium" else 37)
            quotient = rng.randint(10, 99 if difficulty != "hard" else 999)
            number = divisor * quotient + (0 if truth else rng.randint(1, divisor - 1))
            prompt = f"{number} is divisible by {divisor}."
            if prompt in seen:
                continue
            seen.add(prompt)
            tasks.append(StatementTask(StatementData(prompt=prompt, system_prompt=SYSTEM, answer=str(truth).lower(),
                                                     difficulty=difficulty), self.config.task))
        rng.shuffle(tasks)
        return tasks


__all__ = ["StatementTaskset"]
