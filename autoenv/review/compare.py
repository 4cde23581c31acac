"""Two evaluations on the tasks both saw: paired differences with bootstrap intervals.

The harness draws the same tasks for every evaluation with the same seed, so two
iterations (or two models on one iteration) can be compared task by task, which cancels
how hard each task is. Differences (B minus A) of the mean reward come with the
interval of the paired cluster bootstrap the verdict uses (`resample.joint_draws`):
overall, per difficulty and per reward component, plus the tasks that flipped
(solved, i.e. some rollout reached bands.solve_threshold, in one and not the other).

Each side's tasks come from its traces; when the traces are gone, from the ledger's
per-task rows, which keep neither difficulty nor components (so those come only from the
other side's traces, or not at all) nor whether a task was solved.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

from autoenv.core.errors import AutoEnvError
from autoenv.core.levels import natural_order
from autoenv.core.record import TaskRow
from autoenv.core.resample import interval, joint_draws, task_id
from autoenv.core.traces import Rollout, read_rollouts
from autoenv.review.rows import Row
from autoenv.review.run import Project

CONFIDENCE = 0.95


@dataclass
class TaskScores:
    """One task's scored rollouts on one side."""

    sum: float = 0.0
    n: int = 0
    idx: int | None = None
    difficulty: str | None = None
    solved: bool | None = None
    """Some rollout reached the solve threshold; None when unknown (ledger rows only)."""
    components: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    @property
    def mean(self) -> float:
        return self.sum / self.n


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a label a person reads and its tasks by task id."""

    label: str
    model: str | None
    tasks: dict[str, TaskScores]
    from_traces: bool = True

    @classmethod
    def from_rollouts(cls, label: str, model: str | None, rollouts: list[Rollout], solve_threshold: float) -> Side:
        tasks: dict[str, TaskScores] = {}
        for r in rollouts:
            if r.outcome != "ok" or r.reward is None:
                continue
            task = tasks.setdefault(task_id(r.task_key), TaskScores(idx=r.idx, difficulty=r.difficulty, solved=False))
            task.sum += r.reward
            task.n += 1
            task.solved = bool(task.solved or r.reward >= solve_threshold)
            for name, score in r.components.items():
                task.components[name].append(score)
        return cls(label=label, model=model, tasks=tasks)

    @classmethod
    def from_rows(cls, label: str, model: str | None, rows: dict[str, TaskRow]) -> Side:
        return cls(label=label, model=model, from_traces=False,
                   tasks={k: TaskScores(sum=row.sum, n=row.n) for k, row in rows.items() if row.n})


@dataclass(frozen=True)
class Difference:
    """Mean of A, mean of B and B - A with its interval, over `tasks` shared tasks."""

    name: str
    tasks: int
    a: float
    b: float
    low: float
    high: float
    min_tasks: int = 2
    """stats.min_tasks: over fewer shared tasks the interval is noise, and not shown."""

    @property
    def delta(self) -> float:
        return self.b - self.a

    @property
    def too_few(self) -> bool:
        """Fewer shared tasks than stats.min_tasks: "too few shared tasks to compare", no interval."""
        return self.tasks < max(2, self.min_tasks)

    @property
    def direction(self) -> int:
        """+1 when B is reliably higher, -1 when reliably lower, 0 inside the noise (or too few tasks:
        a single task has no spread to resample, a handful none worth trusting)."""
        if self.too_few:
            return 0
        return 1 if self.low > 0 else -1 if self.high < 0 else 0


@dataclass(frozen=True)
class TaskPair:
    task: str
    idx: int | None
    difficulty: str | None
    a: float
    b: float
    solved_a: bool | None
    solved_b: bool | None

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    overall: Difference | None
    by_difficulty: list[Difference]
    by_component: list[Difference]
    tasks: list[TaskPair]
    """Shared tasks, the largest change first."""
    only_a: int
    only_b: int
    confidence: float
    solve_threshold: float
    unpaired: Difference | None = None
    """B − A with each side resampled over its own tasks, where they share fewer than min_tasks (a new dataset or
    new prompts) and each has enough of its own: what the verdict compares then."""

    @property
    def gained(self) -> list[TaskPair]:
        """Solved by B, not by A."""
        return [t for t in self.tasks if t.solved_b and t.solved_a is False]

    @property
    def lost(self) -> list[TaskPair]:
        """Solved by A, not by B."""
        return [t for t in self.tasks if t.solved_a and t.solved_b is False]


TOO_FEW = "too few shared tasks to compare"


def compare(a: Side, b: Side, solve_threshold: float, confidence: float = CONFIDENCE, seed: int = 0,
            min_tasks: int = 2) -> Comparison:
    """B − A on the tasks both saw; scopes over fewer than `min_tasks` tasks are marked `too_few`."""
    shared = sorted(set(a.tasks) & set(b.tasks))
    overall = _difference("all tasks", a, b, shared, lambda t: (t.sum, t.n), confidence, seed)
    difficulty = {k: a.tasks[k].difficulty or b.tasks[k].difficulty for k in shared}  # ledger rows keep none
    by_difficulty = [_difference(d, a, b, [k for k in shared if difficulty[k] == d],
                                 lambda t: (t.sum, t.n), confidence, seed)
                     for d in natural_order(level for level in difficulty.values() if level is not None)]
    names = sorted({n for k in shared for n in a.tasks[k].components} & {n for k in shared for n in b.tasks[k].components})
    by_component = [_difference(name, a, b, [k for k in shared if a.tasks[k].components.get(name)
                                             and b.tasks[k].components.get(name)],
                                lambda t, name=name: (sum(t.components[name]), len(t.components[name])),
                                confidence, seed) for name in names]
    pairs = [TaskPair(task=k, idx=a.tasks[k].idx if a.tasks[k].idx is not None else b.tasks[k].idx,
                      difficulty=difficulty[k], a=a.tasks[k].mean,
                      b=b.tasks[k].mean, solved_a=a.tasks[k].solved, solved_b=b.tasks[k].solved) for k in shared]
    pairs.sort(key=lambda p: (-abs(p.delta), p.idx if p.idx is not None else -1, p.task))
    def guarded(d: Difference) -> Difference:
        return dataclasses.replace(d, min_tasks=min_tasks)

    unpaired = None
    if len(shared) < max(2, min_tasks) and min(len(a.tasks), len(b.tasks)) >= max(2, min_tasks):
        unpaired = _unpaired(a, b, confidence, seed)
    return Comparison(a=a, b=b, overall=guarded(overall) if overall else None, unpaired=unpaired,
                      by_difficulty=[guarded(d) for d in by_difficulty if d],
                      by_component=[guarded(d) for d in by_component if d], tasks=pairs,
                      only_a=len(set(a.tasks) - set(b.tasks)), only_b=len(set(b.tasks) - set(a.tasks)),
                      confidence=confidence, solve_threshold=solve_threshold)


def _difference(name: str, a: Side, b: Side, keys: list[str], cell, confidence: float, seed: int) -> Difference | None:
    """B - A over `keys`, `cell(task)` giving each task's (sum, n), with a paired bootstrap interval."""
    if not keys:
        return None
    table_a = {k: cell(a.tasks[k]) for k in keys}
    table_b = {k: cell(b.tasks[k]) for k in keys}
    draws_a, draws_b = joint_draws(table_a, table_b, seed=seed)
    low, high = interval(draws_b - draws_a, confidence, len(keys))
    # the small-sample widening must not claim differences no resample could produce
    deltas = [table_b[k][0] / table_b[k][1] - table_a[k][0] / table_a[k][1] for k in keys]
    low, high = max(low, min(deltas)), min(high, max(deltas))
    mean_a = sum(s for s, _ in table_a.values()) / sum(n for _, n in table_a.values())
    mean_b = sum(s for s, _ in table_b.values()) / sum(n for _, n in table_b.values())
    return Difference(name=name, tasks=len(keys), a=round(mean_a, 4), b=round(mean_b, 4),
                      low=round(low, 4), high=round(high, 4))


UNPAIRED_SEED = 7919
"""Offsets B's resampling seed in an unpaired comparison, so the two sides' draws are independent (as the verdict's)."""


def _unpaired(a: Side, b: Side, confidence: float, seed: int) -> Difference:
    """B − A, each side resampled over its own tasks (the verdict's unpaired comparison across a dataset change)."""
    table_a = {k: (t.sum, t.n) for k, t in a.tasks.items()}
    table_b = {k: (t.sum, t.n) for k, t in b.tasks.items()}
    (draws_a,), (draws_b,) = joint_draws(table_a, seed=seed), joint_draws(table_b, seed=seed + UNPAIRED_SEED)
    low, high = interval(draws_b - draws_a, confidence, min(len(table_a), len(table_b)))
    mean_a = sum(s for s, _ in table_a.values()) / sum(n for _, n in table_a.values())
    mean_b = sum(s for s, _ in table_b.values()) / sum(n for _, n in table_b.values())
    return Difference(name="all tasks, unpaired", tasks=min(len(table_a), len(table_b)), a=round(mean_a, 4),
                      b=round(mean_b, 4), low=round(low, 4), high=round(high, 4))


def evaluation_side(project: Project, row: Row, role: str) -> Side:
    """`role`'s side of the evaluation `row`: from its traces, else from its ledger row."""
    entry = row.entry
    stats = entry.stats.get(role) if entry else None  # type: ignore[call-overload]
    point = getattr(row, role, None)
    model = stats.model if stats else (point.model if point else None)
    label = f"{row.short} {role}" + (f" ({model})" if model else "")
    outputs = project.outputs(entry) if entry else project.config.path("outputs") / row.commit
    rollouts = read_rollouts(outputs / role) if outputs else []
    side = Side.from_rollouts(label, model, rollouts, project.config.bands.solve_threshold)
    if side.tasks:
        return side
    if stats is not None and stats.per_task:
        return Side.from_rows(label, model, stats.per_task)
    raise AutoEnvError(
        f"evaluation #{row.number} {row.short} has no {role} scores to compare (verdict {row.verdict})",
        where=str(outputs or project.config.path("outputs") / row.commit),
        fix="pick evaluations with scores (autoenv log shows them), or the other model with --role",
    )
