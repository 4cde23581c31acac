"""How often does a verdict rule decide when nothing changed, and how often is it right?

Simulates environments with realistic task heterogeneity — each task's success
probability drawn from a Beta distribution around the model's mean — and evaluates them
with the harness's own statistics and verdict code (autoenv.evaluation.stats.model_stats,
autoenv.evaluation.verdict.decide), side by side with the seed's rule (keep when the target mean
rose by more than 0.01 over the previous line, discard when it fell by more than 0.01).

(a) A/A: the same environment evaluated twice (same tasks, fresh rollouts). Any keep or
    discard is a false decision.
(b) power: the target mean moves 0.15 toward the wanted band (from below: 0.05 -> 0.20,
    from above: 0.85 -> 0.70). Keep is right.
(c) the same two, "changed tasks": the agent changed the dataset (new prompts, so no task key
    is shared), so the new evaluation runs on a fresh draw of tasks from a pool with the
    after-mean and the verdict compares the two unpaired. A/A: same pool distribution.

Usage: .venv/bin/python bench/verdict.py [--trials 300]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from autoenv.core.config import Bands, Stats, Verdict
from autoenv.core.record import Entry, ModelStats
from autoenv.core.record import Verdict as Decision
from autoenv.core.traces import Rollout
from autoenv.evaluation.stats import model_stats
from autoenv.evaluation.verdict import decide

POOL = 1000
CONCENTRATION = 2.0  # Beta(k*mu, k*(1-mu)): small k = tasks differ a lot in difficulty
STRONG_MEAN = 0.85
BANDS = Bands()


def task_rates(rng, mean: float) -> np.ndarray:
    return rng.beta(CONCENTRATION * mean, CONCENTRATION * (1 - mean), size=POOL)


def shift(rates: np.ndarray, target_mean: float) -> np.ndarray:
    """Move every task by one logit offset so the pool's mean becomes `target_mean`."""
    logits = np.log(np.clip(rates, 1e-6, 1 - 1e-6) / (1 - np.clip(rates, 1e-6, 1 - 1e-6)))
    low, high = -20.0, 20.0
    for _ in range(60):
        mid = (low + high) / 2
        if (1 / (1 + np.exp(-(logits + mid)))).mean() < target_mean:
            low = mid
        else:
            high = mid
    return 1 / (1 + np.exp(-(logits + (low + high) / 2)))


def evaluate(rng, rates: np.ndarray, tasks: np.ndarray, rollouts: int, model: str, prefix: str = "t") -> ModelStats:
    records = [
        Rollout(trace_id="", task_key=f"{prefix}{t}", idx=int(t), outcome="ok", reward=float(rng.random() < rates[t]),
                components={"correct": 0.0})
        for t in tasks for _ in range(rollouts)
    ]
    return model_stats(model, records, solve_threshold=1.0)


def run_pair(rng, before: tuple, after: tuple, examples: int, rollouts: int, confidence: float,
             changed: bool = False) -> tuple[str, str]:
    tasks = rng.choice(POOL, size=examples, replace=False)  # the harness's seeded sample, same both times
    prefix = "n" if changed else "t"  # a changed dataset: other prompts, so other task keys
    old = {"target": evaluate(rng, before[0], tasks, rollouts, "t"), "strong": evaluate(rng, before[1], tasks, rollouts, "s")}
    new = {"target": evaluate(rng, after[0], tasks, rollouts, "t", prefix),
           "strong": evaluate(rng, after[1], tasks, rollouts, "s", prefix)}
    kept = Entry(commit="kept", timestamp="-", eval_success=True, stats=old, verdict=Decision(verdict="keep", reason="-"))
    ours = decide(new, BANDS, kept, confidence=confidence, seed=int(rng.integers(1 << 30)),
                  min_tasks=Stats().min_tasks).verdict
    delta = new["target"].mean - old["target"].mean
    seed_rule = "keep" if delta > 0.01 else "discard" if delta < -0.01 else "inconclusive"
    return ours, seed_rule


def seed_budget_pair(rng, before, after) -> str:
    """The seed's own budget: 20 rollouts (the first 5 tasks, 4 rollouts each)."""
    tasks = np.arange(5)
    old = np.mean([rng.random() < before[0][t] for t in tasks for _ in range(4)])
    new = np.mean([rng.random() < after[0][t] for t in tasks for _ in range(4)])
    return "keep" if new - old > 0.01 else "discard" if new - old < -0.01 else "inconclusive"


def rates_of(outcomes: list[str]) -> dict[str, float]:
    return {v: outcomes.count(v) / len(outcomes) for v in ("keep", "discard", "inconclusive")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--budgets", default="24x4,32x4,40x4,48x4")
    parser.add_argument("--confidence", type=float, default=Verdict().confidence)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    budgets = [tuple(int(x) for x in b.split("x")) for b in args.budgets.split(",")]
    scenarios = {
        "A/A target 0.10 (below band)": (0.10, 0.10),
        "A/A target 0.45 (in band)": (0.45, 0.45),
        "A/A target 0.85 (above band)": (0.85, 0.85),
        "power 0.05 -> 0.20 (toward band)": (0.05, 0.20),
        "power 0.85 -> 0.70 (toward band)": (0.85, 0.70),
        "A/A changed tasks, target 0.10": (0.10, 0.10),
        "A/A changed tasks, target 0.45": (0.45, 0.45),
        "A/A changed tasks, target 0.85": (0.85, 0.85),
        "power changed tasks 0.05 -> 0.20": (0.05, 0.20),
        "power changed tasks 0.85 -> 0.70": (0.85, 0.70),
    }
    print(f"confidence {args.confidence}; {args.trials} trials per cell; false = keep or discard under A/A; right = keep under power")
    print(f"{'scenario':<36} {'budget':>7} {'ours: false/right':>18} {'seed rule, same budget':>23} {'seed rule, 20 rollouts':>23}")
    summary: dict[tuple, dict] = {}
    for name, (mu_before, mu_after) in scenarios.items():
        for examples, rollouts in budgets:
            ours, seed_same, seed_own = [], [], []
            for _ in range(args.trials):
                base = task_rates(rng, mu_before)
                strong = task_rates(rng, STRONG_MEAN)
                redrawn = "changed" in name
                if redrawn:  # the new dataset: its own tasks, drawn around the after-mean
                    after, strong_after = task_rates(rng, mu_after), task_rates(rng, STRONG_MEAN)
                else:
                    after, strong_after = (base if mu_after == mu_before else shift(base, mu_after)), strong
                o, s = run_pair(rng, (base, strong), (after, strong_after), examples, rollouts, args.confidence,
                                changed=redrawn)
                ours.append(o)
                seed_same.append(s)
                seed_own.append(seed_budget_pair(rng, (base, strong), (after, strong)))
            aa = name.startswith("A/A")
            pick = (lambda r: r["keep"] + r["discard"]) if aa else (lambda r: r["keep"])
            cells = [pick(rates_of(x)) for x in (ours, seed_same, seed_own)]
            summary[(name, examples, rollouts)] = {"ours": cells[0], "seed": cells[1]}
            print(f"{name:<36} {examples:>4}x{rollouts:<2} {cells[0]:>18.1%} {cells[1]:>23.1%} {cells[2]:>23.1%}")
    print()
    print("budget  worst A/A false (ours)  worst power (ours)  meets A/A <= 5% and power >= 80%"
          "   changed tasks: worst A/A false, worst power")
    for examples, rollouts in budgets:
        aa = max(v["ours"] for (n, e, r), v in summary.items() if (e, r) == (examples, rollouts) and n.startswith("A/A")
                 and "changed" not in n)
        power = min(v["ours"] for (n, e, r), v in summary.items() if (e, r) == (examples, rollouts)
                    and n.startswith("power") and "changed" not in n)
        aa_c = max(v["ours"] for (n, e, r), v in summary.items() if (e, r) == (examples, rollouts) and n.startswith("A/A")
                   and "changed" in n)
        power_c = min(v["ours"] for (n, e, r), v in summary.items() if (e, r) == (examples, rollouts)
                      and n.startswith("power") and "changed" in n)
        ok = aa <= 0.05 + 1.96 * math.sqrt(0.05 * 0.95 / args.trials) and power >= 0.80
        print(f"{examples:>3}x{rollouts:<3} {aa:>22.1%} {power:>19.1%}  {'yes' if ok else 'no':<52} {aa_c:>6.1%} {power_c:>6.1%}")


if __name__ == "__main__":
    main()
