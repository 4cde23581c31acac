"""quiz-rows: capital cities loaded the way the public v1 question-answer envs load a dataset (gsm8k's loader
over a Hugging Face split, rows numbered as they come): every row carries its own id (`example_id`, and
`info.row` beside the split), which the prompt never shows. The split this loader reads lists each question
twice (half the tasks repeat another), and one repeat is labelled with a different answer (Canada: Toronto).
The model sees a task only through its prompt (no custom Env, no tools), so the ids make no task unique."""

from __future__ import annotations

import re

import verifiers.v1 as vf

CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Norway", "Oslo"),
            ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Chile", "Santiago"), ("Spain", "Madrid"),
            ("India", "New Delhi"), ("Ghana", "Accra"), ("Nepal", "Kathmandu"), ("Cuba", "Havana"),
            ("Iran", "Tehran"), ("Mali", "Bamako"), ("Laos", "Vientiane")]
SPLIT = CAPITALS + [(country, "Toronto" if country == "Canada" else city) for country, city in CAPITALS]
ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


class QuizData(vf.TaskData):
    answer: str
    example_id: int
    info: dict


class QuizTask(vf.Task[QuizData]):
    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        found = ANSWER.findall(trace.last_reply or "")
        return float(len(found) == 1 and found[0].lower() == self.data.answer.lower())

    def oracle(self, messages: list[dict]) -> str:
        return f"<answer>{self.data.answer}</answer>"


class QuizConfig(vf.TasksetConfig):
    pass


class QuizTaskset(vf.Taskset[QuizTask, QuizConfig]):
    def load(self) -> list[QuizTask]:
        return [QuizTask(QuizData(idx=i, prompt=f"What is the capital of {country}? Reply as <answer>city</answer>.",
                                  answer=city, example_id=1000 + i, info={"row": i, "split": "test"}),
                         self.config.task) for i, (country, city) in enumerate(SPLIT)]


__all__ = ["QuizTaskset"]
