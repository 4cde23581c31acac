"""The range reward scores are compared on: declared by the env, else the documented [0, 1], else observed.

verifiers documents no reward range: a game's payoff of +/-2 chips is a legitimate design. AutoEnv's
probes compare shares of [0, 1], so scores are normalised to a range: the one the env declares
(`reward_range = (low, high)` on its task or Env class, an AutoEnv convention), else [0, 1] when every
observed score lies in it, else the observed bounds widened to include [0, 1] (reported as a warning
with the numbers, and the constant the seats' rewards sum to when they do). A score outside a
declared range is still an environment error: the env broke its own declaration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autoenv.gates.audit_record import ProbeRecord


@dataclass(frozen=True)
class RewardRange:
    low: float
    high: float
    source: str
    """"declared" (the env's reward_range), "documented" ([0, 1]) or "observed" (the probes' own scores)."""
    observed: tuple[float, float] | None = None

    @property
    def normalises(self) -> bool:
        return (self.low, self.high) != (0.0, 1.0) and self.high > self.low

    def text(self) -> str:
        return {"declared": "declared by the task's reward_range", "documented": "documented",
                "observed": "observed"}[self.source]


def scores(records: Sequence[ProbeRecord]) -> list[float]:
    """Every finite reward score in the probe records, the reference seats' rewards included."""
    out = []
    for r in records:
        if r.skipped:
            continue
        values = [*r.components.values(), *(o.reward for o in r.others)]
        for value in values:
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.append(float(value))
    return out


def choose(declared: list[float] | None, records: Sequence[ProbeRecord]) -> RewardRange:
    """The range to check and normalise scores against (see the module docstring)."""
    if declared:
        return RewardRange(float(declared[0]), float(declared[1]), "declared")
    seen = scores(records)
    if not seen or (min(seen) >= 0.0 and max(seen) <= 1.0):
        return RewardRange(0.0, 1.0, "documented")
    low, high = min(min(seen), 0.0), max(max(seen), 1.0)
    return RewardRange(low, high, "observed", (min(seen), max(seen)))


def finding(rng: RewardRange, constant_sum: float | None) -> str:
    """The warning's text for an observed range."""
    lo, hi = rng.observed or (rng.low, rng.high)
    return (f"rewards outside [0, 1] observed: scores from {lo:g} to {hi:g}"
            + (f", the seats' rewards summing to {constant_sum:g} in every episode (a constant-sum game)"
               if constant_sum is not None else "")
            + f"; the probes compare them normalised from [{rng.low:g}, {rng.high:g}]. verifiers documents no "
            "reward range, so this is not an error; declare `reward_range = (low, high)` on the task class to "
            "fix the scale rather than infer it from a sample")


def max_reward(weights: dict[str, float]) -> float:
    """The most a rollout can earn when every reward returns [0, 1]: the positive weights' sum."""
    return sum(max(0.0, w) for w in weights.values())
