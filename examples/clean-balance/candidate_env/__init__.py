"""Bank-ledger closing balances answered as JSON, scored exactly to the cent (NaN and infinity score 0)."""

from __future__ import annotations

import json
import math
import random

import verifiers.v1 as vf

SYSTEM = ('Compute the account\'s closing balance. Reply with one JSON object and nothing else: '
          '{"balance": <number, two decimals>}.')
SIZES = {"easy": (3, 4), "medium": (4, 5), "hard": (5, 6)}


class LedgerData(vf.TaskData):
    closing: float
    difficulty: str


class LedgerTask(vf.Task[LedgerData]):
    @property
    def key(self) -> str:
        return f"ledger:{self.data.prompt}"

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        try:
            got = float(json.loads(_reply(trace))["balance"])
        except (ValueError, TypeError, KeyError, IndexError, OverflowError):
            return 0.0
        return float(math.isfinite(got) and abs(got - self.data.closing) <= 0.005)


class LedgerConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    seed: int = 0


class LedgerTaskset(vf.Taskset[LedgerTask, LedgerConfig]):
    def load(self) -> list[LedgerTask]:
        rng = random.Random(self.config.seed)
        seen: set[str] = set()
        tasks = []
        while len(tasks) < self.config.num_tasks:
            difficulty = list(SIZES)[len(tasks) % 3]
            cents = rng.randint(10_000, 500_000)
            lines = [f"Opening balance: ${cents / 100:.2f}"]
            for n in range(rng.randint(*SIZES[difficulty])):
                amount = rng.randint(100, 200_000)
                deposit = amount > cents or rng.random() < 0.5  # the balance never goes below zero
                cents += amount if deposit else -amount
                lines.append(f"{n + 1}. {'Deposit' if deposit else 'Withdrawal'} ${amount / 100:.2f}")
            prompt = "\n".join(lines) + "\nWhat is the closing balance?"
            if prompt in seen:
                continue
            seen.add(prompt)
            tasks.append(LedgerTask(LedgerData(prompt=prompt, system_prompt=SYSTEM, closing=round(cents / 100, 2),
                                               difficulty=difficulty), self.config.task))
        return tasks


def _reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""


__all__ = ["LedgerTaskset"]
