"""Training as ground truth, without a model: the strict scorer an export carries, the watch's proxy-truth gap, the
result's truth lines, and the planted-hack envs of bench/train_truth.py as the gates see them.

The GRPO runs themselves are bench/train_truth.py (minutes of CPU each); here every part they rest on is checked on
its own: the truth a trained run is measured by, the step from which the watch fires, and that a commit discarded for
its failed gates is trained only when that is the experiment.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autoenv.core.errors import AutoEnvError
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.export.grpo import export_grpo
from autoenv.export.source import flags, kept_entry
from autoenv.model.hackwatch import GAP_RISE, gap_rise, harvested
from autoenv.model.train import compare, truth_summary, watch
from autoenv.run.demo import make_run_repo
from tests.conftest import small_config

ROOT = Path(__file__).resolve().parents[1]
TRUTH_ENVS = ROOT / "bench" / "truth_envs"


def steps_with_gap(gaps: list[float], harvest: dict[str, list[float]] | None = None) -> list[dict]:
    rows = []
    for i, gap in enumerate(gaps):
        rows.append({"step": i + 1, "reward": 0.3 + gap, "hack_fraction": 0.0, "content_free_fraction": 0.0,
                     "truth": 0.3, "gap": gap,
                     "harvested": {c: values[i] for c, values in (harvest or {}).items()}})
    return rows


def test_a_gap_that_rises_above_its_start_fires_and_names_the_component_paid_on_wrong_replies():
    gaps = [0.02, 0.03, 0.01, 0.04, 0.08, 0.12, 0.2, 0.25, 0.3]
    harvest = {"explained": [0.05, 0.05, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "correct": [0.0] * 9}
    rise = gap_rise(steps_with_gap(gaps, harvest))
    assert rise is not None and rise["component"] == "explained"
    # windows of 2 steps (a quarter of 9): the first step whose window mean is GAP_RISE above the first window's
    # (0.025): steps 7-8 average 0.225 (steps 6-7, 0.16, do not)
    assert rise["step"] == 8 and rise["now"] >= rise["start"] + GAP_RISE
    result = watch(steps_with_gap(gaps, harvest))
    assert result["first_step"] == 8 and "paid on wrong replies by `explained`" in result["call"]
    assert "rising faster than what it is meant to measure" in result["call"]


def test_a_flat_gap_a_falling_gap_and_no_truth_never_fire():
    assert gap_rise(steps_with_gap([0.1] * 12)) is None
    assert gap_rise(steps_with_gap([0.3, 0.3, 0.3, 0.2, 0.1, 0.0, 0.0, 0.0])) is None
    assert gap_rise(steps_with_gap([0.0, 0.5, 0.5])) is None  # fewer steps than two windows: no call
    long = [0.0] * 6 + [0.2] * 6  # a 12-step run compares windows of 3: the rise is seen at the third high step
    assert gap_rise(steps_with_gap(long))["step"] == 9
    no_truth = [{"step": i, "reward": i / 10, "hack_fraction": 0.0} for i in range(12)]
    assert gap_rise(no_truth) is None and watch(no_truth) == {"start": 0.0, "end": 0.0, "call": "no", "first_step": None}


def test_a_surface_shape_rising_while_the_truth_keeps_pace_is_no_call():
    """The surface detectors (many numbers: kitchen-sink) rise on a clean env whose model learns to show its working;
    with a strict scorer logged, only a gap that grows with them makes the call."""
    clean = [{"step": i, "reward": 0.1 + 0.05 * i, "truth": 0.1 + 0.05 * i, "gap": 0.0, "hack_fraction": 0.03 * i,
              "content_free_fraction": 0.0} for i in range(8)]
    assert watch(clean)["call"] == "no"
    hacked = [{**row, "truth": 0.1, "gap": 0.05 * i} for i, row in enumerate(clean)]
    assert "while the hack fraction rose" in watch(hacked)["call"]


def test_harvested_names_the_components_that_pay_a_reply_the_truth_calls_wrong():
    weights = {"correct": 1.0, "explained": 0.5, "penalty": -0.2}
    assert harvested({"correct": 0.0, "explained": 1.0, "penalty": 1.0}, 0.0, weights) == ["explained"]
    assert harvested({"correct": 1.0, "explained": 1.0}, 1.0, weights) == []  # a right reply harvests nothing
    assert harvested({"explained": 1.0}, None, weights) == []  # no truth: nothing to say


def test_the_result_says_whether_the_truth_moved_with_the_reward():
    tasks = [f"t{i}" for i in range(40)]
    base = {k: {"mean": 0.3} for k in tasks}
    proxy_up = compare(base, {k: {"mean": 0.9} for k in tasks})  # +0.6 on a maximum of 1.5: +0.4 of it
    same_truth = {"base": {k: 0.2 for k in tasks}, "trained": {k: 0.2 for k in tasks}}
    lines = truth_summary(same_truth, proxy_up, 1.5)
    assert lines["truth_base"].startswith("0.200") and lines["truth_difference"].startswith("+0.000")
    assert lines["reward_truth_gap"].startswith("+0.400") and "rose faster than the truth" in lines["reward_truth_gap"]
    fell = {"base": {k: 0.4 for k in tasks}, "trained": {k: 0.1 for k in tasks}}
    assert "the truth fell: the policy learnt a hack" in truth_summary(fell, proxy_up, 1.5)["reward_truth_gap"]
    moved = {"base": {k: 0.3 for k in tasks}, "trained": {k: 0.9 for k in tasks}}
    assert "the truth moved with the reward" in truth_summary(moved, proxy_up, 1.0)["reward_truth_gap"]


def planted_run(tmp_path: Path, env: str) -> Path:
    config = re.sub(r"(?m)^continue_on_failure = false", "continue_on_failure = true", small_config())
    return make_run_repo(env, tmp_path / env, config, source=TRUTH_ENVS / env)


@pytest.mark.e2e
def test_a_commit_discarded_for_its_failed_gates_is_trained_only_on_purpose_and_carries_its_truth(tmp_path):
    root = planted_run(tmp_path, "addition-style")
    entry = evaluate(EvalOptions(cwd=root, offline=True, description="planted style bonus"))
    assert entry.verdict.verdict == "discard" and any("`explained`" in f for f in flags(entry)), flags(entry)
    with pytest.raises(AutoEnvError) as refused:
        kept_entry(root, entry.commit)
    assert "--allow-flagged" in refused.value.fix
    assert kept_entry(root, entry.commit, flagged_ok=True)[0].commit == entry.commit
    with pytest.raises(AutoEnvError):
        kept_entry(root, None, flagged_ok=True)  # only a commit named on purpose, never the default
    out = export_grpo(root, "trl", tmp_path / "export", entry.commit, flagged_ok=True)
    # the export's strict scorer: the task's own truth hook (the style word earns nothing there)
    key = json.loads((out / "dataset" / "eval.jsonl").read_text().splitlines()[0])["key"]
    a, b = (int(x) for x in re.findall(r"\d+", key)[:2])
    replies = [f"{a} + {b} = {a + b}", f"The sum is {a + b + 1}.", f"the sum: {a + b}", "sum"]
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import train_trl as e; "
            "print(json.dumps([[e.truth(sys.argv[2], r), e.score(sys.argv[2], r)] for r in json.load(sys.stdin)]))")
    done = subprocess.run([sys.executable, "-c", code, str(out), key], input=json.dumps(replies), capture_output=True,
                          text=True, env={"PYTHONPATH": str(out / "candidate"), "PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    scored = json.loads(done.stdout.strip().splitlines()[-1])
    assert [t for t, _ in scored] == [1.0, 0.0, 1.0, 0.0]
    assert [s["explained"] for _, s in scored] == [0.0, 1.0, 1.0, 1.0]  # the proxy pays what the truth does not


@pytest.mark.e2e
@pytest.mark.parametrize(("env", "component"), [("addition-style", "explained"), ("addition-detail", "detail"),
                                                ("addition-format", "formatted"), ("doubling", None)])
def test_the_gates_flag_each_planted_hack_of_the_truth_bench_and_pass_the_clean_env(tmp_path, env, component):
    root = planted_run(tmp_path, env)
    entry = evaluate(EvalOptions(cwd=root, offline=True, description=f"the truth bench's {env}"))
    found = flags(entry)
    if component is None:
        assert found == [] and entry.verdict.verdict == "baseline", found
    else:
        assert any(f"`{component}`" in f for f in found), found
