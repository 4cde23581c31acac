"""Per-model statistics over scored rollouts: errors are counted, never averaged in."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from autoenv.traces import Rollout

OUTCOMES = ("ok", "provider_error", "timeout", "env_error")


@dataclass
class ModelStats:
    model: str
    rollouts: int
    scored: int
    mean: float | None
    std: float | None
    solve_rate: float | None
    tasks: int
    disagree_share: float | None
    """Share of tasks with >= 2 scored rollouts whose rewards differ (what GRPO learns from)."""
    errors: dict[str, int] = field(default_factory=dict)
    components: dict[str, float] = field(default_factory=dict)
    by_difficulty: dict[str, dict] = field(default_factory=dict)
    by_category: dict[str, dict] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    mean_seconds: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _mean(values) -> float | None:
    return round(float(np.mean(values)), 4) if len(values) else None


def _groups(rollouts: list[Rollout], attr: str) -> dict[str, dict]:
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rollouts:
        value = getattr(r, attr)
        if value is not None and r.reward is not None:
            groups[value].append(r.reward)
    return {name: {"n": len(v), "mean": _mean(v)} for name, v in sorted(groups.items())}


def model_stats(model: str, rollouts: list[Rollout], solve_threshold: float) -> ModelStats:
    scored = [r for r in rollouts if r.outcome == "ok" and r.reward is not None]
    rewards = np.array([r.reward for r in scored], dtype=float)
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        by_task[r.task_key].append(r.reward)
    grouped = [v for v in by_task.values() if len(v) >= 2]
    components: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        for name, score in r.components.items():
            components[name].append(score)
    errors = {kind: sum(r.outcome == kind for r in rollouts) for kind in OUTCOMES if kind != "ok"}
    return ModelStats(
        model=model,
        rollouts=len(rollouts),
        scored=len(scored),
        mean=_mean(rewards),
        std=round(float(np.std(rewards)), 4) if len(rewards) else None,
        solve_rate=_mean(rewards >= solve_threshold) if len(rewards) else None,
        tasks=len({r.task_key for r in rollouts}),
        disagree_share=_mean([float(max(v) - min(v) > 1e-9) for v in grouped]) if grouped else None,
        errors=errors,
        components={name: _mean(v) for name, v in sorted(components.items())},
        by_difficulty=_groups(scored, "difficulty"),
        by_category=_groups(scored, "category"),
        input_tokens=sum(r.input_tokens for r in rollouts),
        output_tokens=sum(r.output_tokens for r in rollouts),
        mean_seconds=_mean([r.seconds for r in rollouts if r.seconds]),
    )
