"""tiny-glossary: one German word to translate per task, checked by a uv script in the rollout's runtime."""

from __future__ import annotations

import json
from importlib import resources

import verifiers.v1 as vf

CHECKER = resources.files(__package__).joinpath("check.py").read_text()


class GlossaryData(vf.TaskData):
    word: str
    answer: str


class GlossaryTask(vf.Task[GlossaryData]):
    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def checked(self, trace: vf.Trace, runtime) -> float:
        """1 when the checker script, run in the rollout's runtime, accepts the last reply."""
        reply = trace.assistant_messages[-1].content if trace.assistant_messages else ""
        result = await runtime.run_uv_script(CHECKER, [str(reply or ""), self.data.answer])
        return float(result.exit_code == 0)

    async def validate(self, runtime) -> bool | None:
        """verifiers' gold check: the reference answer passes the checker."""
        result = await runtime.run_uv_script(CHECKER, [self.data.answer, self.data.answer])
        return result.exit_code == 0

    def oracle(self, messages: list[dict]) -> str:
        return self.data.answer


class GlossaryConfig(vf.TasksetConfig):
    pass


class GlossaryTaskset(vf.Taskset[GlossaryTask, GlossaryConfig]):
    def load(self) -> list[GlossaryTask]:
        rows = resources.files(__package__).joinpath("data/glossary.jsonl").read_text().splitlines()
        tasks = []
        for line in rows:
            row = json.loads(line)
            prompt = f"Translate the German word {row['word']!r} into English. Reply with the one English word only."
            tasks.append(GlossaryTask(GlossaryData(prompt=prompt, **row), self.config.task))
        return tasks


__all__ = ["GlossaryTaskset"]
