"""The review commands on a run whose first evaluation is a real offline one (slow).

The run's first entry went through everything (install, gates, verifiers rollouts in a
worker process, the offline judge, the ledger, the note, the plot); then `compare
--models` runs a second model through the same worker on the same tasks and seed.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from review_run import BRANCH, png_size, review, review_run

from autoenv.review.transcripts import evaluation_transcripts

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return review_run(tmp_path_factory.getbasetemp() / "review", real=True)


def test_the_real_evaluation_in_log_show_and_plot(run, capsys):
    real = run.commits["real"]
    rows = json.loads(review(capsys, run.root, "log", "--json")[1])
    assert rows[0]["commit"] == real and rows[0]["verdict"] == "baseline" and rows[0]["gates"] == "pass"
    assert rows[0]["target"]["model"] == "noisy-oracle:0.45" and len(rows) == 7
    code, out, _ = review(capsys, run.root, "show", real[:8])
    assert code == 0
    for part in ("Checks", "Probes", "oracle", "timings: install", "rollouts", "Judge (offline)", "Per difficulty"):
        assert part in out, part
    feedback = (run.root / "feedback" / f"{real}.md").read_text()
    assert f"[plot.png](../outputs/{real}/plot.png)" in feedback
    assert png_size(run.root / "outputs" / real / "plot.png") == (1200, 760)


def test_a_real_rollout_as_a_transcript(run, capsys):
    transcripts = evaluation_transcripts(run.root / "outputs" / run.commits["real"])
    assert len(transcripts) == 2 * 4 * 2
    first = transcripts[0]
    code, out, _ = review(capsys, run.root, "show", run.commits["real"], "--rollout", first.id)
    assert code == 0 and out.startswith(f"Rollout {first.id} · {first.role} · ")
    assert re.search(r"(?m)^user ─+$", out) and "<answer>" in out and "reward components: correct" in out


def test_compare_a_second_model_on_the_same_tasks(run, capsys):
    real = run.commits["real"]
    subprocess.run(["git", "checkout", "-q", real], cwd=run.root, check=True)  # the evaluated candidate
    try:
        code, out, err = review(capsys, run.root, "compare", "--tag", "demo-arithmetic", "--models", "target",
                                "oracle", "--offline")
        assert code == 0, err
        assert f"A: {real[:8]} target (noisy-oracle:0.45)\nB: {real[:8]} oracle\n" in out
        assert "on 4 tasks both saw (A only: 0, B only: 0)" in out
        all_tasks = next(line for line in out.splitlines() if line.startswith("all tasks"))
        assert all_tasks.split()[4] == "1.000"  # the oracle solves every task
        ran = run.root / "outputs" / real / "models" / "oracle"
        assert json.loads((ran / "tasks.json").read_text()) == run.tasks
        assert len((ran / "target" / "traces.jsonl").read_text().splitlines()) == 4 * 2
        png = run.root / "outputs" / "review" / f"compare-{real[:8]}-target-oracle.png"
        assert png_size(png) == (1200, 560)
        code, out, _ = review(capsys, run.root, "compare", "--tag", "demo-arithmetic", "--models", "target",
                              "oracle", "--offline")
        assert code == 0 and "reusing oracle's rollouts" in out
    finally:
        subprocess.run(["git", "checkout", "-q", BRANCH], cwd=run.root, check=True)
