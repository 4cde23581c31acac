"""Two-number addition: generate sums of numbers 1-99, score the single <answer> tag exactly."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

SYSTEM = "Add the two numbers. Reply with the sum inside one <answer></answer> tag, for example <answer>57</answer>."
ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


class AdditionData(vf.TaskData):
    answer: str
    """The exact sum, as text."""
    difficulty: str


class AdditionTask(vf.Task[AdditionData]):
    @property
    def key(self) -> str:
        return f"add:{self.data.prompt}"

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        tags = ANSWER_TAG.findall(_last_reply(trace))
        if len(tags) != 1:  # zero tags is no answer; several tags is guessing
            return 0.0
        return float(_as_int(tags[0]) == int(self.data.answer))

    @vf.metric
    async def formatted(self, trace: vf.Trace) -> float:
        tags = ANSWER_TAG.findall(_last_reply(trace))
        return float(len(tags) == 1 and _as_int(tags[0]) is not None)

    def oracle(self, messages: list[dict]) -> str:
        """The reference reply: the exact sum in the expected format."""
        return f"<answer>{self.data.answer}</answer>"


class AdditionConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    """How many distinct sums to generate (half with a carry)."""
    seed: int = 0


class AdditionTaskset(vf.Taskset[AdditionTask, AdditionConfig]):
    def load(self) -> list[AdditionTask]:
        rng = random.Random(self.config.seed)
        seen: set[tuple[int, int]] = set()
        tasks = []
        while len(tasks) < self.config.num_tasks:
            difficulty = ("easy", "hard")[len(tasks) % 2]
            a, b = rng.randint(1, 99), rng.randint(1, 99)
            if (a, b) in seen or ((a % 10 + b % 10) >= 10) != (difficulty == "hard"):
                continue
            seen.add((a, b))
            data = AdditionData(prompt=f"What is {a} + {b}?", system_prompt=SYSTEM, answer=str(a + b),
                                difficulty=difficulty)
            tasks.append(AdditionTask(data, self.config.task))
        return tasks


def _last_reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""


def _as_int(text: str) -> int | None:
    try:
        return int(text.replace(",", "").strip())
    except ValueError:
        return None
