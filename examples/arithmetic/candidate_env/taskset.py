"""Multi-step integer arithmetic: generate expressions, score the single <answer> tag exactly."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

SYSTEM = (
    "Evaluate the arithmetic expression exactly. Think step by step if you like, then give "
    "the final value as one integer inside a single <answer></answer> tag, e.g. "
    "<answer>-42</answer>."
)
ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
LEVELS = {
    # difficulty: (operations, largest operand, nesting allowed)
    "easy": ((1, 1), 20, False),
    "medium": ((2, 3), 50, False),
    "hard": ((4, 6), 200, True),
}


class ArithmeticData(vf.TaskData):
    answer: str
    """The exact integer value, as text."""
    difficulty: str
    category: str


class ArithmeticTask(vf.Task[ArithmeticData]):
    @property
    def key(self) -> str:
        return f"arith:{self.data.prompt}"

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
        """The reference reply: the exact value in the expected format."""
        return f"<answer>{self.data.answer}</answer>"


class ArithmeticConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    """How many distinct expressions to generate (a third per difficulty)."""
    seed: int = 0


class ArithmeticTaskset(vf.Taskset[ArithmeticTask, ArithmeticConfig]):
    def load(self) -> list[ArithmeticTask]:
        rng = random.Random(self.config.seed)
        seen: set[str] = set()
        tasks = []
        levels = list(LEVELS)
        while len(tasks) < self.config.num_tasks:
            difficulty = levels[len(tasks) % len(levels)]
            category = ("additive", "multiplicative")[(len(tasks) // len(levels)) % 2]
            expression = _expression(rng, difficulty, category)
            if expression in seen:
                continue
            seen.add(expression)
            value = eval(expression, {"__builtins__": {}})  # our own generated text only
            tasks.append(
                ArithmeticTask(
                    ArithmeticData(
                        prompt=f"Compute: {expression}",
                        system_prompt=SYSTEM,
                        answer=str(value),
                        difficulty=difficulty,
                        category=category,
                    ),
                    self.config.task,
                )
            )
        return tasks


def _expression(rng: random.Random, difficulty: str, category: str) -> str:
    (low, high), largest, nested = LEVELS[difficulty]
    ops = ["+", "-"] if category == "additive" else ["+", "-", "*"]
    count = rng.randint(low, high)
    parts = [str(rng.randint(1, largest))]
    for i in range(count):
        op = "*" if category == "multiplicative" and i == 0 else rng.choice(ops)
        operand = str(rng.randint(1, largest if op != "*" else 12))
        if nested and rng.random() < 0.4:
            operand = f"({operand} {rng.choice(['+', '-'])} {rng.randint(1, 30)})"
        parts.append(f"{op} {operand}")
    if count >= 2 and rng.random() < 0.7:
        # group the first operation so precedence matters
        parts = [f"({parts[0]} {parts[1]})", *parts[2:]]
    return " ".join(parts)


def _last_reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""


def _as_int(text: str) -> int | None:
    try:
        return int(text.replace(",", "").strip())
    except ValueError:
        return None
