"""stop-guard: the reply must carry a task's codeword; a `@vf.stop` guard ends the rollout when it does and
the reward reads the stop condition (the design of verifiers' `interception` env). The codeword is the
colour's name spelt backwards in capitals, so the prompt does not contain it, and the guard wants the
reply to be exactly the codeword. Scored in-process (no rollout, no guard) every reply would earn 0."""

from __future__ import annotations

import verifiers.v1 as vf

COLOURS = ["red", "green", "blue", "amber", "violet", "indigo", "teal", "coral", "olive", "plum", "ivory", "navy"]
PROMPT = "Reply with the codeword for the colour {colour}: its name spelt backwards, in capitals."


def codeword(colour: str) -> str:
    return colour[::-1].upper()


class GuardData(vf.TaskData):
    answer: str


class GuardTask(vf.Task[GuardData]):
    @vf.stop
    def said_it(self, response: vf.Response) -> bool:
        return (response.message.content or "").strip() == self.data.answer

    @vf.reward
    async def stopped(self, trace: vf.Trace) -> float:
        return float(trace.stop_condition == "said_it")

    def oracle(self, messages: list[dict]) -> str:
        return self.data.answer


class GuardConfig(vf.TasksetConfig):
    pass


class GuardTaskset(vf.Taskset[GuardTask, GuardConfig]):
    def load(self) -> list[GuardTask]:
        return [GuardTask(GuardData(idx=i, prompt=PROMPT.format(colour=c), answer=codeword(c)), self.config.task)
                for i, c in enumerate(COLOURS)]


__all__ = ["GuardTaskset"]
