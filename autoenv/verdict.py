"""The keep/discard verdict, against the last *kept* iteration, on distance to the wanted state.

Provisional rule (statistics with uncertainty come later): the distance is how far the
target mean sits outside its band plus how far the strong mean sits below its floor.
The first successful evaluation is kept; a failed one is a crash; otherwise an
iteration is kept when it is closer to the wanted state than the last kept one.
"""

from __future__ import annotations

from autoenv.config import Bands


def band_distance(target_mean: float | None, strong_mean: float | None, bands: Bands) -> float | None:
    if target_mean is None or strong_mean is None:
        return None
    below = max(0.0, bands.target_min - target_mean)
    above = max(0.0, target_mean - bands.target_max)
    return round(below + above + max(0.0, bands.strong_min - strong_mean), 4)


def rl_readiness(stats: dict, bands: Bands) -> dict:
    target, strong = stats.get("target") or {}, stats.get("strong") or {}
    t_mean, s_mean = target.get("mean"), strong.get("mean")
    in_band = t_mean is not None and bands.target_min <= t_mean <= bands.target_max
    solvable = s_mean is not None and s_mean >= bands.strong_min
    return {
        "target_in_band": in_band,
        "strong_above_floor": solvable,
        "target_std": target.get("std"),
        "learnable_share": target.get("disagree_share"),
        "distance": band_distance(t_mean, s_mean, bands),
        "ready": bool(in_band and solvable and (target.get("disagree_share") or 0) > 0),
    }


def decide(eval_success: bool, readiness: dict, kept: dict | None, error: str | None = None) -> dict:
    if not eval_success:
        return {"verdict": "crash", "provisional": True,
                "reason": f"the evaluation failed: {error or 'see the report'}"}
    distance = readiness.get("distance")
    if kept is None:
        return {"verdict": "keep", "provisional": True,
                "reason": f"first successful evaluation (distance to the wanted state {distance})"}
    previous = (kept.get("rl_readiness") or {}).get("distance")
    short = kept.get("commit", "")[:8]
    if distance is None:
        return {"verdict": "discard", "provisional": True, "compared_to": kept.get("commit"),
                "reason": "no scored rollouts for one of the models"}
    if previous is None or distance < previous:
        return {"verdict": "keep", "provisional": True, "compared_to": kept.get("commit"),
                "reason": f"distance to the wanted state {distance} < {previous} at last kept {short}"}
    return {"verdict": "discard", "provisional": True, "compared_to": kept.get("commit"),
            "reason": f"distance to the wanted state {distance} is not below {previous} at last kept {short}"}
