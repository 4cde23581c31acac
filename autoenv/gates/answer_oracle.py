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

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autoenv.core.errors import AutoEnvError
from autoenv.gates.families import stated_formats
from autoenv.gates.search import fill
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
    """The answer in `form`: a name of FORMATS, or a template the env's instructions state or its reward's source
    parses (`<reversed_text>{}...`, `{"balance": {}}`: a JSON slot gets the value as JSON)."""
    return FORMATS[form].format(answer) if form in FORMATS else fill(form, str(answer))


MAX_READ = 6
"""Formats read from the reward's source that an answer-field oracle tries, at most (its most specific first)."""


def candidate_formats(tasks: list[Any], learnt: Sequence[str] = ()) -> list[str]:
    """The formats an answer-field oracle tries: those the first task's instructions state (a tag it opens and
    closes, a JSON key it shows), as templates, then those the reward's source parses (`learnt`: its regexes,
    delimiters and JSON keys, autoenv.gates.source_reading), then the common ones (FORMATS); the first of equals
    wins."""
    known = {template: name for name, template in FORMATS.items()}  # `<answer>{}</answer>` is answer-tag
    data = tasks[0].data if tasks else None
    stated: list[str] = []
    if data is not None and (getattr(data, "prompt", None) or getattr(data, "system_prompt", None)):
        stated = [known.get(template, template) for template in stated_formats(task_messages(tasks[0])).values()]
    read = [known.get(template, template) for template in learnt[:MAX_READ]]
    return list(dict.fromkeys([*stated, *read, *FORMATS]))


ANSWER = "answer"
NOT_ANSWERS = {"idx", "id", "name", "prompt", "system_prompt", "example_id", "task_id", "info", "description", "image",
               "workdir", "agent_user", "skills", "network_allow", "network_block", "artifacts", "artifact_max_bytes",
               "timeout", "resources"}
"""TaskData fields that are never the reference answer: ids, the prompt itself, free-form info."""
MAX_FIELDS = 6


def answer_fields(tasks: list[Any], limit: int = MAX_FIELDS) -> list[str]:
    """The fields of the tasks' data that could hold the reference answer: `answer` first, then each other field
    holding a string or number that differs between tasks (a field equal on every task cannot tell tasks apart:
    a reward paying it is a constant's, the surface probe's business), in the order the data declares them."""
    if not tasks:
        return []
    dumped = [t.data.model_dump() if hasattr(t.data, "model_dump") else dict(vars(t.data)) for t in tasks[:20]]
    fields = [ANSWER] if any(d.get(ANSWER) not in (None, "") for d in dumped) else []
    for name, value in dumped[0].items():
        if name in NOT_ANSWERS or name == ANSWER or isinstance(value, bool) or not (
                isinstance(value, (str, int, float)) or _scalars(value)):
            continue
        if len({str(d.get(name)) for d in dumped}) > 1:  # one task, or one value everywhere, shows nothing moving
            fields.append(name)
    return fields[:limit]


def _scalars(value: Any) -> bool:
    """A non-empty list of strings or numbers (a set answer: the primes in a range, the ids to return)."""
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)


def answer_of(task: Any, field: str | None = ANSWER) -> Any:
    """The task's reference answer, read from the field the answer-field oracle learnt (`answer` by default); a
    list of strings or numbers as the reply would state it, comma-separated."""
    value: Any = getattr(task.data, field or ANSWER, None)
    return ", ".join(str(v) for v in value) if _scalars(value) else value


async def infer_format(tasks: list[Any], score: Any, field: str = ANSWER, learnt: Sequence[str] = ()
                       ) -> tuple[str | None, dict[str, float]]:
    """The format whose replies earn the most reward on up to TRIAL_TASKS tasks whose `field` is set.

    `score(task, text)` is an awaitable giving the reply's total reward (None on an error).
    Returns (format or None when no format earns anything, {format: mean reward}).
    """
    trial = [t for t in tasks if answer_of(t, field) not in (None, "")][:TRIAL_TASKS]
    means: dict[str, float] = {}
    forms = candidate_formats(trial, learnt)
    for form in forms:
        values = [await score(task, format_reply(answer_of(task, field), form)) for task in trial]
        scored = [v for v in values if v is not None]
        means[form] = round(sum(scored) / len(scored), 4) if scored else 0.0
    best = max(forms, key=lambda f: means.get(f, 0.0)) if means else None
    return (best if best is not None and means[best] > 0 else None), means


MOVES = 0.1
"""How much more a field's own value must earn than another task's value for the field to count as the answer."""


async def control_mean(tasks: list[Any], score: Any, field: str, form: str) -> float:
    """The mean reward of `form` holding another trial task's value of `field` (or nothing, where every trial task
    holds the same value): what the reward pays whatever the field says."""
    trial = [t for t in tasks if answer_of(t, field) not in (None, "")][:TRIAL_TASKS]
    values = [answer_of(t, field) for t in trial]
    others = values[1:] + values[:1] if len({str(v) for v in values}) > 1 else [""] * len(values)
    scored = [v for task, other in zip(trial, others) if (v := await score(task, format_reply(other, form))) is not None]
    return round(sum(scored) / len(scored), 4) if scored else 0.0


async def infer_answer(tasks: list[Any], score: Any, fields: list[str] | None = None, learnt: Sequence[str] = ()
                       ) -> tuple[str | None, str | None, dict[str, float]]:
    """Which data field holds the answer and in which format the rewards accept it: each field of `answer_fields`
    put into each candidate format and scored (differential testing: the field whose value moves the reward is the
    answer, whatever its name). `answer` wins ties. Returns (format, field, {"field: format" or format: mean})."""
    best: tuple[float, str | None, str | None] = (0.0, None, None)
    tried: dict[str, float] = {}
    for field in answer_fields(tasks) if fields is None else fields:
        form, means = await infer_format(tasks, score, field, learnt)
        tried.update({(f if field == ANSWER else f"{field}: {f}"): m for f, m in means.items()})
        if form is not None and field != ANSWER:  # a field other than `answer` must move the reward: the same
            control = await control_mean(tasks, score, field, form)  # format holding another task's value earns less
            tried[f"{field}: {form} (another task's value)"] = control
            if means[form] <= control + MOVES:
                continue
        if form is not None and means[form] > best[0] + 1e-9:
            best = (means[form], form, field)
        if best[0] >= 1.0 - 1e-9:  # full marks: no other field can do better
            break
    return best[1], best[2], tried


def inferred_format(audit_dir: Path) -> str | None:
    """The format the audit inferred for this candidate (audit.json's `oracle_format`), if any."""
    return inferred(audit_dir)[0]


def inferred(audit_dir: Path) -> tuple[str | None, str]:
    """The answer-field oracle the audit learnt: (its format or None, the data field it reads)."""
    try:
        audit = read_audit(Path(audit_dir) / AUDIT_FILE)
    except AutoEnvError:  # no audit (an eval without gates) or an unreadable one: no inferred oracle
        return None, ANSWER
    return audit.oracle_format, audit.oracle_field or ANSWER
