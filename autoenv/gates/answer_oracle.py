"""The answer-field oracle: a reference reply inferred from the tasks' `answer` when the candidate has no hook.

Most environments someone already wrote carry the reference answer in each task's data but
no oracle hook. Without a reference reply the probes built from it (wrong-answer,
kitchen-sink, padding, ...) cannot be played, and solvability stays unproven. So the audit
tries the answer in the formats the task's own instructions state (a tag they open and close,
a JSON key they show: autoenv.gates.families.stated_formats) and the common final-answer
formats on a few tasks, scored by the task's own rewards, and keeps the format the rewards
accept best, reported as learnt (`format <reversed_text>{}</reversed_text>`). The gates report the oracle as
inferred: it proves only that the answer field, so formatted, earns the reward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoenv.core.errors import AutoEnvError
from autoenv.gates.families import stated_formats
from autoenv.gates.scoring import task_messages
from autoenv.gates.audit_record import AUDIT_FILE, read_audit

FORMATS = {
    "answer-tag": "<answer>{}</answer>",
    "boxed": "\\boxed{{{}}}",
    "answer-line": "Answer: {}",
    "bare": "{}",
}
"""Final-answer formats, tried in this order (the first of equally good formats wins)."""
TRIAL_TASKS = 5


def format_reply(answer: object, form: str) -> str:
    """The answer in `form`: a name of FORMATS, or a template the env's instructions state (`<reversed_text>{}...`)."""
    return FORMATS[form].format(answer) if form in FORMATS else form.replace("{}", str(answer), 1)


def candidate_formats(tasks: list[Any]) -> list[str]:
    """The formats an answer-field oracle tries: those the first task's instructions state (a tag it opens and
    closes, a JSON key it shows), as templates, then the common ones (FORMATS); the first of equals wins."""
    data = tasks[0].data if tasks else None
    if data is None or not (getattr(data, "prompt", None) or getattr(data, "system_prompt", None)):
        return list(FORMATS)
    known = {template: name for name, template in FORMATS.items()}  # `<answer>{}</answer>` is answer-tag
    stated = [known.get(template, template) for template in stated_formats(task_messages(tasks[0])).values()]
    return list(dict.fromkeys([*stated, *FORMATS]))


async def infer_format(tasks: list[Any], score: Any) -> tuple[str | None, dict[str, float]]:
    """The format whose replies earn the most reward on up to TRIAL_TASKS tasks with an answer.

    `score(task, text)` is an awaitable giving the reply's total reward (None on an error).
    Returns (format or None when no format earns anything, {format: mean reward}).
    """
    trial = [t for t in tasks if getattr(t.data, "answer", None) not in (None, "")][:TRIAL_TASKS]
    means: dict[str, float] = {}
    forms = candidate_formats(trial)
    for form in forms:
        values = [await score(task, format_reply(task.data.answer, form)) for task in trial]
        scored = [v for v in values if v is not None]
        means[form] = round(sum(scored) / len(scored), 4) if scored else 0.0
    best = max(forms, key=lambda f: means.get(f, 0.0)) if means else None
    return (best if best is not None and means[best] > 0 else None), means


def inferred_format(audit_dir: Path) -> str | None:
    """The format the audit inferred for this candidate (audit.json's `oracle_format`), if any."""
    try:
        return read_audit(Path(audit_dir) / AUDIT_FILE).oracle_format
    except AutoEnvError:  # no audit (an eval without gates) or an unreadable one: no inferred oracle
        return None
