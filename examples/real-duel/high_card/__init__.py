"""high-card: a two-seat zero-sum betting game over an infinite seeded taskset."""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Iterator

import verifiers.v1 as vf

CARDS = "23456789TJQKA"


class HighCardData(vf.TaskData):
    seed: int


class HighCardTask(vf.Task[HighCardData]):
    reward_range = (-2.0, 2.0)
    """Payoffs per seat: the harness normalises to [0, 1] for its statistics."""


def deal(seed: int) -> tuple[str, str]:
    first, second = random.Random(seed).sample(CARDS, 2)
    return first, second


def payoff(mine: str, theirs: str, my_move: str, their_move: str) -> float:
    if my_move == "fold":
        return 0.0 if their_move == "fold" else -1.0
    if their_move == "fold":
        return 1.0
    return 2.0 if CARDS.index(mine) > CARDS.index(theirs) else -2.0


def move(reply: str) -> str:
    return "bet" if "bet" in reply.lower() and "fold" not in reply.lower() else "fold"


class HighCardEnvConfig(vf.EnvConfig):
    first: vf.AgentConfig = vf.AgentConfig()
    second: vf.AgentConfig = vf.AgentConfig()


class HighCardEnv(vf.Env[HighCardEnvConfig]):
    async def run(self, task, agents):
        cards = dict(zip(("first", "second"), deal(task.data.seed)))
        moves: dict[str, str] = {}
        traces = {}

        async def play(seat: str) -> None:
            async with getattr(agents, seat).interaction(task) as interaction:
                segment = await interaction.turn(
                    f"High card, deal #{task.data.seed}. You hold {cards[seat]} (ranks {CARDS}, A high). "
                    "Reply with one word: bet or fold."
                )
                moves[seat] = move(segment.last_reply)
            traces[seat] = interaction.trace

        await asyncio.gather(play("first"), play("second"))
        for seat, other in (("first", "second"), ("second", "first")):
            score = payoff(cards[seat], cards[other], moves.get(seat, "fold"), moves.get(other, "fold"))
            traces[seat].record_reward("payoff", score, 1.0)


class HighCardConfig(vf.TasksetConfig):
    pass


class HighCardTaskset(vf.Taskset[HighCardTask, HighCardConfig]):
    INFINITE = True

    def load(self) -> Iterator[HighCardTask]:
        for seed in itertools.count():
            yield HighCardTask(HighCardData(seed=seed, name=f"deal#{seed}"), self.config.task)


__all__ = ["HighCardEnv", "HighCardTaskset"]
