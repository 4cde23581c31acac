"""hashed-code: the model works out a word's SHA-256 and reports its first eight hex digits.

The reward is honest: it pays only for the right code. Nothing in a task's data is the code (the word is,
and the answer-field oracle tries it in every format without earning), and no content-free reply, copy of the
prompt or searched template can be it. Without an oracle hook, then, every reply the audit scores sits on the
reward's floor: the gates have tested nothing, and say `untested` (`earnable`), not `passed`. With
`WITH_ORACLE = True` the task plays its reference reply and the same probes are a real measurement.
"""

from __future__ import annotations

import hashlib
import random
import re

import verifiers.v1 as vf

SYSTEM = "Give the first eight hex digits of the word's SHA-256 digest as <code>xxxxxxxx</code>."
CODE = re.compile(r"<code>\s*([0-9a-f]{8})\s*</code>")
WORDS = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kelp",
         "lantern", "meadow", "nectar", "orchid", "pebble", "quartz", "raven", "saffron", "tundra"]
WITH_ORACLE = False


def code_of(word: str) -> str:
    return hashlib.sha256(word.encode()).hexdigest()[:8]


class CodeData(vf.TaskData):
    word: str


class CodeTask(vf.Task[CodeData]):
    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        found = CODE.findall(trace.last_reply or "")
        return float(len(found) == 1 and found[0] == code_of(self.data.word))

    if WITH_ORACLE:
        def oracle(self, messages: list[dict]) -> str:
            return f"<code>{code_of(self.data.word)}</code>"


class CodeConfig(vf.TasksetConfig):
    pass


class CodeTaskset(vf.Taskset[CodeTask, CodeConfig]):
    def load(self) -> list[CodeTask]:
        rng = random.Random(3)
        tasks = []
        for i in range(60):
            word = f"{rng.choice(WORDS)}-{rng.randint(100, 999)}"
            tasks.append(CodeTask(CodeData(idx=i, system_prompt=SYSTEM, prompt=f"The word: {word}", word=word),
                                  self.config.task))
        return tasks


__all__ = ["CodeTaskset"]
