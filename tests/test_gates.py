"""autoenv/gates.py: platform checks, the judgement of audit.json, and `autoenv check` / `autoenv probe`.

The unit tests judge hand-built audit dicts shaped as autoenv/audit.py writes them, against
the project's own config.toml. The CLI tests run the real command in a child process on
scratch run repositories holding the examples, including the planted reward hacks.
"""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
from pathlib import Path

import pytest
from audits import audit, clean_dataset, clean_rows, probe_records, rec
from conftest import autoenv, commit_all, ledger

from autoenv.core.config import load_config
from autoenv.core.paths import PROJECT
from autoenv.core.record import GateFinding
from autoenv.gates import dataset
from autoenv.gates.probes import EXPLOITS, NEEDS_TOOLS
from autoenv.gates.rules import Gates, judge_audit, judge_probes, platform_checks

CONFIG = load_config(PROJECT / "config.toml")
README = "# candidate-env: a test environment\n\n" + "It teaches careful multi-step arithmetic. " * 8
GOOD_PYPROJECT = """\
[project]
name = "candidate-env"
version = "0.1.0"
description = "Multi-step integer arithmetic with one exact answer tag."
tags = ["math", "single-turn"]
requires-python = ">=3.11"
dependencies = ["verifiers>=0.4,<0.5"]
"""


def find(report: Gates, name: str) -> GateFinding:
    matches = [f for f in report.findings if f.name == name]
    assert len(matches) == 1, (name, [f.name for f in report.findings])
    return matches[0]


def names(report: Gates, status: str) -> set[str]:
    return {f.name for f in report.findings if f.status == status}


# --- platform_checks -----------------------------------------------------------------------


def candidate_dir(tmp_path: Path, pyproject: str | None = GOOD_PYPROJECT, readme: str | None = README) -> Path:
    d = tmp_path / "candidate"
    d.mkdir()
    if pyproject is not None:
        (d / "pyproject.toml").write_text(pyproject)
    if readme is not None:
        (d / "README.md").write_text(readme)
    return d


def platform(candidate: Path) -> Gates:
    report = Gates()
    platform_checks(candidate, report)
    return report


def test_good_candidate_passes_platform_checks(tmp_path):
    report = platform(candidate_dir(tmp_path))
    assert find(report, "pyproject").status == "pass"
    assert "candidate-env 0.1.0" in find(report, "pyproject").message and "math, single-turn" in find(report, "pyproject").message
    assert find(report, "readme").status == "pass"
    assert report.passed and report.failed == []


@pytest.mark.parametrize("description", [
    "TODO: one line saying what this environment teaches.",
    "todo: write this later please",
    "<one-line description>",
    "Lorem ipsum dolor sit amet, consectetur",
    "Arithmetic.",  # too short to say anything
    "",
])
def test_placeholder_description_fails(tmp_path, description):
    text = GOOD_PYPROJECT.replace('"Multi-step integer arithmetic with one exact answer tag."', json.dumps(description))
    report = platform(candidate_dir(tmp_path, text))
    f = find(report, "pyproject")
    assert f.status == "fail" and "description" in f.message
    assert report.failed and report.failed[0].startswith("pyproject: ")


def test_missing_description_fails(tmp_path):
    text = "\n".join(line for line in GOOD_PYPROJECT.splitlines() if not line.startswith("description"))
    f = find(platform(candidate_dir(tmp_path, text)), "pyproject")
    assert f.status == "fail" and "description" in f.message


@pytest.mark.parametrize("description", [
    "Moderate Mastodon posts against a written community policy.",
    "Plan and reorder a todo list under deadline and dependency constraints.",
])
def test_real_description_mentioning_todo_is_not_a_placeholder(tmp_path, description):
    text = GOOD_PYPROJECT.replace('"Multi-step integer arithmetic with one exact answer tag."', json.dumps(description))
    assert find(platform(candidate_dir(tmp_path, text)), "pyproject").status == "pass"


@pytest.mark.parametrize("tags_line", [None, "tags = []", 'tags = [""]', 'tags = "math"', "tags = [1, 2]"])
def test_missing_or_empty_tags_fail(tmp_path, tags_line):
    lines = [line for line in GOOD_PYPROJECT.splitlines() if not line.startswith("tags")]
    if tags_line:
        lines.insert(4, tags_line)
    f = find(platform(candidate_dir(tmp_path, "\n".join(lines))), "pyproject")
    assert f.status == "fail" and "tags" in f.message


@pytest.mark.parametrize("name_line", ['name = "candidate_env"', 'name = "my-env"', None])
def test_wrong_name_fails(tmp_path, name_line):
    lines = [line for line in GOOD_PYPROJECT.splitlines() if not line.startswith("name")]
    if name_line:
        lines.insert(1, name_line)
    f = find(platform(candidate_dir(tmp_path, "\n".join(lines))), "pyproject")
    assert f.status == "fail" and 'must be "candidate-env"' in f.message


def test_missing_version_fails(tmp_path):
    text = "\n".join(line for line in GOOD_PYPROJECT.splitlines() if not line.startswith("version"))
    f = find(platform(candidate_dir(tmp_path, text)), "pyproject")
    assert f.status == "fail" and "version" in f.message


def test_all_pyproject_problems_are_listed_together(tmp_path):
    text = '[project]\nname = "x"\nversion = "1"\ndescription = "TODO"\ntags = []\n'
    f = find(platform(candidate_dir(tmp_path, text)), "pyproject")
    assert f.status == "fail"
    assert all(word in f.message for word in ("name", "description", "tags"))


@pytest.mark.parametrize("pyproject", [None, "[project\nname = ", ""])
def test_unreadable_or_empty_pyproject_fails(tmp_path, pyproject):
    report = platform(candidate_dir(tmp_path, pyproject))
    assert find(report, "pyproject").status == "fail"
    assert not report.passed


@pytest.mark.parametrize("readme", [None, "", "# candidate-env\n\nShort.", "x" * 199, "  " + "y" * 150 + "  \n" * 30])
def test_missing_or_short_readme_fails(tmp_path, readme):
    report = platform(candidate_dir(tmp_path, readme=readme))
    assert find(report, "pyproject").status == "pass"
    f = find(report, "readme")
    assert f.status == "fail" and "200" in f.message
    assert report.failed == [f"readme: {f.message}"]


def test_readme_of_200_characters_passes(tmp_path):
    assert find(platform(candidate_dir(tmp_path, readme="z" * 200)), "readme").status == "pass"


def test_shipped_stub_fails_the_pyproject_check():
    report = platform(PROJECT / "candidate")
    f = find(report, "pyproject")
    assert f.status == "fail"
    assert "description" in f.message and "placeholder" in f.message
    assert "tags" in f.message
    assert not report.passed


def test_every_example_passes_the_platform_checks():
    for example in ("arithmetic", "shopping", "hack-format", "hack-length", "hack-repeats", "hack-substring"):
        report = platform(PROJECT / "examples" / example)
        assert report.passed, (example, report.failed)


# --- judge_audit / judge_probes on hand-built audits ----------------------------------------


def judge(a: dict) -> Gates:
    report = Gates()
    judge_audit(copy.deepcopy(a), CONFIG, report)
    return report


def judge_only_probes(records: list[dict], **extra) -> Gates:
    report = Gates()
    judge_probes({"probes": copy.deepcopy(records), **extra}, CONFIG, report)
    return report


def test_config_thresholds_used_here():
    assert CONFIG.probes.oracle_min == 0.95 and CONFIG.probes.exploit_max == 0.1
    assert CONFIG.checks.dataset_size == 1000 and CONFIG.checks.max_duplicate_share == 0.01


def test_clean_audit_passes():
    report = judge(audit())
    assert report.passed, report.failed
    assert report.mode == "in-process"
    assert names(report, "fail") == set()
    for name in ("modules", "dataset size", "exact duplicates", "near duplicates", "answer balance", "difficulty",
                 "category", "load time", "deterministic load", "deterministic scoring", "oracle",
                 "probe empty", "probe padding", "probe kitchen-sink"):
        assert find(report, name).status == "pass", name
    assert "task keys" not in {f.name for f in report.findings}
    assert list(report.probes) == ["oracle", *[p for p in EXPLOITS if p not in NEEDS_TOOLS]]
    assert report.probes["oracle"].mean == 1.0
    assert report.probes["padding"].of_oracle == 1.0 and report.probes["empty"].of_oracle == 0.0


def test_audit_without_probes_judges_only_the_checks():
    a = audit()
    del a["probes"], a["deterministic_scoring"]
    report = judge(a)
    assert report.passed and report.probes == {}
    assert not any(f.name.startswith("probe") or f.name == "oracle" for f in report.findings)


def test_maximum_is_the_sum_of_positive_weights():
    weights = {"correct": 1.0, "style": 0.5}
    full = [rec("oracle", i, {"correct": 1.0, "style": 1.0}, weights) for i in range(5)]
    report = judge_only_probes(full)
    f = find(report, "oracle")
    assert f.status == "pass" and "maximum 1.5" in f.message and "100%" in f.message
    partial = [rec("oracle", i, {"correct": 1.0, "style": 0.0}, weights) for i in range(5)]
    f = find(judge_only_probes(partial), "oracle")
    assert f.status == "fail" and "mean 1.000 of a maximum 1.5 (67%" in f.message
    assert f.data["tasks"] == [0, 1, 2, 3, 4]


def test_negative_weights_do_not_raise_the_maximum():
    weights = {"correct": 1.0, "penalty": -0.5}
    records = [rec("oracle", i, {"correct": 1.0, "penalty": 0.0}, weights) for i in range(4)]
    f = find(judge_only_probes(records), "oracle")
    assert f.status == "pass" and "maximum 1 " in f.message


def test_oracle_below_on_some_tasks_lists_them():
    scores = [1.0] * 10
    scores[3] = scores[7] = 0.0
    f = find(judge_only_probes(probe_records(oracle=scores)), "oracle")
    assert f.status == "fail" and "mean 0.800" in f.message
    assert "task idx 3, 7:" in f.message and f.data["tasks"] == [3, 7]


def test_one_unsolvable_task_fails_the_oracle_even_when_the_mean_is_high():
    scores = [1.0] * 40
    scores[12] = 0.5
    f = find(judge_only_probes(probe_records(oracle=scores)), "oracle")
    assert f.status == "fail" and "task idx 12:" in f.message  # mean 0.9875 >= 95%, but task 12 is short


def test_no_oracle_records_is_a_warning():
    records = [r for r in probe_records() if r["probe"] != "oracle"]
    report = judge_only_probes(records)
    f = find(report, "oracle")
    assert f.status == "warn" and "unproven" in f.message
    assert report.passed
    assert find(report, "probe empty").status == "pass"
    assert report.probes["empty"].of_oracle == 0.0  # judged against the maximum


def test_a_reward_that_raised_is_an_error_never_a_pass():
    records = probe_records()
    records += [rec("echo", 5, {}, {}, error="ValueError: planted"), rec("oracle", 5, {}, {}, error="ValueError: planted")]
    report = judge_only_probes(records)
    f = find(report, "reward errors")
    assert f.status == "fail" and "task 5 (echo): ValueError: planted" in f.message
    assert "task 5 (oracle)" in f.message
    assert report.probes["echo"].scored == 10 and report.probes["echo"].errors == 1
    assert report.probes["oracle"].mean == 1.0  # the failed reply is not scored as 0 either
    assert not report.passed


def test_a_probe_whose_every_reply_raised_is_not_a_pass():
    records = [r for r in probe_records() if r["probe"] != "garbage"]
    records += [rec("garbage", i, {}, {}, error="RuntimeError: boom") for i in range(10)]
    report = judge_only_probes(records)
    assert find(report, "probe garbage").status != "pass"
    assert report.probes["garbage"].scored == 0
    assert "reward errors" in {n.split(":")[0] for n in report.failed}


def test_partially_scored_error_record_is_not_counted():
    """score() raised after one reward was recorded: the partial trace must not count as a probe result."""
    records = probe_records()
    records.append(rec("empty", 99, {"correct": 1.0}, error="ValueError: second reward raised"))
    report = judge_only_probes(records)
    assert find(report, "reward errors").status == "fail"
    assert report.probes["empty"].mean == 0.0 and report.probes["empty"].scored == 10


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), 1.7, -0.2, "1.0"])
def test_a_reward_outside_its_range_is_an_error(bad):
    records = probe_records()
    records.append(rec("oracle", 42, {"correct": bad}))
    records.append(rec("padding", 42, {"correct": bad}))
    # a number outside [0, 1] is an error only against a range the env declares (verifiers documents none)
    report = judge_only_probes(records, **({"reward_range": [0, 1]} if isinstance(bad, float) and bad == bad
                                           and abs(bad) != float("inf") else {}))
    f = find(report, "reward errors")
    assert f.status == "fail" and "task 42 (oracle)" in f.message and "'correct'" in f.message
    assert report.probes["oracle"].mean == 1.0 and report.probes["oracle"].scored == 10
    assert find(report, "oracle").status == "pass"
    assert find(report, "probe padding").status == "pass"  # the 1.7 did not lift padding over the oracle
    json.dumps(report.report().model_dump(mode="json"))


@pytest.mark.parametrize("low, high", [(-1.0, 1.0), (-2.0, 2.0), (0.0, 3.0)])
def test_an_undeclared_range_is_observed_and_warned_not_an_error(low, high):
    """A game's payoffs (+/-1, +/-2) are legitimate in verifiers: the range is observed, the probes normalised."""
    records = [rec("oracle", i, {"payoff": high}) for i in range(5)] + [rec("empty", i, {"payoff": low}) for i in range(5)]
    report = judge_only_probes(records)
    assert report.passed, report.failed
    f = find(report, "reward range")
    assert f.status == "warn" and f.data["range"] == [min(low, 0.0), max(high, 1.0)]
    assert f"scores from {low:g} to {high:g}" in f.message and "not an error" in f.message
    assert report.probes["oracle"].mean == 1.0 and find(report, "probe empty").status == "pass"
    farmed = judge_only_probes(records[:5] + [rec("empty", i, {"payoff": high}) for i in range(5)])
    assert "probe empty" in " ".join(farmed.failed)  # a payoff the empty reply farms is still caught


def test_a_finished_rollout_without_any_reward_is_an_error():
    records = probe_records() + [rec("refusal", 3, {}, {})]
    f = find(judge_only_probes(records), "reward errors")
    assert f.status == "fail" and "task 3 (refusal): the rollout finished without any reward" in f.message


def test_exploit_above_its_share_of_the_oracle_fails_and_names_the_component():
    weights = {"correct": 1.0, "formatted": 1.0}
    records = [rec("oracle", i, {"correct": 1.0, "formatted": 1.0}, weights) for i in range(10)]
    records += [rec("wrong-answer", i, {"correct": 0.0, "formatted": 0.4}, weights) for i in range(10)]
    report = judge_only_probes(records)
    f = find(report, "probe wrong-answer")  # 0.4 of 2.0: 20% of the oracle
    assert f.status == "fail"
    assert "allowed 10% of the oracle" in f.message and "harvested formatted" in f.message
    assert "correct:" not in f.message  # nothing harvested there
    assert "best task idx" in f.message
    assert report.probes["wrong-answer"].of_oracle == 0.2
    assert "probe wrong-answer: " + f.message in report.failed


def test_exploit_at_exactly_its_share_passes():
    report = judge_only_probes(probe_records(exploits={"echo": 0.1}))
    assert find(report, "probe echo").status == "pass"
    report = judge_only_probes(probe_records(exploits={"echo": 0.11}))
    assert find(report, "probe echo").status == "fail"


def test_exploit_share_is_relative_to_the_oracle_not_the_maximum():
    # the oracle earns 0.96 of a maximum of 1; an exploit at 0.1 is 10.4% of the oracle
    report = judge_only_probes(probe_records(oracle=0.96, exploits={"refusal": 0.1}))
    assert find(report, "oracle").status == "pass"
    assert find(report, "probe refusal").status == "fail"


def test_padding_may_equal_the_oracle_but_not_beat_it():
    weights = {"correct": 1.0, "long": 0.5}
    base = [rec("oracle", i, {"correct": 1.0, "long": 0.2}, weights) for i in range(6)]
    equal = base + [rec("padding", i, {"correct": 1.0, "long": 0.2}, weights) for i in range(6)]
    assert find(judge_only_probes(equal), "probe padding").status == "pass"
    above = base + [rec("padding", i, {"correct": 1.0, "long": 1.0}, weights) for i in range(6)]
    f = find(judge_only_probes(above), "probe padding")
    assert f.status == "fail" and "must not beat the oracle" in f.message and "harvested" in f.message
    below = base + [rec("padding", i, {"correct": 0.0, "long": 1.0}, weights) for i in range(6)]
    assert find(judge_only_probes(below), "probe padding").status == "pass"  # not an exploit share test


def test_probe_with_every_task_skipped_is_skipped():
    records = [r for r in probe_records() if r["probe"] != "kitchen-sink"]
    records += [{"probe": "kitchen-sink", "key": f"k{i}", "idx": i, "skipped": True, "error": None} for i in range(10)]
    report = judge_only_probes(records)
    f = find(report, "probe kitchen-sink")
    assert f.status == "skip" and "10 tasks" in f.message
    assert report.passed and report.probes["kitchen-sink"].skipped == 10


def test_oracle_hook_that_raised_on_some_tasks_is_a_reward_error():
    records = probe_records()
    records.append({"probe": "oracle", "key": "k50", "idx": 50, "skipped": True,
                    "error": "the oracle hook raised KeyError: 'price'"})
    f = find(judge_only_probes(records), "reward errors")
    assert f.status == "fail" and "task 50 (oracle): the oracle hook raised KeyError" in f.message


def test_oracle_hook_that_raised_on_every_task_fails_the_gate():
    records = [r for r in probe_records() if r["probe"] != "oracle"]
    records += [{"probe": "oracle", "key": f"k{i}", "idx": i, "skipped": True,
                 "error": "the oracle hook raised RuntimeError: planted"} for i in range(10)]
    report = judge_only_probes(records)
    assert find(report, "oracle").status == "fail"
    assert not report.passed


def rollout(probe: str, idx: int, score: float | None, outcome: str = "ok", error: str | None = None) -> dict:
    components = {} if score is None else {"correct": score}
    return rec(probe, idx, components, error=error, outcome=outcome, tool_calls=2)


def test_rollout_provider_errors_and_timeouts_are_excluded_from_means():
    records = [rollout("oracle", i, 1.0) for i in range(4)]
    records += [rollout("oracle", 4, None, "provider_error", "429 rate limited"), rollout("oracle", 5, None, "timeout", "timed out")]
    records += [rollout("echo", i, 0.0) for i in range(4)]
    records += [rollout("echo", 9, None, "provider_error", "connection reset")]
    report = judge_only_probes(records, deterministic_scoring=True)
    assert "reward errors" not in {f.name for f in report.findings}
    assert find(report, "oracle").status == "pass"
    assert report.probes["oracle"].mean == 1.0 and report.probes["oracle"].scored == 4
    assert report.probes["oracle"].errors == 2
    assert report.probes["echo"].scored == 4 and report.probes["echo"].mean == 0.0
    assert report.passed


def test_rollout_env_errors_are_reward_errors():
    records = [rollout("oracle", i, 1.0) for i in range(4)]
    records.append(rollout("oracle", 7, None, "env_error", "the tool server died"))
    f = find(judge_only_probes(records), "reward errors")
    assert f.status == "fail" and "task 7 (oracle): the tool server died" in f.message


def test_non_deterministic_scoring_fails():
    f = find(judge_only_probes(probe_records(), deterministic_scoring=False), "deterministic scoring")
    assert f.status == "fail" and "pure functions" in f.message


def test_failed_module_import_fails():
    modules = [{"module": "candidate_env", "ok": True, "tool_server": False},
               {"module": "candidate_env.tools", "ok": False, "error": "ModuleNotFoundError: No module named 'fastmcp'"}]
    report = judge(audit(modules=modules))
    f = find(report, "modules")
    assert f.status == "fail" and "candidate_env.tools fails to import" in f.message and "fastmcp" in f.message
    assert f.data["modules"] == ["candidate_env.tools"]


def test_tool_servers_are_named():
    modules = [{"module": "candidate_env", "ok": True, "tool_server": False},
               {"module": "candidate_env.tools", "ok": True, "tool_server": True}]
    f = find(judge(audit(modules=modules)), "modules")
    assert f.status == "pass" and "tool servers: candidate_env.tools" in f.message


def test_duplicate_keys_fail():
    rows = clean_rows()
    rows[5]["key"] = rows[6]["key"]
    report = judge(audit(dataset=dataset.measure(rows, 0.9)))
    f = find(report, "task keys")
    assert f.status == "fail" and f.message.startswith("1 tasks share a key")


def test_small_dataset_fails():
    report = judge(audit(dataset=dataset.measure(clean_rows(999), 0.9)))
    f = find(report, "dataset size")
    assert f.status == "fail" and "999 tasks" in f.message and f.data["size"] == 999
    assert find(judge(audit(dataset=dataset.measure(clean_rows(1000), 0.9))), "dataset size").status == "pass"


def test_exact_duplicates_warn_then_fail():
    rows = clean_rows()
    rows[1]["prompt"] = rows[0]["prompt"]
    f = find(judge(audit(dataset=dataset.measure(rows, 0.9))), "exact duplicates")
    assert f.status == "warn" and "task idx 0 = 1" in f.message  # 0.1% <= 1%
    for i in range(1, 12):  # 11 repeats: 1.1%
        rows[i]["prompt"] = rows[0]["prompt"]
    f = find(judge(audit(dataset=dataset.measure(rows, 0.9))), "exact duplicates")
    assert f.status == "fail" and "11 repeated prompts" in f.message


def test_near_duplicates_fail_above_their_share():
    d = copy.deepcopy(clean_dataset())
    d.update(near_duplicate_share=0.06, near_duplicate_examples=[[1, 2, 0.93]])
    f = find(judge(audit(dataset=d)), "near duplicates")
    assert f.status == "fail" and "idx pairs 1 ~ 2 (0.93)" in f.message
    d.update(near_duplicate_share=0.02)
    assert find(judge(audit(dataset=d)), "near duplicates").status == "warn"


def test_answer_balance():
    rows = clean_rows()
    for r in rows[:260]:
        r["answer"] = "0"
    f = find(judge(audit(dataset=dataset.measure(rows, 0.9))), "answer balance")
    assert f.status == "fail" and '"0" in 26.0%' in f.message
    for r in rows:
        del r["answer"]
    assert find(judge(audit(dataset=dataset.measure(rows, 0.9))), "answer balance").status == "skip"


def test_thin_difficulty_is_a_warning_and_missing_category_a_skip():
    rows = clean_rows()
    for r in rows:
        r["difficulty"] = "rare" if r["idx"] < 30 else "common"
        del r["category"]
    report = judge(audit(dataset=dataset.measure(rows, 0.9)))
    assert find(report, "difficulty").status == "warn" and "under 5%: rare" in find(report, "difficulty").message
    assert find(report, "category").status == "skip"
    assert report.passed


def test_non_deterministic_load_fails():
    report = judge(audit(deterministic_load=False, load_difference=17))
    f = find(report, "deterministic load")
    assert f.status == "fail" and "position 17" in f.message
    assert not report.passed


def test_load_time_is_reported_against_its_limit():
    report = judge(audit(load_seconds=0.4))
    assert find(report, "load time").status == "pass" and "limit 60 s" in find(report, "load time").message


def test_a_load_past_its_limit_fails_the_gates_and_says_where_it_hung():
    hung = "the taskset's load() in the audit stage (checks.max_load_seconds) did not return within 2 s"
    report = judge({"time_limits": [hung], "modules": []})
    assert find(report, "time limits").status == "fail" and hung in find(report, "time limits").message
    assert find(report, "load time").status == "fail" and not report.passed


def test_a_reward_past_its_limit_fails_the_gates():
    hung = "reward 'correct' on task idx 3 in the audit stage did not return within 2 s"
    report = judge(audit(time_limits=[hung]))
    assert find(report, "time limits").status == "fail" and "task idx 3" in find(report, "time limits").message
    assert not report.passed


def test_empty_audit_does_not_crash():
    report = judge({"dataset": dataset.measure([], 0.9), "modules": [], "deterministic_load": True})
    assert find(report, "dataset size").status == "fail"
    assert not report.passed


def test_gate_report():
    report = Gates()
    assert report.passed and report.failed == []
    report.add("a", "pass", "fine")
    report.add("b", "warn", "hm")
    report.add("c", "skip", "n/a")
    assert report.passed
    report.add("d", "fail", "broken", extra=[1, 2])
    report.add("e", "fail", "also broken")
    assert not report.passed
    assert report.failed == ["d: broken", "e: also broken"]
    assert report.findings[3] == GateFinding(name="d", status="fail", message="broken", data={"extra": [1, 2]})
    out = json.loads(json.dumps(report.report().model_dump(mode="json")))
    assert out["passed"] is False and out["failed"] == ["d: broken", "e: also broken"]
    assert [f["name"] for f in out["findings"]] == ["a", "b", "c", "d", "e"]
    assert out["findings"][3] == {"name": "d", "status": "fail", "message": "broken", "data": {"extra": [1, 2]}}
    assert set(out) == {"passed", "failed", "mode", "seconds", "findings", "probes", "matrix"}


def test_full_report_is_json():
    report = judge(audit(records=probe_records(exploits={"garbage": 0.5})))
    out = json.loads(json.dumps(report.report().model_dump(mode="json")))
    assert out["passed"] is False and any(f.startswith("probe garbage") for f in out["failed"])
    assert out["probes"]["garbage"]["mean"] == 0.5 and out["probes"]["garbage"]["of_oracle"] == 0.5
    assert not math.isnan(out["probes"]["oracle"]["mean"])


# --- the CLI: `autoenv probe` / `autoenv check` in a child process --------------------------

GATES_PASSED = re.compile(r"(?m)^gates:\s+passed$")
GATES_FAILED = re.compile(r"(?m)^gates:\s+failed$")


def failed_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("FAILED ")]


def scratch_outputs(root: Path) -> list[Path]:
    """The gates/ folder of each `autoenv check` / `probe` run, oldest first."""
    scratch = root / "outputs" / "scratch"
    return sorted(p / "gates" for p in scratch.iterdir()) if scratch.is_dir() else []


SIGNATURE = "    async def correct(self, trace: vf.Trace) -> float:\n"


def edit_taskset(root: Path, edit) -> None:
    path = root / "candidate" / "candidate_env" / "taskset.py"
    before = path.read_text()
    after = edit(before)
    assert after != before, "the edit did not apply"
    path.write_text(after)


@pytest.mark.e2e
@pytest.mark.parametrize("hack, finding", [
    ("hack-substring", "probe kitchen-sink"),
    ("hack-format", "probe wrong-answer"),
    ("hack-length", "probe padding"),
    ("hack-repeats", "exact duplicates"),
    ("hack-leak", "probe prompt-copy"),
    ("hack-lastline", "probe last-line"),
    ("hack-injection", "probe injection"),
])
def test_probe_catches_each_planted_hack(run_repo, hack, finding):
    root = run_repo(hack)
    narrow = hack == "hack-format"  # read at 80 columns: one block per cause, every line wrapped
    result = autoenv("probe", cwd=root, env={"COLUMNS": "80"} if narrow else None)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert GATES_FAILED.search(result.stdout), result.stdout[-2000:]
    failed = failed_lines(result.stdout)
    if narrow:
        block = result.stdout[result.stdout.index("FAILED "):]
        assert max(map(len, block.splitlines())) <= 80, block
        assert block.count("  fix: ") == 1 and block.count("cause 1 of") <= 1, block  # one cause, its fix once
        assert "`formatted`" in block and len(failed) >= 3, block
    assert any(line.startswith(f"FAILED {finding}: ") for line in failed), failed
    if hack == "hack-length":
        assert any(line.startswith("FAILED probe garbage: ") for line in failed), failed
        assert any("harvested thorough" in line for line in failed), failed
    if hack == "hack-repeats":
        assert not any(line.startswith("FAILED probe") for line in failed), failed  # only the dataset is wrong
    if hack in ("hack-leak", "hack-lastline"):  # each new hack: exactly the probe meant for it
        assert [line.split(":")[0] for line in failed] == [f"FAILED {finding}"], failed
    if hack == "hack-injection":  # a grader that believes claims pays the self-report family's claims too, and a
        # score the reward search writes into the reply itself ("Score:10/10", from the grader's own instructions)
        assert sorted(line.split(":")[0] for line in failed) == sorted([
            "FAILED content-free", "FAILED probe injection", "FAILED probe self-report", "FAILED probe search"]), failed
    (out,) = scratch_outputs(root)
    gates = json.loads((out / "gates.json").read_text())
    assert gates["passed"] is False and any(f.startswith(finding) for f in gates["failed"])
    assert ledger(root) == []


@pytest.mark.e2e
def test_clean_example_passes_probe_and_check(run_repo):
    root = run_repo("arithmetic")
    result = autoenv("probe", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert GATES_PASSED.search(result.stdout) and failed_lines(result.stdout) == []
    assert re.search(r"(?m)^mode:\s+in-process$", result.stdout)
    (out,) = scratch_outputs(root)
    assert out.parent.name.endswith("-probe")
    a = json.loads((out / "audit.json").read_text())
    assert a["has_oracle"] is True and a["dataset"]["size"] == 1000
    assert a["probe_names"] == ["oracle", *[p for p in EXPLOITS if p not in NEEDS_TOOLS]]
    gates = json.loads((out / "gates.json").read_text())
    tested = [f for f in gates["findings"] if f["name"] == "probes tested"]
    assert tested[0]["status"] == "pass" and tested[0]["data"]["untested"] == {}
    inapplicable = {"structural", "stub", "grader-attack", "stall"}  # no options, no code, one turn: n/a, no column
    assert gates["matrix"]["harvests"] == [] and set(gates["matrix"]["scores"]) == set(a["probe_names"]) - inapplicable
    assert {f["name"]: f["status"] for f in gates["findings"]}["content-free"] == "pass"
    check = autoenv("check", cwd=root)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert GATES_PASSED.search(check.stdout)
    out = [p for p in scratch_outputs(root) if p.parent.name.endswith("-check")]
    assert len(out) == 1
    assert "probes" not in json.loads((out[0] / "audit.json").read_text())  # check plays no probes


@pytest.mark.e2e
def test_candidate_without_oracle_gets_the_answer_field_oracle_and_every_probe(run_repo):
    root = run_repo("arithmetic")
    edit_taskset(root, lambda t: re.sub(r"    def oracle\(self.*?\n\n\n", "\n\n", t, flags=re.S))
    commit_all(root, "no oracle hook")
    result = autoenv("probe", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert GATES_PASSED.search(result.stdout)
    (out,) = scratch_outputs(root)
    a = json.loads((out / "audit.json").read_text())
    assert a["has_oracle"] is False and a["oracle_source"] == "inferred:answer-tag"
    assert a["oracle_formats_tried"]["answer-tag"] == 1.0 and a["oracle_formats_tried"]["bare"] == 0.0
    assert a["probe_names"] == ["oracle", *[p for p in EXPLOITS if p not in NEEDS_TOOLS]]
    gates = json.loads((out / "gates.json").read_text())
    oracle = [f for f in gates["findings"] if f["name"] == "oracle"]
    assert oracle[0]["status"] == "pass" and "inferred from the tasks' `answer` field" in oracle[0]["message"]
    for name in ("wrong-answer", "kitchen-sink", "padding", "injection"):
        assert gates["probes"][name]["scored"] == a["probe_tasks"], name  # played and scored, not skipped
    assert [f["status"] for f in gates["findings"] if f["name"] == "probes tested"] == ["pass"]


@pytest.mark.e2e
def test_tool_candidate_without_oracle_plays_the_answer_field_oracle_through_rollouts(run_repo):
    """No oracle hook on a tools candidate: the answer field, in the format its reward accepts, is played as
    the final reply through real rollouts, so the probes built from it are tested (5 of 13 before)."""
    root = run_repo("shopping")
    edit_taskset(root, lambda t: re.sub(r"    def oracle\(self.*?\n\n\n", "\n\n", t, flags=re.S))
    commit_all(root, "no oracle hook")
    result = autoenv("probe", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (out,) = scratch_outputs(root)
    gates = json.loads((out / "gates.json").read_text())
    by_name = {f["name"]: f for f in gates["findings"]}
    assert by_name["oracle"]["status"] == "pass" and "inferred from the tasks' `answer` field in the answer-tag" \
        in by_name["oracle"]["message"]
    for name in ("wrong-answer", "kitchen-sink", "first-number", "constant", "empty", "echo", "tool-spam"):
        assert by_name[f"probe {name}"]["status"] == "pass" and gates["probes"][name]["scored"] > 0, name
    assert by_name["probe prompt-copy"]["status"] == "skip" and "in-process" in by_name["probe prompt-copy"]["message"]
    tested = by_name["probes tested"]
    assert tested["status"] == "warn" and "coverage" not in tested["data"]
    assert tested["message"].startswith("22 of 23 exploit probes tested; not tested: prompt-copy"), \
        tested["message"]  # it scores dozens of spans per task; field-copy's fields are tried through rollouts
    assert by_name["probe field-copy"]["status"] == "pass" and gates["probes"]["field-copy"]["scored"] > 0


# `correct` breaks on answers ending in 0 or 5 (several of the 30 sampled tasks; none of them
# ends in 7, so a reward failing only there would slip past the sample).
@pytest.mark.e2e
@pytest.mark.parametrize("broken, message", [
    ("raise ValueError('planted reward failure')", "ValueError: planted reward failure"),
    ("return float('nan')", "reward 'correct' returned nan, not a finite number"),
])
def test_a_broken_reward_fails_the_gates(run_repo, broken, message):
    root = run_repo("arithmetic")
    edit_taskset(root, lambda t: t.replace(SIGNATURE, SIGNATURE + "        if self.data.answer.endswith(('0', '5')):\n"
                                                                  f"            {broken}\n"))
    commit_all(root, "a reward that breaks on some tasks")
    result = autoenv("probe", cwd=root)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert GATES_FAILED.search(result.stdout)
    (line,) = [l for l in failed_lines(result.stdout) if l.startswith("FAILED reward errors: ")]
    assert re.search(r"task \d+ \(oracle\): " + re.escape(message), line), line
    (out,) = scratch_outputs(root)
    a = json.loads((out / "audit.json").read_text())
    broken_idx = {r["idx"] for r in a["probes"] if r["probe"] == "oracle"
                  and (r.get("error") or any(v != v for v in (r.get("components") or {}).values()))}
    named = {int(i) for i in re.findall(r"task (\d+) \(", line)}
    assert named and named <= broken_idx


@pytest.mark.e2e
def test_oracle_hook_that_always_raises_is_reported_not_a_crash(run_repo):
    root = run_repo("arithmetic")
    edit_taskset(root, lambda t: t.replace('        return f"<answer>{self.data.answer}</answer>"',
                                           "        raise RuntimeError('planted oracle failure')"))
    commit_all(root, "oracle always raises")
    result = autoenv("probe", cwd=root)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 1 and GATES_FAILED.search(result.stdout)
    assert any("planted oracle failure" in line for line in failed_lines(result.stdout))


@pytest.mark.e2e
def test_check_runs_on_a_dirty_tree_and_records_nothing(run_repo):
    root = run_repo("arithmetic")
    pyproject = root / "candidate" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('tags = ["math"', 'tags = ["uncommitted-tag", "math"'))
    (root / "candidate" / "notes.txt").write_text("untracked\n")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert "pyproject.toml" in status and "notes.txt" in status
    result = autoenv("check", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert GATES_PASSED.search(result.stdout)
    assert "uncommitted-tag" in result.stdout  # the tree on disk was checked, not HEAD
    assert not (root / "feedback_log.jsonl").exists() and ledger(root) == []
    assert not (root / "feedback").exists()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout == status
    # and a dirty breakage is seen too
    (root / "candidate" / "README.md").write_text("# short\n")
    broken = autoenv("check", cwd=root)
    assert broken.returncode == 1 and any(l.startswith("FAILED readme: ") for l in failed_lines(broken.stdout))
    assert not (root / "feedback_log.jsonl").exists()
