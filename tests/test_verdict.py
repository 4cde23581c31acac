"""autoenv/evaluation/verdict.py: baseline / keep / discard / inconclusive / crash, on deterministic per-task results.

Every evaluation is built from per-task success counts (task i: k_i of r rollouts reward 1,
the rest 0) through the real model_stats, so the means, disagree shares and per-task
tables that decide() reads are exactly the ones the harness would store.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from autoenv.core.config import Bands
from autoenv.core.record import CandidateInfo, Entry, ModelStats, Verdict
from autoenv.core.traces import Rollout
from autoenv.endpoint.reference import reference_missing
from autoenv.evaluation.stats import model_stats
from autoenv.evaluation.verdict import band_distance, baseline_of, comparable, decide, error_rates, rl_readiness
from autoenv.run.ledger import last_kept
from autoenv.run.runbase import same_run

BANDS = Bands()
R = 4  # rollouts per task
N = 40  # tasks


def rollouts(successes: list[int], r: int = R, errors: dict[str, int] | None = None,
             prefix: str = "task") -> list[Rollout]:
    out = [
        Rollout(trace_id="", task_key=f"{prefix}-{i:03d}", idx=i, outcome="ok", reward=float(j < k),
                components={"correct": float(j < k)}, weights={"correct": 1.0})
        for i, k in enumerate(successes) for j in range(r)
    ]
    for kind, count in (errors or {}).items():
        out += [Rollout(trace_id="", task_key=f"{prefix}-{j % len(successes):03d}", idx=j, outcome=kind,
                        reward=None, error="boom") for j in range(count)]
    return out


def stats(target: list[int], strong: list[int] | None = None, *, target_errors=None, strong_errors=None,
          target_model: str = "small-model", strong_model: str = "big-model", prefix: str = "task") -> dict:
    strong = [R] * len(target) if strong is None else strong
    return {
        "target": model_stats(target_model, rollouts(target, errors=target_errors, prefix=prefix), 1.0),
        "strong": model_stats(strong_model, rollouts(strong, errors=strong_errors, prefix=prefix), 1.0),
    }


def entry(commit: str, s: dict, verdict: str = "keep", offline: bool = False,
          branch: str | None = "autoenv/a") -> Entry:
    """A ledger entry as autoenv.evaluation.recording.record writes it (the fields decide/comparable read)."""
    return Entry(commit=commit, timestamp="2026-01-01T00:00:00+00:00", eval_success=True, stats=s,
                 verdict=Verdict(verdict=verdict, reason="-"), offline=offline, branch=branch)


def counts(mean: float, n: int = N, r: int = R) -> list[int]:
    """Per-task successes spread as evenly as possible so that sum/(n*r) == mean exactly."""
    total = round(mean * n * r)
    assert total == mean * n * r
    base, extra = divmod(total, n)
    return [base + (i < extra) for i in range(n)]


def resolvable(reason: str) -> float:
    match = re.search(r"beyond about (\d+\.\d+) can be told apart", reason)
    assert match, reason
    return float(match.group(1))


# --- helpers used by the tests behave as intended --------------------------------------


def test_fixture_means_are_exact():
    s = stats(counts(0.45), counts(0.95))
    assert s["target"].mean == 0.45 and s["strong"].mean == 0.95
    assert s["target"].scored == N * R
    assert len(s["target"].per_task) == N


# --- crash, first, gates, errors -------------------------------------------------------


def test_crash():
    v = decide({}, BANDS, None, eval_success=False, error="worker died: SIGKILL")
    assert v.verdict == "crash"
    assert "worker died: SIGKILL" in v.reason


def test_crash_wins_over_everything():
    kept = entry("a" * 40, stats(counts(0.45)))
    v = decide(stats(counts(0.45)), BANDS, kept, eval_success=False, error="load failed",
               gates_failed=["probe empty scored 0.9"])
    assert v.verdict == "crash" and "load failed" in v.reason


def test_unavailable_provider_is_inconclusive_never_a_crash():
    v = decide({}, BANDS, None, eval_success=False, provider_unavailable=True,
               error="provider unavailable: the smoke rollout failed at the provider 3 time(s) in a row")
    assert v.verdict == "inconclusive" and v.reason.startswith("provider unavailable: the smoke rollout")


def test_first_evaluation_is_the_baseline_and_says_where_it_stands():
    v = decide(stats(counts(0.05)), BANDS, None, run="autoenv/a")
    assert v.verdict == "baseline" and v.compared_to is None
    assert v.reason.startswith("first evaluation of the run autoenv/a with target small-model and strong big-model")
    assert "0.150 below its band 0.2–0.7" in v.reason and "at or above its floor 0.7" in v.reason
    assert "distance to the wanted state 0.150" in v.reason
    high = decide(stats(counts(0.95), counts(0.5)), BANDS, None, run="autoenv/a").reason
    assert "0.250 above its band" in high and "0.200 below its floor 0.7" in high and "0.450" in high
    assert decide(stats(counts(0.45)), BANDS, None, run="autoenv/a").reason.endswith(": in the wanted state")


def test_a_first_evaluation_on_a_detached_head_says_it_belongs_to_no_run():
    v = decide(stats(counts(0.45)), BANDS, None, run=None)
    assert v.verdict == "baseline" and "detached HEAD, which belongs to no run" in v.reason


def test_a_first_evaluation_is_discarded_when_a_gate_failed_or_errors_abound():
    assert decide(stats(counts(0.45)), BANDS, None, gates_failed=["oracle: low"]).verdict == "discard"
    assert decide(stats(counts(0.45), target_errors={"env_error": 20}), BANDS, None).verdict == "discard"


def test_no_reference_is_inconclusive_first_or_not():
    why = "the candidate's task has no oracle hook"
    zero = stats([0] * N, [0] * N, target_model="noisy-oracle:0.45", strong_model="oracle")
    for kept in (None, entry("k" * 40, stats(counts(0.45)))):
        v = decide(zero, BANDS, kept, no_reference=why, run="autoenv/a")
        assert v.verdict == "inconclusive" and v.reason.startswith(why)
        assert "def oracle(self, messages)" in v.reason and v.compared_to is None
    assert decide(zero, BANDS, None, no_reference=why, gates_failed=["probe echo: 0.9"]).verdict == "discard"


def test_reference_missing_only_offline_without_a_hook_for_oracle_players():
    zero = stats([0] * N, [0] * N, target_model="noisy-oracle:0.45", strong_model="oracle")
    no_hook, hook, unknown = CandidateInfo(oracle_hook=False), CandidateInfo(oracle_hook=True), CandidateInfo()
    why = reference_missing(zero, no_hook, offline=True)
    assert why is not None and "no oracle hook" in why
    assert "target noisy-oracle:0.45" in why and "strong oracle" in why
    assert reference_missing(zero, no_hook, offline=False) is None  # real models need no hook
    assert reference_missing(zero, hook, offline=True) is None
    assert reference_missing(zero, unknown, offline=True) is None
    scripted = stats([0] * N, target_model="empty", strong_model="echo")  # policies that need no oracle
    assert reference_missing(scripted, no_hook, offline=True) is None


def test_failed_gates_discard_even_perfect_numbers():
    perfect = stats(counts(0.45), counts(1.0))
    kept = entry("a" * 40, stats(counts(0.05)))
    for k in (None, kept):
        v = decide(perfect, BANDS, k, gates_failed=["probe empty scored 0.9", "check reward_range failed"])
        assert v.verdict == "discard"
        assert "probe empty scored 0.9" in v.reason and "check reward_range failed" in v.reason


def test_env_errors_above_limit_discard():
    # 9 env errors next to 160 scored rollouts: 9/169 = 5.3% > 5%
    s = stats(counts(0.45), target_errors={"env_error": 9})
    assert error_rates(s["target"])["env_error"] == pytest.approx(9 / 169)
    v = decide(s, BANDS, None)
    assert v.verdict == "discard"
    assert "environment errors" in v.reason and "target" in v.reason


def test_env_errors_of_the_strong_model_count_too():
    v = decide(stats(counts(0.45), strong_errors={"env_error": 20}), BANDS, None)
    assert v.verdict == "discard" and "strong" in v.reason


def test_env_errors_at_the_limit_are_allowed():
    # 8 of 160 rollouts = exactly 5%: not above the limit
    s = stats(counts(0.5, n=38), target_errors={"env_error": 8})
    assert s["target"].rollouts == 160
    assert error_rates(s["target"])["env_error"] == 0.05
    assert decide(s, BANDS, None).verdict == "baseline"


def test_provider_errors_and_timeouts_add_up_to_inconclusive():
    # each alone is below 20% of the rollouts; together (45/205 = 22%) above
    s = stats(counts(0.45), target_errors={"provider_error": 20, "timeout": 25})
    rates = error_rates(s["target"])
    assert rates["provider_error"] < 0.2 and rates["timeout"] < 0.2
    v = decide(s, BANDS, entry("a" * 40, stats(counts(0.05))))
    assert v.verdict == "inconclusive"
    assert "provider" in v.reason


def test_provider_errors_below_limit_still_judged():
    s = stats(counts(0.45), target_errors={"provider_error": 10})
    assert decide(s, BANDS, None).verdict == "baseline"


def test_no_scored_rollouts_discard():
    s = stats(counts(0.45))
    s["strong"] = model_stats("big-model", [], 1.0)
    assert decide(s, BANDS, None).verdict == "discard"


# --- moves relative to the band --------------------------------------------------------


def test_band_entry_is_kept():
    old = stats(counts(0.05))
    new = stats(counts(0.45))
    kept = entry("k" * 40, old)
    v = decide(new, BANDS, kept)
    assert v.verdict == "keep", v.reason
    assert v.compared_to == "k" * 40
    assert "closer" in v.reason


def test_band_exit_is_discarded():
    v = decide(stats(counts(0.95)), BANDS, entry("k" * 40, stats(counts(0.45))))
    assert v.verdict == "discard", v.reason
    assert "farther" in v.reason


def test_moving_down_toward_the_band_is_kept():
    # the seed's rule (keep only if the target mean rose) would have discarded this
    v = decide(stats(counts(0.55)), BANDS, entry("k" * 40, stats(counts(0.95))))
    assert v.verdict == "keep", v.reason


def test_rising_out_of_the_band_is_not_rewarded():
    # the seed's rule (keep if the target mean rose) would have kept this
    v = decide(stats(counts(0.95)), BANDS, entry("k" * 40, stats(counts(0.5))))
    assert v.verdict == "discard", v.reason


def test_overshooting_through_the_band_is_not_progress():
    # 0.05 (0.15 below the band) -> 0.95 (0.25 above): the mean rose a lot, the distance grew
    v = decide(stats(counts(0.95)), BANDS, entry("k" * 40, stats(counts(0.05))))
    assert v.verdict == "discard", v.reason


def test_strong_model_regression_is_discarded():
    old = stats(counts(0.45), counts(1.0))
    new = stats(counts(0.45), counts(0.3))
    v = decide(new, BANDS, entry("k" * 40, old))
    assert v.verdict == "discard", v.reason


def test_strong_model_recovering_is_kept():
    v = decide(stats(counts(0.45), counts(1.0)), BANDS, entry("k" * 40, stats(counts(0.45), counts(0.3))))
    assert v.verdict == "keep", v.reason


# --- noise -----------------------------------------------------------------------------


def test_one_more_success_is_noise():
    # below the band: 16/160 = 0.10 -> 17/160 = 0.10625, a distance change of 0.006
    old = counts(0.1)
    new = list(old)
    new[-1] += 1
    v = decide(stats(new), BANDS, entry("k" * 40, stats(old)))
    assert v.verdict == "inconclusive", v.reason
    assert "can be told apart" in v.reason
    size = resolvable(v.reason)
    assert 0.00625 < size < 0.2


def test_same_evaluation_twice_is_inconclusive():
    s = stats(counts(0.1))
    v = decide(s, BANDS, entry("k" * 40, s))
    assert v.verdict == "inconclusive", v.reason


def test_one_more_success_in_the_band_is_noise():
    old = counts(0.45)
    new = list(old)
    new[0] += 1
    v = decide(stats(new), BANDS, entry("k" * 40, stats(old)))
    assert v.verdict == "inconclusive", v.reason


def _one_more_success_in_band():
    old = counts(0.45)
    new = list(old)
    new[0] += 1
    return stats(new), stats(old)


def _identical_below_band():
    s = stats([4, 0, 0, 0, 0, 0, 0, 0, 0, 0] * 4)
    return s, s


@pytest.mark.parametrize("pair", [_one_more_success_in_band, _identical_below_band])
def test_inconclusive_reason_never_claims_zero_resolution(pair):
    new, old = pair()
    v = decide(new, BANDS, entry("k" * 40, old))
    assert v.verdict == "inconclusive"
    assert resolvable(v.reason) > 0


def test_larger_budget_resolves_smaller_changes():
    # below the band, same mean 0.1, but the solved task moved: per-task differences have a spread
    old, new = [4, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 4]
    small = decide(stats(new), BANDS, entry("k" * 40, stats(old)))
    large = decide(stats(new * 8), BANDS, entry("k" * 40, stats(old * 8)))
    assert small.verdict == large.verdict == "inconclusive"
    assert resolvable(large.reason) < resolvable(small.reason)


# --- which entry is compared against ---------------------------------------------------


def test_compared_against_last_kept_after_a_discard():
    a = entry("a" * 40, stats(counts(0.05)), verdict="keep")
    b = entry("b" * 40, stats(counts(0.95)), verdict="discard")
    entries = [a, b]
    kept = last_kept(entries)
    assert kept is a
    v = decide(stats(counts(0.45)), BANDS, kept)
    assert v.compared_to == "a" * 40
    assert v.verdict == "keep"
    assert "aaaaaaaa" in v.reason


def test_inconclusive_and_crash_entries_are_skipped():
    a = entry("a" * 40, stats(counts(0.05)))
    entries = [a, entry("b" * 40, stats(counts(0.45)), verdict="inconclusive"),
               Entry(commit="c" * 40, timestamp="-", eval_success=False, verdict=Verdict(verdict="crash", reason="-"))]
    assert last_kept(entries) is a
    assert last_kept([]) is None


def test_the_reason_names_the_baselines_branch_and_commit():
    v = decide(stats(counts(0.45)), BANDS, entry("a" * 40, stats(counts(0.05)), verdict="baseline"))
    assert "at the run's baseline aaaaaaaa on autoenv/a" in v.reason and v.verdict == "keep"
    v = decide(stats(counts(0.45)), BANDS, entry("b" * 40, stats(counts(0.05))))
    assert "at last kept bbbbbbbb on autoenv/a" in v.reason


def test_a_baseline_entry_is_kept_and_compared_with():
    base = entry("a" * 40, stats(counts(0.05)), verdict="baseline")
    assert base.kept and last_kept([base, entry("b" * 40, stats(counts(0.9)), verdict="discard")]) is base


def test_same_run_is_the_branch_and_a_detached_head_is_no_run():
    assert same_run(entry("a" * 40, {}, branch="autoenv/a"), "autoenv/a")
    assert not same_run(entry("a" * 40, {}, branch="autoenv/b"), "autoenv/a")
    assert not same_run(entry("a" * 40, {}, branch=None), None)


def test_baseline_of_never_crosses_runs():
    current = stats(counts(0.45))
    mine = entry("a" * 40, stats(counts(0.05)), branch="autoenv/a")
    theirs = entry("b" * 40, stats(counts(0.05)), branch="autoenv/b")  # newer, same models, same mode
    detached = entry("c" * 40, stats(counts(0.05)), branch=None)
    entries = [mine, theirs, detached]
    assert baseline_of(entries, current, branch="autoenv/a", offline=False) is mine
    assert baseline_of(entries, current, branch="autoenv/b", offline=False) is theirs
    assert baseline_of(entries, current, branch="autoenv/c", offline=False) is None
    assert baseline_of(entries, current, branch=None, offline=False) is None
    assert baseline_of(entries, current, branch="autoenv/a", offline=True) is None  # other mode


def test_comparable_offline_flag_and_models():
    current = stats(counts(0.45))
    online = entry("a" * 40, stats(counts(0.05)))
    offline = entry("b" * 40, stats(counts(0.05)), offline=True)
    other_target = entry("c" * 40, stats(counts(0.05), target_model="other-small"))
    other_strong = entry("d" * 40, stats(counts(0.05), strong_model="other-big"))
    assert comparable(online, current, offline=False)
    assert not comparable(offline, current, offline=False)
    assert comparable(offline, current, offline=True)
    assert not comparable(online, current, offline=True)
    assert not comparable(other_target, current, offline=False)
    assert not comparable(other_strong, current, offline=False)


def test_last_kept_skips_incomparable_entries():
    current = stats(counts(0.45))
    a = entry("a" * 40, stats(counts(0.05)))
    entries = [
        a,
        entry("b" * 40, stats(counts(0.95)), offline=True),
        entry("c" * 40, stats(counts(0.95), target_model="other-small")),
        entry("d" * 40, stats(counts(0.95), strong_model="other-big")),
        entry("e" * 40, stats(counts(0.95)), verdict="discard"),
    ]
    assert last_kept(entries) is entries[3]  # without a filter: the newest keep
    kept = last_kept(entries, accept=lambda e: comparable(e, current, False))
    assert kept is a
    assert decide(current, BANDS, kept).compared_to == "a" * 40
    assert last_kept(entries[1:], accept=lambda e: comparable(e, current, False)) is None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_kept_entry_without_per_task_does_not_stall_the_loop():
    legacy = {role: m.model_copy(update={"per_task": None}) for role, m in stats(counts(0.05)).items()}
    entries = [entry("a" * 40, legacy)]
    current = stats(counts(0.45))
    kept = last_kept(entries, accept=lambda e: comparable(e, current, False))
    v = decide(current, BANDS, kept)
    assert "nan" not in v.reason
    assert v.verdict == "baseline", v.reason


# --- both in the wanted state: the learning signal -------------------------------------


def all_or_nothing() -> list[int]:
    return [R, 0] * (N // 2)  # mean 0.5, no task's rollouts disagree


def all_halves() -> list[int]:
    return [R // 2] * N  # mean 0.5, every task's rollouts disagree


def test_learnable_fixtures():
    a, h = stats(all_or_nothing()), stats(all_halves())
    assert a["target"].mean == h["target"].mean == 0.5
    assert a["target"].disagree_share == 0.0 and h["target"].disagree_share == 1.0


def test_more_learning_signal_is_kept():
    v = decide(stats(all_halves()), BANDS, entry("k" * 40, stats(all_or_nothing())))
    assert v.verdict == "keep", v.reason
    assert "learning signal" in v.reason
    assert v.compared_to == "k" * 40


def test_less_learning_signal_is_discarded():
    v = decide(stats(all_or_nothing()), BANDS, entry("k" * 40, stats(all_halves())))
    assert v.verdict == "discard", v.reason
    assert "learning signal" in v.reason


def test_learning_signal_only_counts_in_the_wanted_state():
    # same disagree shares as above, but the target sits above the band in both: a pure
    # learnable-share change is not judged there (distance decides), so no learning-signal verdict
    above_all_or_nothing = [R] * 36 + [0] * 4  # 0.9, disagree 0
    above_halves = [R] * 32 + [2] * 8  # 0.9, disagree 0.2
    v = decide(stats(above_halves), BANDS, entry("k" * 40, stats(above_all_or_nothing)))
    assert v.verdict == "inconclusive", v.reason
    assert "learning signal" not in v.reason


# --- band_distance and rl_readiness ----------------------------------------------------


@pytest.mark.parametrize("target, strong, expected", [
    (0.45, 0.9, 0.0),
    (0.2, 0.7, 0.0),      # the band's edges are inside
    (0.7, 0.7, 0.0),
    (0.05, 0.9, 0.15),    # below the band
    (0.95, 0.9, 0.25),    # above the band
    (0.45, 0.3, 0.4),     # strong below its floor
    (0.1, 0.5, 0.3),      # both: 0.1 + 0.2
    (0.9, 0.0, 0.9),      # 0.2 + 0.7
])
def test_band_distance_floats(target, strong, expected):
    d = band_distance(target, strong, BANDS)
    assert isinstance(d, float)
    assert d == expected


def test_band_distance_custom_bands():
    bands = Bands(target_min=0.3, target_max=0.4, strong_min=0.9)
    assert band_distance(0.5, 0.8, bands) == 0.2


def test_band_distance_vectorised():
    t = np.array([0.05, 0.45, 0.95, 0.1])
    s = np.array([0.9, 0.3, 1.0, 0.5])
    d = band_distance(t, s, BANDS)
    assert isinstance(d, np.ndarray) and d.shape == (4,)
    np.testing.assert_allclose(d, [0.15, 0.4, 0.25, 0.3])
    np.testing.assert_allclose(d, [band_distance(a, b, BANDS) for a, b in zip(t, s)])
    # a scalar strong mean broadcasts
    np.testing.assert_allclose(band_distance(t, 1.0, BANDS), [0.15, 0.0, 0.25, 0.1])
    # NaN replicates (no scored task drawn) stay NaN, they do not become 0
    assert np.isnan(band_distance(np.array([np.nan]), np.array([1.0]), BANDS)[0])


@pytest.mark.parametrize("target, strong", [(None, 0.9), (0.45, None), (None, None)])
def test_band_distance_none(target, strong):
    assert band_distance(target, strong, BANDS) is None


def readiness_stats(t_mean, s_mean, disagree) -> dict:
    def model(mean, **extra) -> ModelStats:
        return ModelStats(model="m", rollouts=0, scored=0, mean=mean, ci=None, std=extra.get("std"), solve_rate=None,
                          max_reward=None, normalized_mean=None, tasks=0, disagree_share=extra.get("disagree"))

    return {"target": model(t_mean, std=0.3, disagree=disagree), "strong": model(s_mean)}


def test_rl_readiness_ready():
    r = rl_readiness(readiness_stats(0.45, 0.9, 0.5), BANDS)
    assert r.model_dump() == {"target_in_band": True, "strong_above_floor": True, "target_std": 0.3,
                              "learnable_share": 0.5, "distance": 0.0, "ready": True}


@pytest.mark.parametrize("t_mean, s_mean, disagree, in_band, above, ready", [
    (0.2, 0.7, 0.2, True, True, True),      # every edge inclusive
    (0.7, 1.0, 1.0, True, True, True),
    (0.19, 0.9, 0.5, False, True, False),   # target below band
    (0.71, 0.9, 0.5, False, True, False),   # target above band
    (0.45, 0.69, 0.5, True, False, False),  # strong below floor
    (0.45, 0.9, 0.19, True, True, False),   # too few learnable tasks
    (0.45, 0.9, 0.0, True, True, False),
    (0.45, 0.9, None, True, True, False),   # unknown learnable share
    (None, 0.9, 0.5, False, True, False),
    (0.45, None, 0.5, True, False, False),
])
def test_rl_readiness_flags(t_mean, s_mean, disagree, in_band, above, ready):
    r = rl_readiness(readiness_stats(t_mean, s_mean, disagree), BANDS)
    assert (r.target_in_band, r.strong_above_floor, r.ready) == (in_band, above, ready)
    assert r.learnable_share == disagree


def test_rl_readiness_learnable_min_is_configurable():
    s = readiness_stats(0.45, 0.9, 0.3)
    assert rl_readiness(s, Bands(learnable_min=0.25)).ready is True
    assert rl_readiness(s, Bands(learnable_min=0.35)).ready is False


def test_rl_readiness_from_real_stats():
    r = rl_readiness(stats(all_halves()), BANDS)
    assert r.ready is True and r.learnable_share == 1.0 and r.distance == 0.0
    r = rl_readiness(stats(all_or_nothing()), BANDS)
    assert r.target_in_band and r.strong_above_floor and r.ready is False
    r = rl_readiness({}, BANDS)
    assert r.ready is False and r.distance is None


def test_band_statements_follow_the_interval():
    from autoenv.evaluation.verdict import standing
    both = stats(counts(0.25), counts(0.95))
    strong = both["strong"]
    wide = both["target"].model_copy(update={"mean": 0.25, "ci": (0.009, 0.571)})
    assert "overlapping its band 0.2–0.7 (mean inside" in standing(wide, strong, BANDS)
    inside = wide.model_copy(update={"ci": (0.3, 0.5), "mean": 0.4})
    assert "is inside its band 0.2–0.7" in standing(inside, strong.model_copy(update={"ci": (0.9, 1.0)}), BANDS)
    below = wide.model_copy(update={"ci": (0.01, 0.15), "mean": 0.08})
    assert "0.120 below its band" in standing(below, strong, BANDS)
    low_strong = strong.model_copy(update={"mean": 0.75, "ci": (0.6, 0.9)})
    assert "overlapping its floor 0.7" in standing(inside, low_strong, BANDS)


def test_too_few_tasks_are_not_compared_and_the_fix_is_the_dataset_not_a_setting():
    old = entry("a" * 40, stats(counts(0.5, n=8), counts(1.0, n=8)))
    new = stats(counts(0.25, n=8), counts(1.0, n=8))
    v = decide(new, BANDS, old, min_tasks=10)
    assert v.verdict == "inconclusive" and v.compared_to == old.commit
    assert v.reason.startswith("too few tasks to compare: this evaluation scored 8 task(s) and shares 8 with "
                               "aaaaaaaa; a comparison needs at least 10 (stats.min_tasks). If the dataset offers "
                               "fewer distinct tasks than that, give it more.")
    assert "budget" not in v.reason  # a setting the agent may not change is never its advice
    assert decide(new, BANDS, old, min_tasks=8).reason != v.reason  # at the minimum: compared


def changed(target: float, strong: float = 1.0, n: int = N, prefix: str = "new") -> dict:
    """An evaluation whose tasks all differ from the kept one's (a changed dataset: new prompts, new keys)."""
    return stats(counts(target, n=n), counts(strong, n=n), prefix=prefix)


@pytest.mark.parametrize("before, after, want", [
    (0.05, 0.45, "keep"),  # the new tasks put the target inside its band
    (0.45, 0.05, "discard"),  # ... or out of it
    (0.45, 0.4, "inconclusive"),  # both inside: distance 0 on both sides, learnable shares alike
])
def test_a_changed_dataset_is_compared_unpaired_and_can_be_kept_or_discarded(before, after, want):
    # Tasks are keyed by their prompt: a changed prompt template once shared 0 tasks with the kept
    # evaluation, and every later commit of the run ended "too few shared tasks to compare".
    old = entry("a" * 40, stats(counts(before), counts(1.0)))
    v = decide(changed(after), BANDS, old, min_tasks=10)
    assert v.verdict == want, v.reason
    assert v.compared_to == old.commit
    assert "the tasks changed (0 of this evaluation's 40 shared with aaaaaaaa's 40: a new dataset or new prompts), " \
           "so the two are compared unpaired, each on its own tasks" in v.reason
    assert "not how the scores of the same tasks moved" in v.reason
    assert "budget." not in v.reason


def test_the_unpaired_interval_is_wider_than_the_paired_one_on_the_same_numbers():
    # tasks differ in difficulty (all or nothing), and the easy ones stay easy: pairing cancels that
    old = entry("a" * 40, stats([R] * 2 + [0] * (N - 2), counts(1.0)))
    after = [R] * 8 + [0] * (N - 8)
    paired = decide(stats(after, counts(1.0)), BANDS, old, min_tasks=10)
    unpaired = decide(stats(after, counts(1.0), prefix="new"), BANDS, old, min_tasks=10)

    def width(reason: str) -> float:
        low, high = map(float, re.search(r"interval \[([-+.\d]+), ([-+.\d]+)\]", reason).groups())
        return high - low

    assert width(unpaired.reason) > width(paired.reason)
    assert "the tasks changed" not in paired.reason


def test_a_partly_changed_dataset_with_enough_shared_tasks_stays_paired():
    old = entry("a" * 40, stats(counts(0.05), counts(1.0)))
    half = {"target": 0.45, "strong": 1.0}  # task-000..019 shared with the kept evaluation, 20 new ones
    merged = {role: model_stats("small-model" if role == "target" else "big-model",
                                rollouts(counts(mean, n=20), prefix="task") + rollouts(counts(mean, n=20), prefix="new"),
                                1.0)
              for role, mean in half.items()}
    v = decide(merged, BANDS, old, min_tasks=10)
    assert v.verdict == "keep" and "the tasks changed" not in v.reason


def test_a_kept_evaluation_with_too_few_tasks_hands_the_reference_on():
    # A first evaluation of a 5-task dataset can never be compared with; once the dataset grows, the
    # first evaluation with enough tasks becomes the run's reference instead of locking the run.
    old = entry("a" * 40, stats(counts(0.4, n=5), counts(1.0, n=5)))
    v = decide(changed(0.45), BANDS, old, min_tasks=10)
    assert v.verdict == "baseline" and v.compared_to == old.commit
    assert v.reason.startswith("the kept aaaaaaaa scored only 5 task(s), too few to compare with "
                               "(stats.min_tasks = 10), and shares 0 with this evaluation: this one, on 40 tasks, "
                               "becomes the reference")


@pytest.mark.slow
def test_unpaired_comparisons_of_unchanged_environments_rarely_decide():
    # A/A on changed tasks: the same environment's tasks redrawn (each task's success rate from one
    # Beta distribution around the mean). A keep or discard here is a false decision; its rate must
    # stay near the nominal 5% (bench/verdict.py measures it at more trials, side by side).
    rng = np.random.default_rng(3)
    false = 0
    trials = 150
    for trial in range(trials):
        def evaluation(prefix: str, mean: float) -> dict:
            rates = rng.beta(2 * mean, 2 * (1 - mean), size=N)
            return stats([int((rng.random(R) < p).sum()) for p in rates],
                         [int((rng.random(R) < q).sum()) for q in rng.beta(2 * 0.85, 2 * 0.15, size=N)],
                         prefix=prefix)
        mean = (0.10, 0.45, 0.85)[trial % 3]
        old = entry("a" * 40, evaluation("old", mean))
        v = decide(evaluation("new", mean), BANDS, old, min_tasks=10, seed=trial)
        false += v.verdict in ("keep", "discard")
    assert false / trials <= 0.05 + 2 * (0.05 * 0.95 / trials) ** 0.5, false


