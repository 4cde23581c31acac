"""The reward-search probe played in-process: its material read from the candidate, its replies scored by the
candidate's own rewards (autoenv.gates.search holds the search itself).

What is read here, beside the candidate: the source text of the modules that define the task's rewards
and metrics (read, never run: autoenv.gates.source_reading parses it with `ast`), the tasks' instructions
and data. The reference's replies (the oracle hook, else the answer-field oracle) are scored on the
training tasks only to find the components the reference never earns in full (the ceiling), which the
search is pointed at. The search's records are the chosen template's replies on the held-out tasks.
"""

from __future__ import annotations

import inspect
import re
import time
from pathlib import Path
from typing import Any

from autoenv.child.worker import sample_tasks
from autoenv.core.events import emit
from autoenv.core.messages import Reply
from autoenv.gates.action_search import TRAIN_TASKS as ACTION_TRAIN
from autoenv.gates.action_search import Plan, search_actions
from autoenv.gates.answer_oracle import FORMATS, NOT_ANSWERS, format_reply
from autoenv.gates.families import (
    holds_constant,
    options,
    shared_surface,
    stated_formats,
    surface_replies,
)
from autoenv.gates.scoring import reward_record, skipped, task_messages, total_reward
from autoenv.gates.search import GROW_TO, HELD_TASKS, MAX_FORMATS, TRAIN_TASKS, Material, data_material, search
from autoenv.gates.source_reading import SourceReading, read_sources

SOURCE_BYTES = 400_000
TAGLIKE = re.compile(r"\s*</?[\w-]+>\s*")
"""A tag alone (`<answer>`): part of a format, not content for one."""
"""The most source text read from the candidate's reward modules."""


def split(tasks: list[Any], train: int) -> tuple[list[Any], list[Any]]:
    """(training tasks, held-out tasks): `train` of them to search on, the rest to judge on; with few tasks, half
    each; with one task, that task for both (no transfer can be checked: the search is judged where it was found,
    and its trace says so by its held-out count of zero)."""
    n = min(train, max(1, len(tasks) // 2))
    return tasks[:n], tasks[n:] or tasks[:n]


def reward_sources(task: Any, candidate_dir: str | Path) -> list[str]:
    """The text of each module under the candidate's folder that defines one of the task's rewards or metrics, its
    task class or its taskset (read from disk: the code is parsed by the harness, never run for this)."""
    root = Path(candidate_dir).resolve()
    objects = [fn for kind in ("reward", "metric") for fn in task.hooks(kind)] + [type(task)]
    texts: list[str] = []
    seen: set[Path] = set()
    total = 0
    for obj in objects:
        try:
            path = Path(inspect.getsourcefile(getattr(obj, "__func__", None) or obj) or "").resolve()
        except (TypeError, OSError):
            continue
        if path in seen or not path.is_file() or root not in path.parents:
            continue
        seen.add(path)
        text = path.read_text(errors="replace")[:SOURCE_BYTES - total]
        total += len(text)
        texts.append(text)
        if total >= SOURCE_BYTES:
            break
    return texts


def read_candidate(task: Any, candidate_dir: str | Path) -> SourceReading:
    return read_sources(reward_sources(task, candidate_dir))


def material(tasks: list[Any], reading: SourceReading, answer_format: str | None) -> Material:
    """The search's dictionary and formats, from the candidate's source, instructions and data."""
    first = task_messages(tasks[0])
    common = {name: template.format("{}") for name, template in FORMATS.items()}  # `\\boxed{{{}}}` -> `\\boxed{{}}`
    learnt = [common.get(answer_format, answer_format)] if answer_format else []
    formats = list(dict.fromkeys([*learnt, *reading.formats, *stated_formats(first).values(), *common.values()]))
    shared = shared_surface([task_messages(t) for t in tasks])
    offered = surface_replies(first)
    surface = [constant for name, (constant, _) in offered.items() if name in shared and constant]
    datas = [t.data.model_dump() if hasattr(t.data, "model_dump") else dict(vars(t.data)) for t in tasks]
    numbers, values = data_material(datas, NOT_ANSWERS | {"idx"})
    numbers = list(dict.fromkeys([*(f"{n:g}" for n in reading.numbers), *numbers]))
    labels = [label for label, _ in options(first)]
    words = [w for w in dict.fromkeys([*reading.strings, *reading.keys, *surface]) if not TAGLIKE.fullmatch(w)]
    return Material(formats=formats[:MAX_FORMATS], words=words, numbers=numbers, values=values, options=labels,
                    sources={"reward source formats": len(reading.formats), "reward source strings": len(reading.strings),
                             "reward source numbers": len(reading.numbers), "reward source keys": len(reading.keys),
                             "instruction constants": len(surface), "task data values": len(values),
                             "task data numbers": len(numbers) - len(reading.numbers), "options": len(labels)})


def focus_components(oracle_rows: list[tuple[float | None, dict[str, float]]], weights: dict[str, float]) -> list[str]:
    """The positively weighted components the reference never earns in full on any training task (components score
    in [0, 1]): no honest policy shown here earns them, so the search is pointed at each (three at most)."""
    best: dict[str, float] = {}
    for _, components in oracle_rows:
        for name, value in components.items():
            best[name] = max(best.get(name, 0.0), value)
    names = [n for n, w in weights.items() if w > 0 and best.get(n, 0.0) < 1.0 - 1e-9]
    return names[:3]


async def search_in_process(vf: Any, job: Any, tasks_all: list[Any], score_batch: Any, oracle_of: Any,
                            answer_format: str | None, reading: SourceReading) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(records on the held-out tasks, the search's trace for audit.json)."""
    chosen_tasks = sample_tasks(tasks_all, TRAIN_TASKS + HELD_TASKS, job.seed)
    train, held_out = split(chosen_tasks, TRAIN_TASKS)
    weights: dict[str, float] = {}

    async def score(task: Any, replies: list[str]) -> list[tuple[float | None, dict[str, float]]]:
        out = []
        for trace, error in await score_batch(vf, task, [Reply(content=r) for r in replies], job.candidate_dir):
            rewards = {} if error else {k: v for k, v in (trace.rewards or {}).items() if v is not None}
            weights.update({k: v.weight for k, v in rewards.items()})
            parts = {k: float(v.score) for k, v in rewards.items() if isinstance(v.score, (int, float))}
            out.append((None if error else total_reward(trace), parts))
        return out

    oracle_rows: list[tuple[float | None, dict[str, float]]] = []
    for task in train:
        reply = oracle_of(task)
        if reply is not None:
            oracle_rows += await score(task, [reply])
    top = sum(w for w in weights.values() if w > 0) or None
    focus = focus_components(oracle_rows, weights) if oracle_rows else []
    stuff = material(chosen_tasks, reading, answer_format)
    begun = time.monotonic()
    outcome = await search(train, held_out, stuff, score, lambda task, constant: holds_constant(constant, task.data),
                           seed=job.seed, ceiling=top, focus=focus, grow_to=GROW_TO)
    reply = outcome.chosen.reply()
    records = []
    for task in held_out:
        ((trace, error),) = await score_batch(vf, task, [Reply(content=reply)], job.candidate_dir)
        record = reward_record(trace, "search", task, reply, error)
        constant = outcome.chosen.constant()
        record.update(strategy=outcome.chosen.describe(), strategies=outcome.trace["templates"],
                      constant_in_data=bool(constant) and holds_constant(constant, task.data))
        records.append(record)
        emit("probe", probe="search")
    trace = {**outcome.trace, "reference_components": _means(oracle_rows), "focus": focus,
             "learnt": {"formats": list(reading.formats), "keys": list(reading.keys),
                        "strings": list(reading.strings[:20]), "numbers": list(reading.numbers[:10])},
             "seconds": round(time.monotonic() - begun, 3)}
    return records, trace


def _means(rows: list[tuple[float | None, dict[str, float]]]) -> dict[str, float]:
    sums: dict[str, float] = {}
    for _, parts in rows:
        for k, v in parts.items():
            sums[k] = sums.get(k, 0.0) + v
    return {k: round(v / len(rows), 4) for k, v in sums.items()} if rows else {}


def oracle_text(task: Any, hook_reply: Any, answer_format: str | None, answer: Any) -> str | None:
    """The reference reply's text on `task`: the hook's, else the answer-field oracle's, else None."""
    if hook_reply is not None:
        return Reply.coerce(hook_reply).content or None
    if answer_format and answer not in (None, ""):
        return format_reply(answer, answer_format)
    return None


class ActionSearch:
    """The reward search of a tools or multi-turn candidate: action plans (autoenv.gates.action_search) played as
    real rollouts against the embedded endpoint, which serves each plan as the policy `search:<id>` (`handler`).
    `run` is handed the rollout stage's `play_more` (autoenv.child.rollout_probes), so every generation plays
    while the env's tool servers stay up; it leaves the chosen plan's records on the held-out tasks in `records`
    and its trace in `trace`."""

    def __init__(self, job: Any, tasks_all: list[Any], sample: list[Any], answer_format: str | None,
                 reading: SourceReading, has_tools: bool) -> None:
        chosen = sample_tasks(tasks_all, ACTION_TRAIN + len(sample), job.seed)
        self.train, self.held_out = split(chosen, ACTION_TRAIN)
        self.material = material(chosen, reading, answer_format)
        self.job, self.reading, self.has_tools = job, reading, has_tools
        self.registry: dict[str, Plan] = {}
        self.ids: dict[Plan, str] = {}
        self.kept: dict[tuple[str, str], dict[str, Any]] = {}
        self.records: list[dict[str, Any]] = []
        self.trace: dict[str, Any] = {}

    def handler(self, request: Any, param: str | None) -> Reply:
        return self.registry[param or ""].turn(request.messages, request.tools)

    async def run(self, play_more: Any) -> None:
        async def play(plans: list[Plan], tasks: list[Any]) -> list[list[float | None]]:
            for plan in plans:
                if plan not in self.ids:
                    self.ids[plan] = str(len(self.registry))
                    self.registry[self.ids[plan]] = plan
            for record in await play_more([f"search:{self.ids[p]}" for p in plans], tasks):
                self.kept[(record["probe"], str(record["key"]))] = record
            return [[0.0 if held_by(plan, task) else _total(self.kept.get((f"search:{self.ids[plan]}", str(task.key))))
                     for task in tasks] for plan in plans]

        outcome = await search_actions(self.train, self.held_out, self.material, play, self.has_tools,
                                       seed=self.job.seed)
        name = f"search:{self.ids.get(outcome.chosen, '')}"
        for task in self.held_out:
            record = dict(self.kept.get((name, str(task.key)))
                          or skipped("search", task, "the chosen plan was not replayed on this task"))
            record.update(probe="search", strategy=outcome.chosen.describe(self.has_tools), strategies=len(self.registry),
                          constant_in_data=held_by(outcome.chosen, task))
            self.records.append(record)
            emit("probe", probe="search")
        reading = self.reading
        self.trace = {**outcome.trace, "learnt": {"formats": list(reading.formats), "keys": list(reading.keys),
                                                  "strings": list(reading.strings[:20]),
                                                  "numbers": list(reading.numbers[:10])}}


def held_by(plan: Plan, task: Any) -> bool:
    """The plan replies with its template's one constant and that constant is one of the task's own data values:
    right by the data there, so it earns the plan nothing (as in-process)."""
    constant = plan.template.constant()
    return bool(constant) and plan.says_template() and holds_constant(constant, task.data)


def _total(record: dict[str, Any] | None) -> float | None:
    """A rollout record's total reward; None when it was skipped or failed."""
    if record is None or record.get("skipped") or record.get("error"):
        return None
    weights = record.get("weights") or {}
    return sum(v * weights.get(k, 1.0) for k, v in (record.get("components") or {}).items()
               if isinstance(v, (int, float)))
