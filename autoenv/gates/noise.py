"""Whether a probe's harvest is beyond noise: a cause is named only when the number of tasks supports it.

A probe replies to a sample of tasks, so its mean is an estimate. Two tasks of twelve paid by
chance (a kitchen-sink whose true line fell last, where the reward reads the last line) is a
mean of 0.17 against a limit of 0.10, and once discarded a clean environment about one run in
nine. A probe fails only when the one-sided lower confidence bound of its mean clears the
limit; a mean above the limit whose bound does not is reported as a warning, "within noise".

With the per-task values at hand the bound is Student's: the mean less t(n-1) standard errors,
so a harvest paid evenly on every task (a format credit of 0.3 each time) is certain from a few
tasks, while two lucky tasks of twelve are not. With only a mean and a count (a component's
column of the exploit matrix) it is Wilson's score bound for a proportion: per-task scores lie
in [0, 1] once divided by their maximum, and such a score's variance is at most p(1 - p), so the
bound holds for fractional scores too (conservatively). A harvest near 1.0, what a real exploit
earns, clears a limit of 0.1 from three tasks on either way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z = 1.645
"""One-sided 95%: a probe that earns exactly its limit fails about one time in twenty."""


def lower_bound(share: float, n: int, z: float = Z) -> float:
    """Wilson's one-sided lower bound for a mean `share` in [0, 1] over `n` tasks (0 when n is 0)."""
    if n <= 0:
        return 0.0
    p = min(max(share, 0.0), 1.0)
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


def mean_lower_bound(values: Sequence[float], z: float = Z) -> float:
    """Student's one-sided lower bound of the mean of per-task `values` (at least two)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    nu = n - 1  # t quantile by the Cornish-Fisher expansion (as autoenv.core.resample does)
    t = z + (z**3 + z) / (4 * nu) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2)
    return mean - t * sd / math.sqrt(n)


def beyond(mean: float, limit: float, n: int, scale: float = 1.0, values: Sequence[float] | None = None) -> bool:
    """`mean` (over `n` tasks, in units whose per-task maximum is `scale`) reliably above `limit`; from the
    per-task `values` when given (two or more), else from the mean and count alone."""
    if mean <= limit + 1e-9:
        return False
    return bound(mean, n, scale, values) > limit + 1e-9


def bound(mean: float, n: int, scale: float = 1.0, values: Sequence[float] | None = None) -> float:
    if values is not None and len(values) >= 2:
        return mean - (sum(values) / len(values) - mean_lower_bound(values))
    scale = scale if scale > 0 else 1.0
    return lower_bound(mean / scale, n) * scale


def within(mean: float, limit: float, n: int, scale: float = 1.0, values: Sequence[float] | None = None) -> str:
    """The words for a mean above its limit whose bound is not: what the tasks support."""
    return (f"within noise: above the limit {limit:.3f}, but on {n} task(s) its {Z_WORDS} lower bound is "
            f"{bound(mean, n, scale, values):.3f}, not beyond it; not a cause")


Z_WORDS = "95% one-sided"
