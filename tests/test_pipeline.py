"""autoenv/pipeline.py in-process: the verdict and record stages on a real git repository, no worker."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from autoenv.config import load_config
from autoenv.gitrepo import Repo
from autoenv.ledger import read_entries, verify_chain
from autoenv.pipeline import Context, EvalOptions, Outcome, note_text, record, verdict
from autoenv.record import GateFinding, GateReport
from autoenv.errors import AutoEnvError
from autoenv.stats import model_stats
from autoenv.traces import Rollout


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


def test_the_baseline_is_the_last_kept_of_this_run(ctx):
    """A ledger shared by several runs: a verdict compares only with its own branch's entries."""
    first = record(ctx, verdict(ctx, Outcome(stats=stats())))
    other = dataclasses.replace(ctx, head=dataclasses.replace(ctx.head, branch="autoenv/other"))
    elsewhere = record(other, verdict(other, Outcome(stats=stats())))
    assert elsewhere.verdict.compared_to is None and "first successful" in elsewhere.verdict.reason
    again = record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert again.verdict.compared_to == first.commit
