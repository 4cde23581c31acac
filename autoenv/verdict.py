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

import numpy as np

from autoenv.config import Bands
from autoenv.report import mean_ci
from autoenv.resample import interval, joint_draws


def band_distance(target_mean, strong_mean, bands: Bands):
    """Distance to the wanted state; works on floats and on numpy arrays of replicates."""
    if target_mean is None or strong_mean is None:
        return None
    below = np.maximum(0.0, bands.target_min - np.asarray(target_mean, dtype=float))
    above = np.maximum(0.0, np.asarray(target_mean, dtype=float) - bands.target_max)
    short = np.maximum(0.0, bands.strong_min - np.asarray(strong_mean, dtype=float))
    total = below + above + short
    return round(float(total), 4) if np.ndim(total) == 0 else total


def rl_readiness(stats: dict, bands: Bands) -> dict:
    target, strong = stats.get("target") or {}, stats.get("strong") or {}
    t_mean, s_mean = target.get("mean"), strong.get("mean")
    in_band = t_mean is not None and bands.target_min <= t_mean <= bands.target_max
    solvable = s_mean is not None and s_mean >= bands.strong_min
    learnable = target.get("disagree_share")
    return {
        "target_in_band": in_band,
        "strong_above_floor": solvable,
        "target_std": target.get("std"),
        "learnable_share": learnable,
        "distance": band_distance(t_mean, s_mean, bands),
        "ready": bool(in_band and solvable and (learnable or 0) >= bands.learnable_min),
    }


def error_rates(model_stats: dict) -> dict[str, float]:
    rollouts = model_stats.get("rollouts") or 0
    errors = model_stats.get("errors") or {}
    return {kind: (count / rollouts if rollouts else 0.0) for kind, count in errors.items()}


def comparable(entry: dict, stats: dict, offline: bool) -> bool:
    """Only evaluations of the same models can be compared."""
    if bool(entry.get("offline")) != bool(offline):
        return False
    old = entry.get("stats") or {}
    return all(
        (old.get(r) or {}).get("model") == (stats.get(r) or {}).get("model")
        and "per_task" in (old.get(r) or {})  # entries from before per-task tables cannot be paired
        for r in ("target", "strong")
    )


def decide(
    stats: dict,
    bands: Bands,
    kept: dict | None,
    *,
    eval_success: bool = True,
    error: str | None = None,
    gates_failed: list[str] | None = None,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """The verdict for an evaluation with `stats`, compared against the `kept` entry."""
    if not eval_success:
        return {"verdict": "crash", "reason": f"the evaluation failed: {error or 'see the report'}"}
    if gates_failed:
        return {"verdict": "discard", "reason": "failed gates: " + "; ".join(gates_failed)}
    for role in ("target", "strong"):
        rates = error_rates(stats.get(role) or {})
        if rates.get("env_error", 0) > bands.max_env_error_rate:
            return {"verdict": "discard", "reason": (
                f"{rates['env_error']:.0%} of {role} rollouts ended in environment errors "
                f"(allowed {bands.max_env_error_rate:.0%}): fix the candidate's errors first")}
        bad = rates.get("provider_error", 0) + rates.get("timeout", 0)
        if bad > bands.max_provider_error_rate:
            return {"verdict": "inconclusive", "reason": (
                f"{bad:.0%} of {role} rollouts failed at the provider or timed out "
                f"(allowed {bands.max_provider_error_rate:.0%}): too few scored rollouts to judge")}
    t, s = stats.get("target") or {}, stats.get("strong") or {}
    if t.get("mean") is None or s.get("mean") is None:
        return {"verdict": "discard", "reason": "no scored rollouts for one of the models"}
    distance = band_distance(t["mean"], s["mean"], bands)
    if kept is None:
        return {"verdict": "keep", "reason": (
            f"first successful evaluation with these models; target {mean_ci(t)}, strong {mean_ci(s)}, "
            f"distance to the wanted state {distance:.3f}")}
    return _compare(stats, kept, bands, confidence, seed) | {"compared_to": kept.get("commit")}


def _compare(stats: dict, kept: dict, bands: Bands, confidence: float, seed: int) -> dict:
    old = kept.get("stats") or {}
    tables = [stats["target"].get("per_task") or {}, stats["strong"].get("per_task") or {},
              old["target"].get("per_task") or {}, old["strong"].get("per_task") or {}]
    new_t, new_s, old_t, old_s = joint_draws(*tables, seed=seed)
    delta = band_distance(new_t, new_s, bands) - band_distance(old_t, old_s, bands)
    low, high = interval(delta, confidence, len(set().union(*tables)))
    d_new = band_distance(stats["target"]["mean"], stats["strong"]["mean"], bands)
    d_old = band_distance(old["target"]["mean"], old["strong"]["mean"], bands)
    short = kept.get("commit", "")[:8]
    summary = (f"distance to the wanted state {d_new:.3f} vs {d_old:.3f} at last kept {short} "
               f"(difference {d_new - d_old:+.3f}, {confidence:.0%} interval [{low:+.3f}, {high:+.3f}]); "
               f"target {mean_ci(stats['target'])} vs {mean_ci(old['target'])}")
    if high < 0:
        return {"verdict": "keep", "reason": "closer to the wanted state: " + summary}
    if low > 0:
        return {"verdict": "discard", "reason": "farther from the wanted state: " + summary}
    if d_new == 0 and d_old == 0:
        learn = _learnable_comparison(stats, old, confidence, seed)
        if learn is not None:
            return learn
    return {"verdict": "inconclusive", "reason": (
        f"the difference is inside the noise: {summary}. At this budget only changes in the target "
        f"mean beyond about {resolvable(stats['target'], old['target']):.2f} can be told apart; "
        "raise budget.examples to resolve smaller ones")}


def resolvable(new: dict, old: dict) -> float:
    """The smallest change in the target mean this budget can tell apart: the two means'
    interval half-widths combined (a paired difference can look sharper than that when
    the two runs happen to agree task by task, which says nothing about the budget)."""
    halves = [(m["ci"][1] - m["ci"][0]) / 2 for m in (new, old) if m.get("ci")]
    return float(np.sqrt(sum(h * h for h in halves))) if halves else float("nan")


def _learnable_comparison(stats: dict, old: dict, confidence: float, seed: int) -> dict | None:
    """Both in the wanted state: did the share of tasks with disagreeing rollouts change?"""
    def flags(table: dict) -> dict:
        # per_task rows are [sum, n, disagree]; as a table of [disagree, 1] its "mean" is the share
        return {k: [float(v[2]), 1] for k, v in table.items() if len(v) > 2 and v[1] >= 2}

    new_f, old_f = flags(stats["target"].get("per_task") or {}), flags(old["target"].get("per_task") or {})
    if not new_f or not old_f:
        return None
    new_r, old_r = joint_draws(new_f, old_f, seed=seed + 1)
    low, high = interval(new_r - old_r, confidence, len(set(new_f) | set(old_f)))
    detail = (f"both in the wanted state; learnable share {stats['target'].get('disagree_share')} vs "
              f"{old['target'].get('disagree_share')} ({confidence:.0%} interval of the difference "
              f"[{low:+.3f}, {high:+.3f}])")
    if low > 0:
        return {"verdict": "keep", "reason": "more tasks with a learning signal: " + detail}
    if high < 0:
        return {"verdict": "discard", "reason": "fewer tasks with a learning signal: " + detail}
    return None


