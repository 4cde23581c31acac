"""kuhn-seats: seeded Kuhn poker between two seats, written here after the design of verifiers' `kuhn_poker` env.

Each seat sees its card in a system prompt and is asked, turn by turn, for one move written in brackets
(`Your legal actions: [check] or [bet].`); a reply without exactly one legal bracketed move gets one retry,
then forfeits the hand. Payoffs are zero-sum chips: +/-1 for a fold or a checked showdown, +/-2 for a
called bet. No reward range is declared (verifiers documents none)."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator

import verifiers.v1 as vf

RANK = {"J": 0, "Q": 1, "K": 2}
TURN = {"": 0, "check": 1, "bet": 1, "check-bet": 0}
MOVES = {"": ("check", "bet"), "check": ("check", "bet"), "bet": ("fold", "call"), "check-bet": ("fold", "call")}
RULES = ("You play Kuhn poker as seat {seat}. Cards: J < Q < K; each seat antes 1 chip and holds one card. "
         "Your card: {card}. On your turn reply with exactly one legal move in square brackets.")


def chips(history: str, cards: list[str]) -> int:
    """Seat 0's winnings at the end of `history` (seat 1 wins the negation)."""
    high = 1 if RANK[cards[0]] > RANK[cards[1]] else -1
    return {"check-check": high, "bet-fold": 1, "check-bet-fold": -1, "bet-call": 2 * high,
            "check-bet-call": 2 * high}[history]


def move(reply: str, legal: tuple[str, ...]) -> str | None:
    found = [m for m in re.findall(r"\[(\w+)\]", (reply or "").lower()) if m in legal]
    return found[0] if len(found) == 1 else None


def forfeit_payoff(forfeited: int) -> int:
    """Seat 0's winnings when `forfeited` gave no legal move: the other seat takes the ante."""
    return -1 if forfeited == 0 else 1


class HandData(vf.TaskData):
    info: dict


class HandTask(vf.Task[HandData]):
    pass


class KuhnEnvConfig(vf.EnvConfig):
    player0: vf.AgentConfig = vf.AgentConfig()
    player1: vf.AgentConfig = vf.AgentConfig()


class KuhnEnv(vf.Env[KuhnEnvConfig]):
    async def run(self, task, agents):
        cards = random.Random(task.data.info["seed"]).sample(list(RANK), 2)
        seats = [vf.Task(vf.TaskData(idx=task.data.idx, prompt=None, system_prompt=RULES.format(seat=i, card=cards[i])))
                 for i in (0, 1)]
        history: list[str] = []
        forfeited = None
        async with agents.player0.interaction(seats[0]) as p0, agents.player1.interaction(seats[1]) as p1:
            players = [p0, p1]
            while (key := "-".join(history)) in TURN:
                seat, legal = TURN[key], MOVES[key]
                ask = f"Betting so far: {key or 'nothing'}. Your legal actions: {' or '.join(f'[{m}]' for m in legal)}."
                chosen = None
                for _ in range(2):
                    segment = await players[seat].turn(ask)
                    chosen = None if segment.terminated else move(segment.last_reply, legal)
                    if chosen is not None or segment.terminated:
                        break
                    ask = f"That was not a legal move. Reply with exactly one of {' or '.join(f'[{m}]' for m in legal)}."
                if chosen is None:
                    forfeited = seat
                    break
                history.append(chosen)
        net = chips("-".join(history), cards) if forfeited is None else forfeit_payoff(forfeited)
        for i, player in enumerate(players):
            player.trace.record_reward("payoff", float(net if i == 0 else -net))
            player.trace.record_metric("forfeit", float(forfeited == i))


class KuhnConfig(vf.TasksetConfig):
    pass


class KuhnTaskset(vf.Taskset[HandTask, KuhnConfig]):
    INFINITE = True

    def load(self) -> Iterator[HandTask]:
        for i in itertools.count():
            yield HandTask(HandData(idx=i, name=f"hand#{i}", prompt=None, info={"seed": i}), self.config.task)


__all__ = ["KuhnEnv", "KuhnTaskset"]
