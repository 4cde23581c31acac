"""Which tasks an evaluation runs: a seeded sample, stratified by difficulty when present.

The harness, not the candidate, chooses the eval tasks, so the agent cannot tune the
environment to "the first N" and iterations with the same seed see comparable samples.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class TaskRef:
    """What the sampler needs to know of one task."""

    idx: int
    key: str
    difficulty: str | None = None


def choose_tasks(tasks: list[TaskRef], count: int, seed: int) -> list[TaskRef]:
    """`count` tasks drawn with `seed`, in proportion to each difficulty's share.

    Allocation uses largest remainders so the strata sum to `count`; every stratum
    present gets at least one task when `count` allows. The result is ordered by `idx`.
    """
    if count >= len(tasks):
        return sorted(tasks, key=lambda t: t.idx)
    strata: dict[str, list[TaskRef]] = defaultdict(list)
    for task in tasks:
        strata[str(task.difficulty) if task.difficulty is not None else ""].append(task)
    names = sorted(strata)
    quotas = {name: count * len(strata[name]) / len(tasks) for name in names}
    alloc = {name: int(quotas[name]) for name in names}
    floor = 1 if count >= len(names) else 0
    for name in names:
        alloc[name] = max(alloc[name], floor)
    while sum(alloc.values()) > count:
        # take back from the stratum furthest above its quota, never below the floor
        name = max((n for n in names if alloc[n] > floor), key=lambda n: (alloc[n] - quotas[n], alloc[n]))
        alloc[name] -= 1
    by_remainder = sorted(names, key=lambda n: quotas[n] - int(quotas[n]), reverse=True)
    while sum(alloc.values()) < count:
        for name in by_remainder:
            if sum(alloc.values()) < count and alloc[name] < len(strata[name]):
                alloc[name] += 1
    rng = random.Random(seed)
    chosen: list[TaskRef] = []
    for name in names:
        chosen.extend(rng.sample(strata[name], min(alloc[name], len(strata[name]))))
    return sorted(chosen, key=lambda t: t.idx)
