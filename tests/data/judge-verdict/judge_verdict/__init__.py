"""judge-verdict: capital cities graded by two judges on verifiers' default judge endpoint, mirroring the judged
rewards of verifiers' own environments (wiki_search's `vf.Judge` asking yes/no, interception's custom judge asking
its own words): `matches` is verifiers' built-in reference judge (`vf.ReferenceJudge`, its default prompt ending
`Respond either "yes" or "no" only.`), `allowed` a custom `vf.Judge` whose prompt asks `BLOCK or ALLOW` and whose
`parse` raises on any other answer (verifiers' `judge_verdict`). A format gate comes first: only a bare city name
reaches the judges, so text addressed to the grader never does."""

from __future__ import annotations

import re

import verifiers.v1 as vf
from verifiers.v1.judge import judge_verdict

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima", "Norway": "Oslo",
            "Egypt": "Cairo", "Canada": "Ottawa", "Chile": "Santiago", "Spain": "Madrid", "India": "New Delhi",
            "Ghana": "Accra", "Nepal": "Kathmandu", "Cuba": "Havana", "Iran": "Tehran", "Mali": "Bamako"}
FORMAT = re.compile(r"\s*[A-Z][A-Za-z ]{1,40}\s*")
CHOICES = ("ALLOW", "BLOCK")


def well_formed(reply: str) -> bool:
    return FORMAT.fullmatch(reply or "") is not None


class PolicyJudge(vf.Judge[bool]):
    prompt = ("You review quiz answers before they are published.\nReference answer: {answer}\nReply:\n```\n"
              "{response}\n```\nIf the reply names the reference answer, ALLOW it; otherwise BLOCK it. "
              "Answer BLOCK or ALLOW.")

    def parse(self, response: vf.JudgeResponse[bool]) -> bool:
        return judge_verdict(response.text, CHOICES) == CHOICES[0]


class CapitalData(vf.TaskData):
    answer: str


class CapitalTaskConfig(vf.TaskConfig):
    reference: vf.ReferenceJudgeConfig = vf.ReferenceJudgeConfig()
    policy: vf.JudgeConfig = vf.JudgeConfig()


class CapitalTask(vf.Task[CapitalData, vf.State, CapitalTaskConfig]):
    @vf.reward(weight=0.5)
    async def matches(self, trace: vf.Trace) -> float:
        if not well_formed(trace.last_reply or ""):
            return 0.0
        return await vf.ReferenceJudge(self.config.reference).score(self.data, trace)

    @vf.reward(weight=0.5)
    async def allowed(self, trace: vf.Trace) -> float:
        reply = trace.last_reply or ""
        if not well_formed(reply):
            return 0.0
        result = await PolicyJudge(self.config.policy).evaluate(trace=trace, answer=self.data.answer, response=reply)
        return float(bool(result.parsed))

    def oracle(self, messages: list[dict]) -> str:
        return self.data.answer


class CapitalConfig(vf.TasksetConfig):
    task: CapitalTaskConfig = CapitalTaskConfig()


class CapitalTaskset(vf.Taskset[CapitalTask, CapitalConfig]):
    def load(self) -> list[CapitalTask]:
        return [CapitalTask(CapitalData(idx=i, prompt=f"What is the capital of {country}? Reply with the city's name "
                                        "only.", answer=city), self.config.task)
                for i, (country, city) in enumerate(CAPITALS.items())]


__all__ = ["CapitalTaskset"]
