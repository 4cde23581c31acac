"""autoenv/evaluation/stats.py (model_stats) and autoenv/core/resample.py, checked against values computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import groups, row, rows

from autoenv.core.config import Price
from autoenv.core.resample import DRAWS, joint_draws, mean_interval, task_id
from autoenv.core.traces import Rollout, to_rollout
from autoenv.evaluation.stats import model_stats


def ok(key: str, reward: float, *, components: dict | None = None, weights: dict | None = None,
       difficulty: str | None = None, category: str | None = None, tokens: tuple[int, int] = (0, 0),
       seconds: float = 0.0) -> Rollout:
    if components is None:
        components, weights = {"correct": reward}, {"correct": 1.0}
    return Rollout(trace_id="", task_key=key, idx=0, outcome="ok", reward=reward,
                   components=components, weights=weights or {}, difficulty=difficulty, category=category,
                   input_tokens=tokens[0], output_tokens=tokens[1], seconds=seconds)


def failed(key: str, outcome: str, *, tokens: tuple[int, int] = (0, 0), seconds: float = 0.0) -> Rollout:
    return Rollout(trace_id="", task_key=key, idx=0, outcome=outcome, reward=None, error="x",
                   difficulty="easy", category="c", input_tokens=tokens[0], output_tokens=tokens[1],
                   seconds=seconds)


def table(task_rewards: dict[str, list[float]]) -> list[Rollout]:
    return [ok(key, r) for key, rewards in task_rewards.items() for r in rewards]


# --- mean, std, solve rate, counts -----------------------------------------------------


def test_mean_std_and_counts_by_hand():
    s = model_stats("m", table({"a": [0.0, 0.5], "b": [1.0, 1.0]}), solve_threshold=1.0)
    assert (s.model, s.rollouts, s.scored, s.tasks) == ("m", 4, 4, 2)
    assert s.mean == 0.625  # 2.5 / 4
    # population std: deviations -.625, -.125, .375, .375 -> squares sum .6875 -> sqrt(.6875/4)
    assert s.std == round((0.6875 / 4) ** 0.5, 4) == 0.4146
    assert s.std != round(float(np.std([0, 0.5, 1, 1], ddof=1)), 4)  # not the sample std


@pytest.mark.parametrize("threshold, expected", [(0.5, 0.75), (1.0, 0.5), (0.0, 1.0), (1.01, 0.0)])
def test_solve_rate_against_threshold(threshold, expected):
    s = model_stats("m", table({"a": [0.0, 0.5], "b": [1.0, 1.0]}), solve_threshold=threshold)
    assert s.solve_rate == expected


def test_errors_by_kind_are_counted_and_excluded():
    rollouts = table({"a": [0.0, 1.0], "b": [1.0]}) + [
        failed("a", "provider_error"), failed("b", "provider_error"),
        failed("b", "timeout"), failed("c", "env_error"), failed("c", "env_error"), failed("c", "env_error"),
    ]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert s.errors.model_dump() == {"provider_error": 2, "timeout": 1, "env_error": 3}
    assert (s.rollouts, s.scored, s.tasks) == (9, 3, 3)
    assert s.mean == round(2 / 3, 4)  # errors are not zeros: 2/3, not 2/9
    assert s.std == round(float(np.std([0.0, 1.0, 1.0])), 4)
    assert s.solve_rate == round(2 / 3, 4)
    # a task whose rollouts all failed has no per-task row
    assert set(s.per_task) == {task_id("a"), task_id("b")}
    assert row(s.per_task[task_id("a")]) == [1.0, 2, 1]  # the error on a is not a scored rollout


def test_all_errors():
    rollouts = [failed("a", "timeout"), failed("a", "provider_error"), failed("b", "env_error")]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert (s.rollouts, s.scored, s.tasks) == (3, 0, 2)
    assert s.mean is None and s.std is None and s.solve_rate is None and s.ci is None
    assert s.normalized_mean is None and s.max_reward is None and s.disagree_share is None
    assert s.per_task == {}
    assert s.errors.model_dump() == {"provider_error": 1, "timeout": 1, "env_error": 1}


def test_one_task_one_rollout():
    s = model_stats("m", [ok("only", 0.75)], solve_threshold=1.0)
    assert s.mean == 0.75
    assert s.ci == (0.75, 0.75)
    assert s.std == 0.0
    assert s.disagree_share is None  # one rollout cannot disagree with itself
    assert rows(s.per_task) == {task_id("only"): [0.75, 1, 0]}


def test_one_task_ci_is_rounded_like_the_mean():
    s = model_stats("m", table({"only": [1.0, 0.0, 0.0]}), solve_threshold=1.0)
    assert s.mean == 0.3333
    assert s.ci[0] <= s.mean <= s.ci[1]
    assert s.ci == (0.3333, 0.3333)


def test_all_equal_rewards():
    s = model_stats("m", table({f"t{i}": [0.7, 0.7, 0.7] for i in range(5)}), solve_threshold=1.0)
    assert s.mean == 0.7
    assert s.std == 0.0
    assert s.ci == (0.7, 0.7)
    assert s.disagree_share == 0.0
    assert s.solve_rate == 0.0


# --- disagree share and per-task rows --------------------------------------------------


def test_disagree_share_counts_only_tasks_with_two_scored_rollouts():
    rollouts = table({
        "a": [1.0, 0.0],        # disagree
        "b": [0.5, 0.5, 0.5],   # agree
        "c": [0.2, 0.2, 0.3],   # disagree
        "d": [1.0, 1.0],        # agree
        "e": [0.0],             # one rollout: excluded
        "f": [1.0],             # one scored rollout + an error: excluded
    }) + [failed("f", "timeout")]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert s.disagree_share == 0.5  # 2 of the 4 tasks with >= 2 scored rollouts
    assert rows(s.per_task) == {
        task_id("a"): [1.0, 2, 1],
        task_id("b"): [1.5, 3, 0],
        task_id("c"): [0.7, 3, 1],
        task_id("d"): [2.0, 2, 0],
        task_id("e"): [0.0, 1, 0],
        task_id("f"): [1.0, 1, 0],
    }


def test_per_task_keys_are_task_ids_of_the_keys():
    long_key = "Solve: " + "x" * 500
    s = model_stats("m", [ok(long_key, 1.0), ok(long_key, 0.0), ok("k1", 0.25)], solve_threshold=1.0)
    assert set(s.per_task) == {task_id(long_key), task_id("k1")}
    assert all(len(k) == 12 for k in s.per_task)
    assert task_id("k1") == task_id("k1") != task_id("k2")
    assert row(s.per_task[task_id(long_key)]) == [1.0, 2, 1]
    assert row(s.per_task[task_id("k1")]) == [0.25, 1, 0]
    json.dumps(s.model_dump(mode="json"))  # stored in the ledger as is


# --- the confidence interval -----------------------------------------------------------


def alternating(n_tasks: int) -> list[Rollout]:
    """Tasks alternate between mean 0.25 (1 of 4 solved) and mean 0.75 (3 of 4)."""
    pattern = {0: [1.0, 0.0, 0.0, 0.0], 1: [1.0, 1.0, 1.0, 0.0]}
    return table({f"t{i:03d}": pattern[i % 2] for i in range(n_tasks)})


def test_ci_contains_the_mean_and_stays_within_task_means():
    s = model_stats("m", table({"a": [0.2], "b": [0.5, 0.5], "c": [0.8, 0.8, 0.8]}), solve_threshold=1.0)
    assert s.mean == round((0.2 + 1.0 + 2.4) / 6, 4)
    low, high = s.ci
    assert low <= s.mean <= high
    # three tasks stretch the bootstrap interval a lot; it is clamped to what a resample can give
    assert 0.2 <= low and high <= 0.8
    assert low < high


def test_ci_with_many_tasks_contains_the_mean():
    s = model_stats("m", alternating(40), solve_threshold=1.0)
    assert s.mean == 0.5
    low, high = s.ci
    assert 0.25 <= low < 0.5 < high <= 0.75


def test_ci_is_deterministic_for_a_seed():
    # varied task means, so that replicates take many values and percentiles depend on the draws
    rollouts = table({f"t{i}": [round(0.07 * i, 2), round(0.05 * i, 2)] for i in range(12)})
    a = model_stats("m", rollouts, solve_threshold=1.0, seed=7).ci
    b = model_stats("m", rollouts, solve_threshold=1.0, seed=7).ci
    assert a == b
    others = {tuple(model_stats("m", rollouts, solve_threshold=1.0, seed=s).ci) for s in range(5)}
    assert len(others) > 1  # the seed is actually used


def test_ci_narrows_as_tasks_are_added():
    small = model_stats("m", alternating(8), solve_threshold=1.0).ci
    large = model_stats("m", alternating(40), solve_threshold=1.0).ci
    assert small[1] - small[0] > large[1] - large[0]
    # roughly like 1/sqrt(n): 40 tasks should be well over 1.5 times narrower than 8
    assert (small[1] - small[0]) > 1.5 * (large[1] - large[0])


# --- max reward and the normalised mean ------------------------------------------------


def test_max_reward_is_sum_of_positive_weights():
    weights = {"correct": 1.0, "format": 0.5}
    rollouts = [
        ok("a", 1.0 * 1.0 + 0.5 * 1.0, components={"correct": 1.0, "format": 1.0}, weights=weights),
        ok("b", 0.0 * 1.0 + 0.5 * 1.0, components={"correct": 0.0, "format": 1.0}, weights=weights),
        ok("c", 1.0 * 1.0 + 0.5 * 0.0, components={"correct": 1.0, "format": 0.0}, weights=weights),
    ]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert s.max_reward == 1.5
    assert s.mean == 1.0  # (1.5 + 0.5 + 1.0) / 3
    assert s.normalized_mean == round(1.0 / 1.5, 4) == 0.6667
    assert s.components == {"correct": round(2 / 3, 4), "format": round(2 / 3, 4)}


def test_score_outside_unit_interval_gives_no_max_reward():
    rollouts = [
        ok("a", 1.0, components={"correct": 1.0}, weights={"correct": 1.0}),
        ok("b", 2.0, components={"correct": 2.0}, weights={"correct": 1.0}),
    ]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert s.max_reward is None
    assert s.normalized_mean is None
    assert s.mean == 1.5


def test_negative_weight_is_not_counted_in_max_reward():
    weights = {"correct": 1.0, "length_penalty": -0.5}
    rollouts = [
        ok("a", 1.0 - 0.5 * 0.4, components={"correct": 1.0, "length_penalty": 0.4}, weights=weights),
        ok("b", 0.0 - 0.5 * 0.0, components={"correct": 0.0, "length_penalty": 0.0}, weights=weights),
    ]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert s.max_reward == 1.0
    assert s.mean == 0.4
    assert s.normalized_mean == 0.4


# --- cost and timing -------------------------------------------------------------------


def priced_rollouts() -> list[Rollout]:
    return [
        ok("a", 1.0, tokens=(1000, 200)),
        ok("b", 0.0, tokens=(300, 50)),
        failed("c", "provider_error", tokens=(200, 0)),  # a failed call still costs
    ]


def test_cost_by_hand():
    s = model_stats("m", priced_rollouts(), solve_threshold=1.0, price=Price(input=2.0, output=8.0))
    assert (s.input_tokens, s.output_tokens) == (1500, 250)
    assert s.cost_usd == pytest.approx((1500 * 2.0 + 250 * 8.0) / 1e6) == pytest.approx(0.005)


def test_cost_output_only_price():
    s = model_stats("m", priced_rollouts(), solve_threshold=1.0, price=Price(input=0.0, output=8.0))
    assert s.cost_usd == pytest.approx(250 * 8.0 / 1e6)


@pytest.mark.parametrize("price", [None, Price(), Price(input=0.0, output=0.0)])
def test_no_cost_without_a_price(price):
    s = model_stats("m", priced_rollouts(), solve_threshold=1.0, price=price)
    assert s.cost_usd is None
    assert (s.input_tokens, s.output_tokens) == (1500, 250)


def test_mean_and_p90_seconds():
    rollouts = [ok(f"t{i}", 1.0, seconds=s) for i, s in enumerate([1.0, 2.0, 3.0, 4.0, 10.0, 0.0])]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert s.mean_seconds == 4.0  # the 0.0 (no timing) is left out: 20 / 5, not 20 / 6
    # numpy's linear percentile: position 0.9 * 4 = 3.6 between 4.0 and 10.0
    assert s.p90_seconds == pytest.approx(4.0 + 0.6 * 6.0) == 7.6
    assert s.p90_seconds == round(float(np.percentile([1, 2, 3, 4, 10], 90)), 3)


def test_no_timing_gives_none():
    s = model_stats("m", [ok("a", 1.0)], solve_threshold=1.0)
    assert s.mean_seconds is None and s.p90_seconds is None


# --- groups ----------------------------------------------------------------------------


def test_by_difficulty_and_category():
    rollouts = [
        ok("a", 1.0, difficulty="easy", category="algebra"),
        ok("a", 0.5, difficulty="easy", category="algebra"),
        ok("b", 0.0, difficulty="hard", category="algebra"),
        ok("c", 0.25, difficulty="hard", category="geometry"),
        ok("d", 1.0),  # unlabelled
        failed("e", "env_error"),  # labelled easy/c but not scored
    ]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert groups(s.by_difficulty) == {"easy": {"n": 2, "mean": 0.75}, "hard": {"n": 2, "mean": 0.125}}
    assert groups(s.by_category) == {"algebra": {"n": 3, "mean": 0.5}, "geometry": {"n": 1, "mean": 0.25}}
    assert list(s.by_difficulty) == ["easy", "hard"]


# --- NaN rewards through the trace reader ----------------------------------------------


def trace(key: str, score) -> dict:
    return {
        "id": f"trace-{key}-{score}",
        "task": {"key": key, "data": {"idx": 0}},
        "agent": {"trainable": True},
        "rewards": {"correct": {"score": score, "weight": 1.0}},
        "nodes": [{"message": {"role": "user", "content": "q"}}, {"message": {"role": "assistant", "content": "a"}}],
        "calls": [{"usage": {"prompt_tokens": 10, "completion_tokens": 5}}],
        "stop_condition": "completed",
        "is_timeout": False,
        "errors": [],
        "timing": {"agent": {"start": 0.0, "end": 1.0}},
    }


def test_nan_reward_is_an_env_error_not_a_score():
    rollouts = [to_rollout(trace("a", 1.0)), to_rollout(trace("a", float("nan"))), to_rollout(trace("b", 0.0))]
    assert [r.outcome for r in rollouts] == ["ok", "env_error", "ok"]
    s = model_stats("m", rollouts, solve_threshold=1.0)
    assert s.mean == 0.5
    assert s.scored == 2 and s.rollouts == 3
    assert s.errors.env_error == 1
    assert not np.isnan(s.std) and s.ci is not None and not any(np.isnan(s.ci))
    assert row(s.per_task[task_id("a")]) == [1.0, 1, 0]


# --- resample.py -----------------------------------------------------------------------


def test_mean_interval_empty():
    assert mean_interval({}) is None


def test_mean_interval_single_task():
    assert mean_interval({"x": [3.0, 4, 1]}) == (0.75, 0.75)


def test_mean_interval_is_rollout_weighted():
    # task a: 4 rollouts mean 1.0; task b: 1 rollout mean 0.0 -> pooled mean 0.8
    low, high = mean_interval({"a": [4.0, 4, 0], "b": [0.0, 1, 0]})
    assert 0.0 <= low <= 0.8 <= high <= 1.0


def test_joint_draws_identical_tables_pair_exactly():
    rng = np.random.default_rng(1)
    per_task = {task_id(f"t{i}"): [float(k), 4, int(0 < k < 4)] for i, k in enumerate(rng.integers(0, 5, 30))}
    a, b = joint_draws(per_task, dict(per_task), seed=3)
    assert a.shape == b.shape == (DRAWS,)
    assert np.all(a - b == 0)
    assert np.ptp(a) > 0  # the replicates themselves vary


def test_joint_draws_disjoint_keys_are_not_paired():
    pattern = [4.0, 0.0, 2.0, 1.0, 3.0] * 4
    left = {f"L{i:02d}": [k, 4] for i, k in enumerate(pattern)}
    right = {f"R{i:02d}": [k, 4] for i, k in enumerate(pattern)}
    a, b = joint_draws(left, right, seed=0)
    diff = a - b
    assert not np.all(diff == diff[0])
    # the same tables paired on shared keys cancel exactly
    a2, b2 = joint_draws(left, {k: list(v) for k, v in left.items()}, seed=0)
    assert np.all(a2 == b2)


def test_joint_draws_empty():
    out = joint_draws({}, {})
    assert len(out) == 2 and all(np.isnan(x).all() for x in out)
