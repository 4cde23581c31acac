"""autoenv/pipeline.py in-process: the verdict and record stages on a real git repository, no worker."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from autoenv import display
from autoenv.cli import print_result
from autoenv.config import load_config
from autoenv.gitrepo import Repo
from autoenv.ledger import read_entries, verify_chain
from autoenv.paths import spec_problem
from autoenv.pipeline import Context, EvalOptions, Outcome, judge, note_text, preflight, record, verdict
from autoenv.record import GateFinding, GateReport
from autoenv.errors import AutoEnvError
from autoenv.stats import model_stats
from autoenv.traces import Rollout
from conftest import commit_all


def rollouts(successes: list[int], r: int = 2) -> list[Rollout]:
    return [Rollout(trace_id="", task_key=f"t{i}", idx=i, outcome="ok", reward=float(j < k),
                    components={"correct": float(j < k)}, weights={"correct": 1.0})
            for i, k in enumerate(successes) for j in range(r)]


@pytest.fixture
def ctx(run_repo) -> Context:
    root = run_repo("arithmetic")
    repo = Repo(root)
    config = load_config(root / "config.toml")
    head = repo.head()
    return Context(config=config, repo=repo, head=head, options=EvalOptions(cwd=root, description="try"),
                   run_id="20260101T000000000000Z", out=config.path("outputs") / head.commit)


def stats():
    return {"target": model_stats("small", rollouts([1, 0, 2, 1, 0, 1]), 1.0),
            "strong": model_stats("big", rollouts([2, 2, 2, 2, 2, 2]), 1.0)}


def test_record_writes_the_feedback_the_ledger_line_and_the_note(ctx):
    entry = record(ctx, verdict(ctx, Outcome(stats=stats())))
    root = ctx.config.root
    assert entry.verdict.verdict == "keep" and "first successful" in entry.verdict.reason
    assert read_entries(ctx.config.path("log_file")) == [entry]
    assert verify_chain(ctx.config.path("log_file")) == []
    feedback = (root / "feedback" / f"{ctx.head.commit}.md").read_text()
    assert "**keep**" in feedback and "| target (wanted 0.2–0.7) | small |" in feedback
    note = subprocess.run(["git", "notes", "--ref", "autoenv", "show", ctx.head.commit], cwd=root,
                          capture_output=True, text=True, check=True).stdout
    assert note.strip() == note_text(entry).strip() and note.startswith("autoenv: keep | target 0.4167 (small)")
    assert entry.budget is not None and entry.budget.examples == ctx.config.budget.examples
    assert entry.strong_model.mean == 1.0 and entry.strong_model.solvable is True


def test_the_second_record_is_compared_with_the_first(ctx):
    first = record(ctx, verdict(ctx, Outcome(stats=stats())))
    second = record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert second.verdict.compared_to == first.commit
    assert second.verdict.verdict == "inconclusive"
    assert second.prev_hash != first.prev_hash


def test_a_crash_is_recorded_with_its_stage_and_error(ctx):
    error = AutoEnvError("the worker died", where="outputs/x", fix="read the log")
    entry = record(ctx, verdict(ctx, Outcome(error=error, failed_stage="rollouts")))
    assert entry.verdict.verdict == "crash" and entry.rl_readiness is None
    raw = json.loads(ctx.config.path("log_file").read_text())
    assert raw["failed_stage"] == "rollouts" and "the worker died" in raw["error"]
    assert "## The evaluation failed" in (ctx.config.root / "feedback" / f"{ctx.head.commit}.md").read_text()


def test_failed_gates_discard_and_are_named(ctx):
    ctx.gates = GateReport(findings=[GateFinding(name="probe echo", status="fail", message="mean 0.9")])
    entry = record(ctx, verdict(ctx, Outcome()))
    assert entry.verdict.verdict == "discard" and "probe echo: mean 0.9" in entry.verdict.reason
    assert "gates failed: 1" in note_text(entry)


@pytest.mark.parametrize("problem", ["missing", "empty"])
def test_a_missing_or_empty_spec_is_warned_in_the_summary_the_feedback_and_the_entry(run_repo, problem):
    root = run_repo("arithmetic")
    if problem == "missing":
        (root / "spec.md").unlink()
    else:
        (root / "spec.md").write_text("\n  \n")
    commit_all(root, f"spec.md {problem}")
    with display.console.capture() as captured:
        ctx = preflight(EvalOptions(cwd=root, offline=True))
        entry = record(ctx, judge(ctx, verdict(ctx, Outcome(stats=stats()))))
        print_result(entry)
    printed = captured.get()
    warning = f"spec.md is {problem}: the judge has no specification to check the environment against"
    assert f"! {warning}" in printed  # in the preflight lines
    assert re.search(rf"(?m)^warnings:\s+{warning}", printed)  # and in the result block
    assert entry.warnings[0].startswith(warning) and len(entry.warnings) == 1
    assert read_entries(ctx.config.path("log_file"))[0].warnings == entry.warnings
    feedback = (root / "feedback" / f"{ctx.head.commit}.md").read_text()
    assert f"- **warning**: {warning}" in feedback.split("## ")[0]  # at the top, under the verdict
    (stamp,) = (ctx.out / "judge").iterdir()
    assert not (stamp / "workspace" / "spec.md").exists() if problem == "missing" else \
        (stamp / "workspace" / "spec.md").read_text() == "\n  \n"


def test_a_written_spec_gives_no_warning(run_repo):
    ctx = preflight(EvalOptions(cwd=run_repo("arithmetic"), offline=True))
    assert ctx.warnings == [] and record(ctx, verdict(ctx, Outcome(stats=stats()))).warnings == []
    assert "warning" not in (ctx.config.root / "feedback" / f"{ctx.head.commit}.md").read_text()


def test_spec_problem(tmp_path):
    assert spec_problem(tmp_path) == "missing"
    (tmp_path / "spec.md").write_text("\t\n")
    assert spec_problem(tmp_path) == "empty"
    (tmp_path / "spec.md").write_text("# Spec\n")
    assert spec_problem(tmp_path) is None
    (tmp_path / "real.md").write_text("# Spec\n")
    (tmp_path / "spec.md").unlink()
    (tmp_path / "spec.md").symlink_to(tmp_path / "real.md")
    assert spec_problem(tmp_path).startswith("not a regular file")  # the judge would not be given it
