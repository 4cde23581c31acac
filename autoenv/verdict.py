"""The keep/discard verdict: against the last *kept* iteration, on distance to the wanted state.

The wanted state: target mean inside [target_min, target_max], strong mean at or above
strong_min. Its distance is how far the target mean sits outside the band plus how far
the strong mean sits below its floor (0 inside). A change is judged by the bootstrap
interval of the *difference* in distance (tasks resampled jointly, paired where the two
evaluations share tasks):

- keep: the interval lies below zero (reliably closer), or both sit in the wanted state
  and the share of tasks whose rollouts disagree (GRPO's learning signal) reliably rose;
- discard: reliably farther (or reliably less learnable while in the wanted state), or a
  gate failed: checks or probes, or too many environment errors;
- inconclusive: the difference is inside the noise at this budget; the reason says how
  big a change the budget can resolve;
- crash: the evaluation failed. The first successful iteration (for these models) is kept.

Noise-driven verdicts are what sent the seed's agent in circles: `bench/verdict.py`
measures this rule next to the seed's on simulated environments.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from autoenv.config import Bands
from autoenv.formats import mean_ci
from autoenv.record import Entry, ModelStats, Readiness, Role, Verdict
from autoenv.resample import interval, joint_draws
from autoenv.stats import sums

Stats = Mapping[Role, ModelStats]


def band_distance(target_mean: Any, strong_mean: Any, bands: Bands) -> Any:
    """Distance to the wanted state; works on floats and on numpy arrays of replicates."""
    if target_mean is None or strong_mean is None:
        return None
    below = np.maximum(0.0, bands.target_min - np.asarray(target_mean, dtype=float))
    above = np.maximum(0.0, np.asarray(target_mean, dtype=float) - bands.target_max)
    short = np.maximum(0.0, bands.strong_min - np.asarray(strong_mean, dtype=float))
    total = below + above + short
    return round(float(total), 4) if np.ndim(total) == 0 else total


def rl_readiness(stats: Stats, bands: Bands) -> Readiness:
    target, strong = stats.get("target"), stats.get("strong")
    t_mean = target.mean if target else None
    s_mean = strong.mean if strong else None
    in_band = t_mean is not None and bands.target_min <= t_mean <= bands.target_max
    solvable = s_mean is not None and s_mean >= bands.strong_min
    learnable = target.disagree_share if target else None
    return Readiness(
        target_in_band=in_band,
        strong_above_floor=solvable,
        target_std=target.std if target else None,
        learnable_share=learnable,
        distance=band_distance(t_mean, s_mean, bands),
        ready=bool(in_band and solvable and (learnable or 0) >= bands.learnable_min),
    )


def error_rates(stats: ModelStats) -> dict[str, float]:
    return {kind: stats.error_rate(kind) for kind in ("provider_error", "timeout", "env_error")}


def comparable(entry: Entry, stats: Stats, offline: bool) -> bool:
    """Only evaluations of the same models can be compared."""
    if entry.offline != bool(offline):
        return False
    for role in ("target", "strong"):
        old, new = entry.stats.get(role), stats.get(role)
        if old is None or old.per_task is None:  # entries from before per-task tables cannot be paired
            return False
        if old.model != (new.model if new else None):
            return False
    return True


def decide(
    stats: Stats,
    bands: Bands,
    kept: Entry | None,
    *,
    eval_success: bool = True,
    error: str | None = None,
    gates_failed: list[str] | None = None,
    confidence: float = 0.95,
    seed: int = 0,
) -> Verdict:
    """The verdict for an evaluation with `stats`, compared against the `kept` entry."""
    if not eval_success:
        return Verdict(verdict="crash", reason=f"the evaluation failed: {error or 'see the report'}")
    if gates_failed:
        return Verdict(verdict="discard", reason="failed gates: " + "; ".join(gates_failed))
    for role in ("target", "strong"):
        s = stats.get(role)
        if s is None:
            continue
        env_rate = s.error_rate("env_error")
        if env_rate > bands.max_env_error_rate:
            return Verdict(verdict="discard", reason=(
                f"{env_rate:.0%} of {role} rollouts ended in environment errors "
                f"(allowed {bands.max_env_error_rate:.0%}): fix the candidate's errors first"))
        bad = s.error_rate("provider_error") + s.error_rate("timeout")
        if bad > bands.max_provider_error_rate:
            return Verdict(verdict="inconclusive", reason=(
                f"{bad:.0%} of {role} rollouts failed at the provider or timed out "
                f"(allowed {bands.max_provider_error_rate:.0%}): too few scored rollouts to judge"))
    t, s = stats.get("target"), stats.get("strong")
    if t is None or s is None or t.mean is None or s.mean is None:
        return Verdict(verdict="discard", reason="no scored rollouts for one of the models")
    distance = band_distance(t.mean, s.mean, bands)
    if kept is None:
        return Verdict(verdict="keep", reason=(
            f"first successful evaluation with these models; target {mean_ci(t)}, strong {mean_ci(s)}, "
            f"distance to the wanted state {distance:.3f}"))
    verdict = _compare(t, s, kept, bands, confidence, seed)
    return verdict.model_copy(update={"compared_to": kept.commit})


def _compare(t: ModelStats, s: ModelStats, kept: Entry, bands: Bands, confidence: float, seed: int) -> Verdict:
    old_t, old_s = kept.stats["target"], kept.stats["strong"]
    tables = [sums(m.per_task or {}) for m in (t, s, old_t, old_s)]
    new_tr, new_sr, old_tr, old_sr = joint_draws(*tables, seed=seed)
    delta = band_distance(new_tr, new_sr, bands) - band_distance(old_tr, old_sr, bands)
    low, high = interval(delta, confidence, len(set().union(*tables)))
    d_new = band_distance(t.mean, s.mean, bands)
    d_old = band_distance(old_t.mean, old_s.mean, bands)
    short = kept.commit[:8]
    summary = (f"distance to the wanted state {d_new:.3f} vs {d_old:.3f} at last kept {short} "
               f"(difference {d_new - d_old:+.3f}, {confidence:.0%} interval [{low:+.3f}, {high:+.3f}]); "
               f"target {mean_ci(t)} vs {mean_ci(old_t)}")
    if high < 0:
        return Verdict(verdict="keep", reason="closer to the wanted state: " + summary)
    if low > 0:
        return Verdict(verdict="discard", reason="farther from the wanted state: " + summary)
    if d_new == 0 and d_old == 0:
        learn = _learnable_comparison(t, old_t, confidence, seed)
        if learn is not None:
            return learn
    return Verdict(verdict="inconclusive", reason=(
        f"the difference is inside the noise: {summary}. At this budget only changes in the target "
        f"mean beyond about {resolvable(t, old_t):.2f} can be told apart; "
        "raise budget.examples to resolve smaller ones"))


def resolvable(new: ModelStats, old: ModelStats) -> float:
    """The smallest change in the target mean this budget can tell apart: the two means'
    interval half-widths combined (a paired difference can look sharper than that when
    the two runs happen to agree task by task, which says nothing about the budget)."""
    halves = [(m.ci[1] - m.ci[0]) / 2 for m in (new, old) if m.ci]
    return float(np.sqrt(sum(h * h for h in halves))) if halves else float("nan")


def _learnable_comparison(new: ModelStats, old: ModelStats, confidence: float, seed: int) -> Verdict | None:
    """Both in the wanted state: did the share of tasks with disagreeing rollouts change?"""
    def flags(model: ModelStats) -> dict[str, tuple[float, float]]:
        # a table of (disagree, 1) per task with >= 2 scored rollouts: its "mean" is the share
        return {k: (float(row.disagree), 1.0) for k, row in (model.per_task or {}).items() if row.n >= 2}

    new_f, old_f = flags(new), flags(old)
    if not new_f or not old_f:
        return None
    new_r, old_r = joint_draws(new_f, old_f, seed=seed + 1)
    low, high = interval(new_r - old_r, confidence, len(set(new_f) | set(old_f)))
    detail = (f"both in the wanted state; learnable share {new.disagree_share} vs "
              f"{old.disagree_share} ({confidence:.0%} interval of the difference "
              f"[{low:+.3f}, {high:+.3f}])")
    if low > 0:
        return Verdict(verdict="keep", reason="more tasks with a learning signal: " + detail)
    if high < 0:
        return Verdict(verdict="discard", reason="fewer tasks with a learning signal: " + detail)
    return None
