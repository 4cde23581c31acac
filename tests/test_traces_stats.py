"""autoenv/core/traces.py and autoenv/evaluation/stats.py over hand-built traces.jsonl files (verifiers' wire shape)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import groups

from autoenv.core.traces import TRACES_FILE, Rollout, read_rollouts, to_rollout
from autoenv.evaluation.stats import model_stats

_counter = iter(range(10**9))


def trace(
    key: str = "t0",
    *,
    rewards: dict | None = None,
    idx: int | None = 0,
    difficulty: str | None = "easy",
    category: str | None = "math",
    trainable: bool = True,
    stop_condition: str | None = "completed",
    is_timeout: bool = False,
    errors: list[dict] | None = None,
    turns: int = 1,
    usage: list[tuple[int, int]] = ((10, 5),),
    start: float = 100.0,
    end: float = 102.5,
) -> dict:
    if rewards is None:
        rewards = {"correct": {"score": 1.0, "weight": 1.0}}
    data = {"idx": idx, "difficulty": difficulty, "category": category}
    return {
        "id": f"trace-{next(_counter)}",
        "task": {"key": key, "data": data},
        "agent": {"trainable": trainable},
        "rewards": rewards,
        "metrics": {"turns": turns},
        "nodes": [{"message": {"role": "user", "content": "q"}}]
        + [{"message": {"role": "assistant", "content": f"a{i}"}} for i in range(turns)],
        "calls": [{"usage": {"prompt_tokens": p, "completion_tokens": c}} for p, c in usage],
        "ok": not errors and not is_timeout,
        "stop_condition": stop_condition,
        "is_timeout": is_timeout,
        "errors": errors or [],
        "timing": {"agent": {"start": start, "end": end}},
    }


def episode(*traces: dict, key: str | None = None, errors: list[dict] | None = None,
            is_timeout: bool = False, data: dict | None = None) -> dict:
    key = key or (traces[0]["task"]["key"] if traces else "t0")
    return {
        "id": f"episode-{next(_counter)}",
        "task": {"key": key, "data": data if data is not None else {"idx": 0}},
        "ok": not errors and not is_timeout,
        "is_timeout": is_timeout,
        "errors": errors or [],
        "traces": list(traces),
    }


def write(directory: Path, *episodes: dict, tail: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(e) + "\n" for e in episodes) + tail
    (directory / TRACES_FILE).write_text(text)
    return directory


def one(tmp_path: Path, t: dict, **episode_kw) -> Rollout:
    rollouts = read_rollouts(write(tmp_path, episode(t, **episode_kw)))
    assert len(rollouts) == 1
    return rollouts[0]


# --- traces.py: outcomes and rewards ---------------------------------------------------


def test_ok_rollout_fields(tmp_path):
    t = trace("alpha", idx=7, difficulty="hard", category="geo", turns=3,
              usage=[(100, 20), (150, 30), (200, None)], start=10.0, end=13.25)
    r = one(tmp_path, t)
    assert r.outcome == "ok"
    assert r.reward == 1.0
    assert r.trace_id == t["id"]
    assert r.task_key == "alpha"
    assert r.idx == 7
    assert (r.difficulty, r.category) == ("hard", "geo")
    assert r.turns == 3
    assert (r.input_tokens, r.output_tokens) == (450, 50)
    assert r.seconds == 3.25
    assert r.error is None
    assert r.components == {"correct": 1.0}


def test_reward_is_weighted_sum_of_components(tmp_path):
    t = trace(rewards={"a": {"score": 0.5, "weight": 2.0}, "b": {"score": 1.0, "weight": 0.25},
                       "c": {"score": 0.2}})  # weight defaults to 1
    r = one(tmp_path, t)
    assert r.outcome == "ok"
    assert r.reward == pytest.approx(0.5 * 2.0 + 1.0 * 0.25 + 0.2)
    assert r.components == {"a": 0.5, "b": 1.0, "c": 0.2}  # raw scores, unweighted


def test_integer_scores_are_numbers(tmp_path):
    r = one(tmp_path, trace(rewards={"a": {"score": 1, "weight": 1}}))
    assert r.outcome == "ok" and r.reward == 1.0


def test_zero_reward_is_ok_not_error(tmp_path):
    r = one(tmp_path, trace(rewards={"a": {"score": 0.0, "weight": 1.0}}))
    assert r.outcome == "ok" and r.reward == 0.0


def test_timeout(tmp_path):
    r = one(tmp_path, trace(is_timeout=True, stop_condition="timeout"))
    assert r.outcome == "timeout"
    assert r.reward is None


def test_episode_timeout_applies_to_its_traces(tmp_path):
    r = one(tmp_path, trace(), is_timeout=True)
    assert r.outcome == "timeout" and r.reward is None


def test_provider_error_type(tmp_path):
    r = one(tmp_path, trace(errors=[{"type": "ProviderError", "message": "HTTP 500 from model"}]))
    assert r.outcome == "provider_error"
    assert r.reward is None
    assert r.error == "ProviderError: HTTP 500 from model"


@pytest.mark.parametrize("kind", ["InterceptionError", "ModelError", "APIConnectionError", "APIStatusError"])
def test_other_provider_error_types(tmp_path, kind):
    r = one(tmp_path, trace(errors=[{"type": kind, "message": "x"}]))
    assert r.outcome == "provider_error"


def test_provider_error_wins_over_task_error(tmp_path):
    r = one(tmp_path, trace(errors=[{"type": "TaskError", "message": "a"}, {"type": "ProviderError", "message": "b"}]))
    assert r.outcome == "provider_error"
    assert r.error == "TaskError: a"  # the first error is the one shown


def test_stop_condition_provider_error(tmp_path):
    r = one(tmp_path, trace(stop_condition="provider_error"))
    assert r.outcome == "provider_error"
    assert r.reward is None


def test_task_error_is_env_error(tmp_path):
    r = one(tmp_path, trace(errors=[{"type": "TaskError", "message": "reward raised ZeroDivisionError"}]))
    assert r.outcome == "env_error"
    assert r.reward is None
    assert "TaskError" in r.error


def test_episode_errors_count_for_the_trace(tmp_path):
    r = one(tmp_path, trace(), errors=[{"type": "SetupError", "message": "tool server crashed"}])
    assert r.outcome == "env_error" and r.reward is None
    assert r.error == "SetupError: tool server crashed"


def test_error_text_is_capped(tmp_path):
    r = one(tmp_path, trace(errors=[{"type": "TaskError", "message": "x" * 4999 + "!"}]))
    assert len(r.error) <= 500 and r.error.startswith("TaskError: ") and r.error.endswith("x!")  # both ends kept


def test_a_bool_score_is_a_real_number(tmp_path):  # bool, int and float are the real numbers a reward may return
    r = one(tmp_path, trace(rewards={"good": {"score": True, "weight": 1.0}}))
    assert r.outcome == "ok" and r.reward == 1.0


@pytest.mark.parametrize("score", [None, float("nan"), float("inf"), "1.0", [1.0]])
def test_bad_score_is_env_error_never_a_number(tmp_path, score):
    t = trace(rewards={"good": {"score": 1.0, "weight": 1.0}, "bad": {"score": score, "weight": 1.0}})
    r = one(tmp_path, t)
    assert r.outcome == "env_error"
    assert r.reward is None
    assert "bad" in r.error
    assert "good" in r.components and "bad" not in r.components


def test_nan_written_by_json_is_env_error(tmp_path):
    # json.dumps writes NaN as a bare token; the reader must still refuse it.
    directory = write(tmp_path, episode(trace(rewards={"a": {"score": float("nan"), "weight": 1.0}})))
    assert "NaN" in (directory / TRACES_FILE).read_text()
    assert read_rollouts(directory)[0].outcome == "env_error"


def test_reward_entry_none_is_env_error(tmp_path):
    # verifiers serialises a reward whose scoring did not run as null.
    r = one(tmp_path, trace(rewards={"a": None}))
    assert r.outcome == "env_error" and r.reward is None


def test_no_rewards_is_env_error(tmp_path):
    r = one(tmp_path, trace(rewards={}))
    assert r.outcome == "env_error"
    assert r.reward is None
    assert "without any reward" in r.error


def test_no_reward_key_is_env_error():
    t = trace()
    del t["rewards"]
    assert to_rollout(t).outcome == "env_error"


# --- traces.py: file reading ------------------------------------------------------------


def test_missing_file_is_empty(tmp_path):
    assert read_rollouts(tmp_path) == []


def test_truncated_last_line_is_skipped(tmp_path):
    full = json.dumps(episode(trace("b")))
    directory = write(tmp_path, episode(trace("a")), tail=full[: len(full) // 2])
    rollouts = read_rollouts(directory)
    assert [r.task_key for r in rollouts] == ["a"]


def test_blank_lines_are_skipped(tmp_path):
    directory = write(tmp_path, episode(trace("a")), tail="\n   \n")
    assert len(read_rollouts(directory)) == 1


def test_non_trainable_traces_are_skipped(tmp_path):
    directory = write(tmp_path, episode(trace("a"), trace("a", trainable=False), trace("a")))
    assert len(read_rollouts(directory)) == 2


def test_trace_without_agent_counts_as_trainable(tmp_path):
    t = trace("a")
    del t["agent"]
    assert len(read_rollouts(write(tmp_path, episode(t)))) == 1


def test_episode_without_traces_is_one_failed_rollout(tmp_path):
    ep = episode(key="lost", errors=[{"type": "TaskError", "message": "setup failed"}],
                 data={"idx": 4, "difficulty": "hard", "category": "c"})
    rollouts = read_rollouts(write(tmp_path, ep))
    assert len(rollouts) == 1
    r = rollouts[0]
    assert r.outcome == "env_error"
    assert r.reward is None
    assert (r.task_key, r.idx, r.difficulty) == ("lost", 4, "hard")
    assert r.error == "TaskError: setup failed"


def test_episode_without_traces_kinds(tmp_path):
    eps = [
        episode(key="p", errors=[{"type": "ProviderError", "message": "down"}]),
        episode(key="t", is_timeout=True),
        episode(key="n"),  # no traces, no errors: still a failure, never a score
    ]
    outcomes = {r.task_key: r.outcome for r in read_rollouts(write(tmp_path, *eps))}
    assert outcomes == {"p": "provider_error", "t": "timeout", "n": "env_error"}


def test_file_order_is_kept(tmp_path):
    directory = write(tmp_path, episode(trace("a"), trace("b")), episode(trace("c")))
    assert [r.task_key for r in read_rollouts(directory)] == ["a", "b", "c"]


def test_numeric_difficulty_becomes_string(tmp_path):
    r = one(tmp_path, trace(difficulty=3))
    assert r.difficulty == "3"


def test_negative_timing_is_clamped():
    assert to_rollout(trace(start=10.0, end=5.0)).seconds == 0.0


# --- stats.py ---------------------------------------------------------------------------


def ok(key: str, reward: float, difficulty: str | None = "easy", category: str | None = "c",
       tokens: tuple[int, int] = (0, 0), seconds: float = 0.0, components: dict | None = None) -> Rollout:
    return Rollout(trace_id="", task_key=key, idx=None, outcome="ok", reward=reward,
                   components=components or {}, difficulty=difficulty, category=category,
                   input_tokens=tokens[0], output_tokens=tokens[1], seconds=seconds)


def failed(key: str, outcome: str, tokens: tuple[int, int] = (0, 0)) -> Rollout:
    return Rollout(trace_id="", task_key=key, idx=None, outcome=outcome, reward=None,
                   difficulty="easy", input_tokens=tokens[0], output_tokens=tokens[1])


def test_mean_std_solve_rate_by_hand():
    rollouts = [ok("a", 1.0), ok("a", 0.0), ok("b", 0.5), ok("b", 0.5), ok("c", 1.0)]
    s = model_stats("target", rollouts, solve_threshold=1.0)
    assert s.model == "target"
    assert s.rollouts == 5 and s.scored == 5
    assert s.mean == 0.6  # (1 + 0 + .5 + .5 + 1) / 5
    # Population std: deviations .4, -.6, -.1, -.1, .4 -> sqrt(0.70 / 5) = 0.3742
    # (the sample std, sqrt(0.70 / 4) = 0.4183, would be wrong here).
    assert s.std == round(math.sqrt(0.70 / 5), 4) == 0.3742
    assert s.std == round(float(np.std([1, 0, 0.5, 0.5, 1])), 4)
    assert s.solve_rate == 0.4  # two rewards reach 1.0
    assert s.tasks == 3


def test_solve_threshold_is_inclusive_and_configurable():
    rollouts = [ok("a", 0.5), ok("b", 0.49), ok("c", 0.8)]
    assert model_stats("m", rollouts, solve_threshold=0.5).solve_rate == pytest.approx(0.6667)
    assert model_stats("m", rollouts, solve_threshold=0.9).solve_rate == 0.0


def test_disagree_share():
    rollouts = [
        ok("a", 1.0), ok("a", 0.0),  # disagree
        ok("b", 1.0), ok("b", 1.0),  # agree
        ok("c", 0.0), ok("c", 0.0), ok("c", 0.5),  # disagree
        ok("d", 1.0),  # only one scored rollout: not counted
        ok("e", 0.0), failed("e", "timeout"),  # one scored rollout: not counted
    ]
    s = model_stats("m", rollouts, 1.0)
    assert s.disagree_share == pytest.approx(round(2 / 3, 4))
    assert s.tasks == 5


def test_disagree_share_none_without_groups():
    s = model_stats("m", [ok("a", 1.0), ok("b", 0.0)], 1.0)
    assert s.disagree_share is None


def test_errors_counted_per_kind_and_excluded_from_mean():
    rollouts = [
        ok("a", 1.0), ok("a", 0.5),
        failed("a", "timeout"), failed("b", "provider_error"), failed("b", "provider_error"),
        failed("c", "env_error"),
    ]
    s = model_stats("m", rollouts, 1.0)
    assert s.errors.model_dump() == {"provider_error": 2, "timeout": 1, "env_error": 1}
    assert s.rollouts == 6 and s.scored == 2
    assert s.mean == 0.75  # not (1 + .5 + 0*4)/6
    assert s.solve_rate == 0.5


def test_ok_outcome_without_reward_is_not_scored():
    weird = Rollout(trace_id="", task_key="x", idx=None, outcome="ok", reward=None)
    s = model_stats("m", [ok("a", 1.0), weird], 1.0)
    assert s.scored == 1 and s.mean == 1.0


def test_per_difficulty_and_category_means():
    rollouts = [
        ok("a", 1.0, "easy", "x"), ok("b", 0.5, "easy", "y"),
        ok("c", 0.0, "hard", "x"), ok("d", 0.25, "hard", "x"),
        ok("e", 1.0, None, None),  # unlabelled: only in the overall mean
        failed("f", "env_error"),
    ]
    s = model_stats("m", rollouts, 1.0)
    assert groups(s.by_difficulty) == {"easy": {"n": 2, "mean": 0.75}, "hard": {"n": 2, "mean": 0.125}}
    assert groups(s.by_category) == {"x": {"n": 3, "mean": round(1.25 / 3, 4)}, "y": {"n": 1, "mean": 0.5}}
    assert s.mean == 0.55


def test_component_means():
    rollouts = [ok("a", 1.0, components={"p": 1.0, "q": 0.0}), ok("b", 0.0, components={"p": 0.0})]
    assert model_stats("m", rollouts, 1.0).components == {"p": 0.5, "q": 0.0}


def test_token_sums_include_failed_rollouts():
    rollouts = [ok("a", 1.0, tokens=(100, 10)), ok("b", 0.0, tokens=(50, 5)),
                failed("c", "provider_error", tokens=(7, 0))]
    s = model_stats("m", rollouts, 1.0)
    assert (s.input_tokens, s.output_tokens) == (157, 15)


def test_mean_seconds_ignores_zero():
    s = model_stats("m", [ok("a", 1.0, seconds=2.0), ok("b", 1.0, seconds=4.0), ok("c", 1.0)], 1.0)
    assert s.mean_seconds == 3.0


def test_all_errors_gives_none():
    s = model_stats("m", [failed("a", "timeout"), failed("b", "env_error")], 1.0)
    assert s.scored == 0
    assert s.mean is None and s.std is None and s.solve_rate is None and s.disagree_share is None
    assert s.errors.model_dump() == {"provider_error": 0, "timeout": 1, "env_error": 1}
    assert s.by_difficulty == {}
    assert s.mean_seconds is None


def test_no_rollouts():
    s = model_stats("m", [], 1.0)
    assert (s.rollouts, s.scored, s.tasks, s.mean) == (0, 0, 0, None)


def test_model_stats_dump_is_json_serialisable():
    s = model_stats("m", [ok("a", 1.0), ok("a", 0.0)], 1.0)
    d = json.loads(json.dumps(s.model_dump(mode="json")))
    assert d["mean"] == 0.5 and d["disagree_share"] == 1.0


def test_end_to_end_file_to_stats(tmp_path):
    eps = [
        episode(trace("a", rewards={"r": {"score": 1.0, "weight": 1.0}}, usage=[(10, 2)]),
                trace("a", rewards={"r": {"score": 0.0, "weight": 1.0}}, usage=[(10, 3)])),
        episode(trace("b", rewards={"r": {"score": 1.0, "weight": 0.5}}, difficulty="hard", usage=[(20, 4)]),
                trace("b", rewards={"r": {"score": None, "weight": 1.0}}, difficulty="hard", usage=[(20, 0)])),
        episode(trace("c", errors=[{"type": "ProviderError", "message": "429"}], usage=[])),
    ]
    rollouts = read_rollouts(write(tmp_path, *eps, tail='{"id": "cut'))
    s = model_stats("target", rollouts, solve_threshold=1.0)
    assert s.rollouts == 5 and s.scored == 3
    assert s.mean == 0.5  # (1 + 0 + 0.5) / 3
    assert s.errors.model_dump() == {"provider_error": 1, "timeout": 0, "env_error": 1}
    assert s.disagree_share == 1.0  # only task a has two scored rollouts, and they differ
    assert groups(s.by_difficulty) == {"easy": {"n": 2, "mean": 0.5}, "hard": {"n": 1, "mean": 0.5}}
    assert (s.input_tokens, s.output_tokens) == (60, 9)
    assert s.solve_rate == pytest.approx(round(1 / 3, 4))
