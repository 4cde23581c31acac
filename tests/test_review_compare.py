"""`autoenv compare`: paired differences on the tasks two evaluations share, and its bad input."""

from __future__ import annotations

import random
import re
import shutil

import pytest
from review_run import copy_run, png_size, review, review_run

from autoenv.core.record import TaskRow
from autoenv.core.traces import Rollout
from autoenv.review.compare import Side, TaskScores, compare


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return review_run(tmp_path_factory.getbasetemp() / "review")


def rollouts(per_task: dict[str, list[float]], difficulty=lambda key: "easy") -> list[Rollout]:
    return [Rollout(trace_id=f"{key}-{i}", task_key=key, idx=int(key[1:]), outcome="ok", reward=r,
                    components={"correct": r, "format": 1.0}, weights={"correct": 1.0, "format": 0.0},
                    difficulty=difficulty(key)) for key, rewards in per_task.items() for i, r in enumerate(rewards)]


def test_a_uniform_gain_is_reliable_and_flips_are_counted():
    base = {f"t{i}": [0.0, 0.5] if i % 2 else [0.0, 0.0] for i in range(12)}
    better = {k: [r + 0.5 for r in v] for k, v in base.items()}
    hard = lambda key: "hard" if int(key[1:]) < 4 else "easy"
    a = Side.from_rollouts("A", "m", rollouts(base, hard), solve_threshold=1.0)
    b = Side.from_rollouts("B", "m", rollouts(better | {"t99": [1.0, 1.0]}, hard), solve_threshold=1.0)
    c = compare(a, b, solve_threshold=1.0)
    assert c.overall is not None and c.overall.tasks == 12 and (c.only_a, c.only_b) == (0, 1)
    assert c.overall.delta == pytest.approx(0.5) and c.overall.low == pytest.approx(0.5) and c.overall.direction == 1
    assert [(d.name, d.tasks) for d in c.by_difficulty] == [("easy", 8), ("hard", 4)]
    correct, fmt = c.by_component
    assert (correct.name, correct.delta, fmt.name, fmt.delta) == ("correct", pytest.approx(0.5), "format", 0)
    assert fmt.direction == 0
    assert sorted(p.idx for p in c.gained) == [1, 3, 5, 7, 9, 11] and c.lost == []  # 0.5 -> 1.0 reaches 1


def test_noise_is_not_a_difference():
    rng = random.Random(3)
    tasks = {f"t{i}": [float(rng.random() < 0.5) for _ in range(4)] for i in range(20)}
    again = {k: [float(rng.random() < 0.5) for _ in range(4)] for k in tasks}
    c = compare(Side.from_rollouts("A", "m", rollouts(tasks), 1.0), Side.from_rollouts("B", "m", rollouts(again), 1.0),
                solve_threshold=1.0)
    assert c.overall is not None and c.overall.low < 0 < c.overall.high and c.overall.direction == 0


def test_evaluations_that_share_no_task_are_compared_unpaired_as_the_verdict_does():
    old = {f"t{i}": [0.0, 0.5] for i in range(12)}
    new = {f"t{i}": [1.0, 0.5] for i in range(100, 112)}  # a new dataset: no task in common
    c = compare(Side.from_rollouts("A", "m", rollouts(old), 1.0), Side.from_rollouts("B", "m", rollouts(new), 1.0),
                solve_threshold=1.0, min_tasks=5)
    assert c.overall is None and c.unpaired is not None and c.unpaired.tasks == 12
    assert c.unpaired.delta == pytest.approx(0.5) and c.unpaired.direction == 1
    small = compare(Side.from_rollouts("A", "m", rollouts(old), 1.0), Side.from_rollouts("B", "m", rollouts(new), 1.0),
                    solve_threshold=1.0, min_tasks=20)
    assert small.unpaired is None  # too few tasks on each side to compare at all


def test_one_task_has_no_interval():
    a = Side("A", "m", {"k": TaskScores(sum=0.0, n=2)})
    b = Side("B", "m", {"k": TaskScores(sum=2.0, n=2)})
    c = compare(a, b, solve_threshold=1.0)
    assert c.overall is not None and c.overall.delta == 1.0 and c.overall.direction == 0


def test_ledger_rows_stand_in_for_missing_traces():
    a = Side.from_rows("A", "m", {"x": TaskRow(sum=1.0, n=2, disagree=True), "y": TaskRow(sum=0.0, n=2, disagree=False)})
    b = Side.from_rows("B", "m", {"x": TaskRow(sum=2.0, n=2, disagree=False), "z": TaskRow(sum=1.0, n=2, disagree=True)})
    c = compare(a, b, solve_threshold=1.0)
    assert c.overall is not None and c.overall.tasks == 1 and c.overall.delta == 0.5
    assert c.by_difficulty == [] and c.by_component == [] and c.gained == [] and (c.only_a, c.only_b) == (1, 1)


@pytest.mark.slow
def test_two_commits(run, capsys):
    first, keep = run.commits["real"], run.commits["keep"]
    code, out, _ = review(capsys, run.root, "compare", first[:8], keep[:8])
    assert code == 0
    assert out.startswith(f"A: {first[:8]} target (noisy-oracle:0.45)\nB: {keep[:8]} target (noisy-oracle:0.45)")
    assert "on 4 tasks both saw (A only: 0, B only: 0)" in out
    lines = {line.split("  ")[0]: line for line in out.splitlines()}
    assert lines["all tasks"].split()[2:5] == ["4", "0.500", "0.500"]
    assert "+0.000" in lines["all tasks"] and "within noise" in lines["all tasks"]
    assert "too few shared tasks to compare" in lines["difficulty easy"] and "-0.500" in lines["difficulty easy"]
    assert "[" not in lines["difficulty easy"]  # no interval over one task
    assert "component correct" in lines
    # task idx 37 went from 0/2 to 1/2 solved rollouts; idx 6 from 2/2 to 1/2 (still solved once)
    assert "1 newly solved in B (idx 37); 0 solved in A only" in out
    png = run.root / "outputs" / "review" / f"compare-{first[:8]}-{keep[:8]}-target.png"
    assert f"plot: outputs/review/{png.name}" in out and png_size(png) == (1200, 560)
    code, out, _ = review(capsys, run.root, "compare", first[:8], keep[:8], "--role", "strong")
    assert code == 0 and "B: " + keep[:8] + " strong (oracle)" in out and "+0.000 [+0.000, +0.000]" in out


def test_too_few_shared_tasks_print_no_interval(run, tmp_path, capsys):
    copy = copy_run(run, tmp_path / "copy")
    config = copy.root / "config.toml"
    config.write_text(re.sub(r"(?m)^min_tasks = .*", "min_tasks = 10", config.read_text()))
    code, out, _ = review(capsys, copy.root, "compare", run.commits["real"][:8], run.commits["keep"][:8])
    assert code == 0 and "too few shared tasks to compare: 4 task(s) both saw, fewer than stats.min_tasks = 10" in out
    assert "+0.000 with no interval" in out and "[+0.000, +0.000]" not in out and "within noise" not in out


def test_missing_traces_fall_back_to_the_ledger(run, tmp_path, capsys):
    copy = copy_run(run, tmp_path / "copy")
    shutil.rmtree(copy.root / "outputs" / run.commits["discard"] / "target")
    code, out, _ = review(capsys, copy.root, "compare", run.commits["real"], run.commits["discard"])
    assert code == 0 and "from the ledger's per-task rows (traces missing)" in out
    # the traces that are left still tell each task's difficulty; components need both sides' traces
    assert "difficulty medium      2   0.250   0.000" in out and "component" not in out


@pytest.mark.parametrize("args, message", [
    (["compare", "HEAD"], "compare takes two evaluated commits, got 1"),
    (["compare", "HEAD", "HEAD~1", "--models", "target", "strong"], "got several commits"),
    (["compare", "{crash}", "HEAD"], "has no target scores to compare (verdict crash)"),
    (["compare", "HEAD", "--models", "target", "no-such-policy", "--offline"], "is not a scripted policy"),
    (["compare", "HEAD", "--models", "target", "x@ftp://host"], "is not an http(s) URL"),
    (["compare", "{real}", "--models", "target", "oracle", "--offline"], "is not the candidate evaluated at"),
])
def test_bad_input_says_what_to_do(run, capsys, args, message):
    args = [a.format(**run.commits) for a in args]
    code, _, err = review(capsys, run.root, *args)
    assert code == 2 and message in err and "fix:" in err


def test_a_model_endpoint_needs_its_key(run, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, _, err = review(capsys, run.root, "compare", "--models", "target", "gpt-4.1-nano")
    assert code == 2 and "gpt-4.1-nano needs an API key in $OPENAI_API_KEY" in err and "--offline" in err
