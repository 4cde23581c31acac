"""Difficulty in its natural order (declared, else easy < medium < hard, else as listed), and a GRPO
curriculum ordered by measurement only when the per-level differences are beyond noise."""

from __future__ import annotations

from types import SimpleNamespace

from autoenv.core.levels import natural_order
from autoenv.core.record import Budget, Entry, Group, ModelStats, Verdict
from autoenv.core.traces import Rollout
from autoenv.evaluation.stats import model_stats
from autoenv.export.grpo import level_order


def test_levels_are_never_alphabetical():
    assert natural_order(["easy", "hard", "medium"]) == ["easy", "medium", "hard"]
    assert natural_order(["Hard", "easy", "very hard", "trivial"]) == ["trivial", "easy", "Hard", "very hard"]
    assert natural_order(["b2", "a1", "c3"]) == ["b2", "a1", "c3"]  # unknown words: as listed
    assert natural_order(["hard", "easy", "x"], declared=["x", "hard", "easy"]) == ["x", "hard", "easy"]


def test_the_statistics_store_levels_in_natural_order():
    rollouts = [Rollout(trace_id="", task_key=f"t{i}", idx=i, outcome="ok", reward=1.0, difficulty=level)
                for i, level in enumerate(["hard", "easy", "medium", "easy"])]
    assert list(model_stats("m", rollouts, 1.0).by_difficulty) == ["easy", "medium", "hard"]


def kept(groups: dict[str, tuple[int, float]], per_task: int = 4) -> SimpleNamespace:
    target = ModelStats(model="t", rollouts=1, scored=1, mean=0.5, ci=None, std=None, solve_rate=None,
                        max_reward=None, normalized_mean=None, tasks=1, disagree_share=None,
                        by_difficulty={k: Group(n=n, mean=m) for k, (n, m) in groups.items()})
    budget = Budget(examples=40, rollouts_per_example=per_task, max_concurrent=8, rollout_timeout=60, max_turns=10,
                    seed=0)
    entry = Entry(commit="c" * 40, timestamp="t", eval_success=True, stats={"target": target},
                  verdict=Verdict(verdict="keep", reason="-"), budget=budget)
    return SimpleNamespace(entry=entry)


ROWS = [{"difficulty": level} for level in ("easy", "medium", "hard") * 5]


def test_a_noisy_measurement_keeps_the_natural_order_and_says_so():
    # 13 tasks over three levels, hard measured "easiest": within noise
    levels, how = level_order(kept({"easy": (16, 0.5), "medium": (16, 0.45), "hard": (20, 0.6)}), ROWS, 10)
    assert levels == ["easy", "medium", "hard"]
    assert how.startswith("natural order") and "within noise" in how and "hard 0.600 vs easy 0.500" in how


def test_a_clear_measurement_orders_the_curriculum():
    levels, how = level_order(kept({"easy": (80, 0.2), "medium": (80, 0.9), "hard": (80, 0.6)}), ROWS, 10)
    assert levels == ["medium", "hard", "easy"] and how.startswith("measured")
