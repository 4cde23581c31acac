"""judged-answer: capital cities, graded by a model: the reward asks a `vf.Judge` (verifiers' default judge
endpoint, as wiki_search's judge does) whether the reply's answer matches the reference. A format gate comes
first: only a reply that is exactly one `<answer>...</answer>` tag reaches the judge, so text addressed to the
grader never does."""

from __future__ import annotations

import re

import verifiers.v1 as vf

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima", "Norway": "Oslo",
            "Egypt": "Cairo", "Canada": "Ottawa", "Chile": "Santiago", "Spain": "Madrid", "India": "New Delhi",
            "Ghana": "Accra", "Nepal": "Kathmandu", "Cuba": "Havana", "Iran": "Tehran", "Mali": "Bamako"}
FORMAT = re.compile(r"\s*<answer>[^<>]{1,60}</answer>\s*")


def well_formed(reply: str) -> bool:
    return FORMAT.fullmatch(reply or "") is not None


class CapitalData(vf.TaskData):
    answer: str


class CapitalTaskConfig(vf.TaskConfig):
    judge: vf.JudgeConfig = vf.JudgeConfig()


class CapitalTask(vf.Task[CapitalData, vf.State, CapitalTaskConfig]):
    @vf.reward
    async def judged(self, trace: vf.Trace) -> float:
        reply = trace.last_reply or ""
        if not well_formed(reply):
            return 0.0
        verdict = await vf.Judge(self.config.judge).complete(
            f"Grade the reply out of 10.\nReference answer: {self.data.answer}\nReply: {reply}", trace=trace)
        found = re.search(r"Score:\s*(\d+)/10", verdict.text or "")
        return int(found.group(1)) / 10 if found else 0.0

    def oracle(self, messages: list[dict]) -> str:
        return f"<answer>{self.data.answer}</answer>"


class CapitalConfig(vf.TasksetConfig):
    task: CapitalTaskConfig = CapitalTaskConfig()


class CapitalTaskset(vf.Taskset[CapitalTask, CapitalConfig]):
    def load(self) -> list[CapitalTask]:
        return [CapitalTask(CapitalData(idx=i, prompt=f"What is the capital of {country}? Reply as <answer>city</answer>.",
                                        answer=city), self.config.task) for i, (country, city) in enumerate(CAPITALS.items())]


__all__ = ["CapitalTaskset"]
