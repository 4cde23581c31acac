"""Addition of numbers 1-32 for a ~100M model: the reward is the reply's stated result being the exact sum."""

from __future__ import annotations

import re

import verifiers.v1 as vf

SYSTEM = "Answer in one line of the form a + b = c."
NUMBER = re.compile(r"-?\d+")
RESULT = re.compile(r"=\s*(-?\d+)")


class AdditionData(vf.TaskData):
    answer: str
    """The exact sum, as text."""
    difficulty: str
    """`easy`: two single digits; `medium`: a two-digit operand, no carry in the ones place; `hard`: a carry."""


class AdditionTask(vf.Task[AdditionData]):
    @property
    def key(self) -> str:
        return f"add:{self.data.prompt}"

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        """1 when the reply's result is the exact sum: the number after its last `=` when it writes an equation,
        else its last whole number (so a wrong equation followed by the right number earns nothing)."""
        return self.truth(_last_reply(trace))

    def truth(self, reply: str) -> float:
        """The strict scorer the trainer logs beside the reward (`autoenv train`'s hack watch): the same rule."""
        result = _result(reply)
        return float(result is not None and result == int(self.data.answer))

    @vf.metric
    async def one_line(self, trace: vf.Trace) -> float:
        """The reply is the single line the system prompt asks for."""
        reply = _last_reply(trace).strip()
        return float(bool(reply) and "\n" not in reply)

    def oracle(self, messages: list[dict]) -> str:
        """The reference reply: the equation with its exact sum."""
        a, b = NUMBER.findall(self.data.prompt)[:2]
        return f"{a} + {b} = {self.data.answer}"


class AdditionConfig(vf.TasksetConfig):
    low: int = 1
    """The smallest operand."""
    high: int = 32
    """The largest operand (every ordered pair low..high is one task: 1,024 by default)."""


class AdditionTaskset(vf.Taskset[AdditionTask, AdditionConfig]):
    def load(self) -> list[AdditionTask]:
        tasks = []
        for a in range(self.config.low, self.config.high + 1):
            for b in range(self.config.low, self.config.high + 1):
                data = AdditionData(prompt=f"What is {a} + {b}?", system_prompt=SYSTEM, answer=str(a + b),
                                    difficulty=_difficulty(a, b))
                tasks.append(AdditionTask(data, self.config.task))
        return tasks


def _difficulty(a: int, b: int) -> str:
    if a < 10 and b < 10:
        return "easy"
    return "hard" if a % 10 + b % 10 >= 10 else "medium"


def _result(reply: str) -> int | None:
    """The stated result: after the last `=`, else the last whole number; None when there is none."""
    found = RESULT.findall(reply) or NUMBER.findall(reply)
    return int(found[-1]) if found else None


def _last_reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""
