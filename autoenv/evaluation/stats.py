"""Per-model statistics over scored rollouts: errors are counted, never averaged in.

The mean carries a 95% interval from a cluster bootstrap over tasks (see resample.py).
`per_task` keeps a row (reward sum, scored rollouts, disagree) per task id, so a later
verdict can compare against this evaluation without reading its traces. The result is
the record's `ModelStats`, stored in the ledger as is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from autoenv.core.config import ModelConfig, Price
from autoenv.core.levels import natural_order
from autoenv.core.record import ErrorCounts, ForwardedRoute, Group, ModelStats, TaskRow
from autoenv.core.resample import Table, mean_interval, task_id
from autoenv.core.traces import Rollout
from autoenv.gates.ranges import max_reward

OUTCOMES = ("ok", "provider_error", "timeout", "env_error")
TIE = 1e-9


def _mean(values: Sequence[float] | np.ndarray) -> float | None:
    return round(float(np.mean(values)), 4) if len(values) else None


def sums(per_task: dict[str, TaskRow]) -> Table:
    """A per-task table as resample reads it: task id -> (reward sum, scored rollouts)."""
    return {key: (row.sum, row.n) for key, row in per_task.items()}




def _groups(rollouts: list[Rollout], attr: str) -> dict[str, Group]:
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rollouts:
        value = getattr(r, attr)
        if value is not None and r.reward is not None:
            groups[value].append(r.reward)
    names = natural_order(groups) if attr == "difficulty" else sorted(groups)  # easy < medium < hard, not by name
    return {name: Group(n=len(groups[name]), mean=_mean(groups[name])) for name in names}


def _max_reward(scored: list[Rollout]) -> float | None:
    weights: dict[str, float] = {}
    for r in scored:
        for name, score in r.components.items():
            if not 0 <= score <= 1:
                return None
            weights[name] = r.weights.get(name, 1.0)
    total = max_reward(weights)
    return round(total, 6) if total > 0 else None


def input_tokens(rollouts: list[Rollout], mode: str = "auto") -> tuple[int, int]:
    """(prompt tokens with the cached ones, cached ones) over `rollouts`; `mode` is the model's
    `cached_tokens`: how its endpoint counts the cached tokens (autoenv.core.traces.call_input_tokens)."""
    cached = sum(r.cached_input_tokens for r in rollouts)
    reported = sum(r.reported_prompt_tokens for r in rollouts)
    if mode == "included":
        return reported, cached
    if mode == "separate":
        return reported + cached, cached
    return sum(r.input_tokens for r in rollouts), cached


def cost(price: Price, tokens_in: int, cached: int, tokens_out: int) -> float:
    """USD for the tokens: cached prompt tokens at `cached_input` when set, the rest at `input`."""
    cached_price = price.input if price.cached_input is None else price.cached_input
    fresh = max(0, tokens_in - cached)
    return round((fresh * price.input + min(cached, tokens_in) * cached_price + tokens_out * price.output) / 1e6, 6)


def route_usd(model: ModelConfig, route: ForwardedRoute) -> float | None:
    """USD for the tokens the forwarder counted on a model's route (autoenv.sandbox.forwarder); None: unpriced."""
    price = model.price
    if not (price.input or price.output or price.cached_input):
        return None
    tokens_in = route.prompt_tokens + (route.cached_tokens if model.cached_tokens == "separate" else 0)
    return cost(price, tokens_in, route.cached_tokens, route.completion_tokens)


def model_stats(model: str, rollouts: list[Rollout], solve_threshold: float, price: Price | None = None,
                seed: int = 0, cached_mode: str = "auto") -> ModelStats:
    scored = [r for r in rollouts if r.outcome == "ok" and r.reward is not None]
    rewards = np.array([r.reward for r in scored], dtype=float)
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        if r.reward is not None:  # always, by `scored`
            by_task[r.task_key].append(r.reward)
    per_task = {
        task_id(key): TaskRow(sum=round(float(sum(v)), 6), n=len(v), disagree=len(v) >= 2 and max(v) - min(v) > TIE)
        for key, v in sorted(by_task.items())
    }
    grouped = [v for v in by_task.values() if len(v) >= 2]
    components: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        for name, score in r.components.items():
            components[name].append(score)
    errors = ErrorCounts(**{kind: sum(r.outcome == kind for r in rollouts) for kind in OUTCOMES if kind != "ok"})
    mean = _mean(rewards)
    maximum = _max_reward(scored)
    interval = mean_interval(sums(per_task), seed=seed)
    seconds = [r.seconds for r in rollouts if r.seconds]
    tokens_out = sum(r.output_tokens for r in rollouts)
    tokens_in, cached = input_tokens(rollouts, cached_mode)
    priced = price is not None and (price.input or price.output or price.cached_input)
    return ModelStats(
        model=model,
        rollouts=len(rollouts),
        scored=len(scored),
        mean=mean,
        ci=interval,
        std=round(float(np.std(rewards)), 4) if len(rewards) else None,
        solve_rate=_mean(rewards >= solve_threshold) if len(rewards) else None,
        max_reward=maximum,
        normalized_mean=round(mean / maximum, 4) if mean is not None and maximum else None,
        tasks=len({r.task_key for r in rollouts}),
        disagree_share=_mean([float(max(v) - min(v) > TIE) for v in grouped]) if grouped else None,
        errors=errors,
        components={name: _mean(v) for name, v in sorted(components.items())},
        by_difficulty=_groups(scored, "difficulty"),
        by_category=_groups(scored, "category"),
        input_tokens=tokens_in,
        cached_input_tokens=cached,
        output_tokens=tokens_out,
        cost_usd=cost(price, tokens_in, cached, tokens_out) if priced and price is not None else None,
        mean_seconds=_mean(seconds),
        p90_seconds=round(float(np.percentile(seconds, 90)), 3) if seconds else None,
        per_task=per_task,
    )
