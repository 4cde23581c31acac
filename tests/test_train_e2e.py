"""`autoenv train` end to end on the CPU: a kept commit, two GRPO steps of the real SmolLM2-135M, the model saved,
reloaded and played, both models converted to GGUF, served and evaluated through the harness, the figures drawn."""

from __future__ import annotations

import json

import pytest

from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.model.build import build_server
from autoenv.model.trainenv import train_python
from autoenv.run.demo import make_run_repo
from tests.conftest import autoenv, small_config
from tests.local_model import local_model_or_skip

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_autoenv_train_runs_grpo_steps_and_measures_base_and_trained_on_the_held_out_tasks(tmp_path):
    local_model_or_skip(trainer=True)
    build_server()
    train_python()
    root = make_run_repo("addition", tmp_path / "run", small_config(examples=4, rollouts_per_example=2))
    kept = evaluate(EvalOptions(cwd=root, description="baseline", offline=True))
    assert kept.verdict.verdict == "baseline"
    proc = autoenv("train", "--max-steps", "2", "--rollouts", "2", "--out", str(tmp_path / "train"), cwd=root,
                   timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "train" / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["held_out_tasks"] == 4 and summary["device"] == "cpu"
    for key in ("base_mean", "trained_mean", "difference"):
        numbers = summary[key].split(": ")[0]  # the difference goes on to say what it means
        mean, low, high = (float(x) for x in numbers.replace("[", "").replace("]", "").replace(",", "").split())
        assert low <= mean <= high
    assert summary["difference"].split(": ", 1)[1].startswith(("reliably better", "reliably worse", "not distinguishable"))
    steps = [json.loads(line) for line in (tmp_path / "train" / "run" / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(0 <= s["reward"] <= 1 and "correct" in s["components"] and s["hack_fraction"] is not None
               for s in steps)
    episode = json.loads((tmp_path / "train" / "run" / "reload_episode.json").read_text())
    assert episode["reply"] is not None and set(episode["rewards"]) == {"correct"}
    for name in ("reward_curve.png", "before_after.png"):
        assert (tmp_path / "train" / "plots" / name).read_bytes()[:4] == b"\x89PNG"
    assert "base_mean:" in proc.stdout and "difference:" in proc.stdout and "hack_fraction_end:" in proc.stdout
    for name in ("base", "trained"):  # recorded like any evaluation
        (entry,) = [json.loads(line) for line in (tmp_path / "train" / f"eval-{name}" /
                                                  "feedback_log.jsonl").read_text().splitlines()]
        assert entry["stats"]["target"]["model"] == name and entry["stats"]["target"]["errors"]["timeout"] == 0
