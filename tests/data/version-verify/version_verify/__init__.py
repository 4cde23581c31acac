"""version-verify: which of two version strings is newer. The reward runs a shipped uv script (`verify.py`, with
`packaging` as its own dependency) inside the rollout's runtime, as verifiers' gsm8k runs `math-verify`: the
verifier's dependencies never touch the eval process. Local data: pairs generated from a seed."""

from __future__ import annotations

import random
from pathlib import Path

import verifiers.v1 as vf

VERIFY = (Path(__file__).parent / "verify.py").read_bytes()
PROMPT = "Which version is newer under PEP 440: {a} or {b}? Reply with that version string only."


class VersionData(vf.TaskData):
    answer: str


class VersionTask(vf.Task[VersionData]):
    async def setup(self, runtime: vf.Runtime) -> None:
        await runtime.prepare_uv_script(VERIFY)

    @vf.reward
    async def correct(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        result = await runtime.run_uv_script(VERIFY, args=[self.data.answer, trace.last_reply or ""])
        if result.exit_code != 0:
            raise RuntimeError(f"verify.py failed: {result.stderr.strip()[-500:]}")
        lines = result.stdout.strip().splitlines()
        return float(lines[-1]) if lines else 0.0

    def oracle(self, messages: list[dict]) -> str:
        return self.data.answer


class VersionConfig(vf.TasksetConfig):
    pass


def pair(rng: random.Random) -> tuple[str, str]:
    while True:
        a = ".".join(str(rng.randint(0, 12)) for _ in range(3))
        b = ".".join(str(rng.randint(0, 12)) for _ in range(3))
        if a != b:
            return a, b


class VersionTaskset(vf.Taskset[VersionTask, VersionConfig]):
    def load(self) -> list[VersionTask]:
        rng = random.Random(7)
        tasks = []
        for i in range(40):
            a, b = pair(rng)
            newer = max(a, b, key=lambda v: tuple(int(x) for x in v.split(".")))
            tasks.append(VersionTask(VersionData(idx=i, prompt=PROMPT.format(a=a, b=b), answer=newer), self.config.task))
        return tasks


__all__ = ["VersionTaskset"]
