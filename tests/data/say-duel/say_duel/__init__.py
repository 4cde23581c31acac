"""say-duel: two seats get the same prompt "Say the number N."; a seat that says it while the other does not
wins 1 from it (zero-sum, payoffs in [-1, 1]). The oracle hook says it for even N and forfeits (an empty
reply) for odd N, so per-seat probing against the oracle meets a reference seat that fails on half the tasks."""

from __future__ import annotations

import asyncio
import re

import verifiers.v1 as vf


class SayData(vf.TaskData):
    number: int


class SayTask(vf.Task[SayData]):
    reward_range = (-1.0, 1.0)

    def oracle(self, messages: list[dict]) -> str:
        return str(self.data.number) if self.data.number % 2 == 0 else ""


class SayEnvConfig(vf.EnvConfig):
    left: vf.AgentConfig = vf.AgentConfig()
    right: vf.AgentConfig = vf.AgentConfig()


class SayEnv(vf.Env[SayEnvConfig]):
    async def run(self, task, agents):
        said: dict[str, bool] = {}
        traces = {}

        async def play(seat: str) -> None:
            async with getattr(agents, seat).interaction(task) as interaction:
                segment = await interaction.turn()
                said[seat] = re.search(rf"\b{task.data.number}\b", segment.last_reply or "") is not None
            traces[seat] = interaction.trace

        await asyncio.gather(play("left"), play("right"))
        for seat, other in (("left", "right"), ("right", "left")):
            traces[seat].record_reward("said", float(said.get(seat, False)) - float(said.get(other, False)), 1.0)


class SayConfig(vf.TasksetConfig):
    pass


class SayTaskset(vf.Taskset[SayTask, SayConfig]):
    def load(self):
        for n in range(12):
            yield SayTask(SayData(number=n, prompt=f"Say the number {n}.", name=f"say#{n}"), self.config.task)


__all__ = ["SayEnv", "SayTaskset"]
