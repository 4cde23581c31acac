"""autoenv/evaluation/recheck.py: every keep and baseline decided again from what its entry stores.

The entries are recorded in-process by the real verdict() and record() (chain and git note intact),
as the harness itself recorded a forged `keep` once: a `.pth` in its venv wrapped the decision.
"""

from __future__ import annotations

import re

import pytest
from conftest import autoenv, commit_all
from test_pipeline import stats

from autoenv.core.record import GateFinding, GateReport, Verdict
from autoenv.evaluation import decision
from autoenv.evaluation.commands import verify
from autoenv.evaluation.context import EvalOptions, Outcome
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recheck import forged
from autoenv.evaluation.recording import record
from autoenv.run.ledger import read_entries

FAILED = GateReport(findings=[GateFinding(name="probe empty", status="fail",
                                          message="the empty reply earned 0.50 (limit 0.10)")])
WEAK = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
GOOD = [1, 0, 2, 1, 0, 1, 2, 1, 0, 1, 1, 2]


def evaluate(root, target, change=None):
    """One evaluation recorded in-process with `target`'s successes; `change` rewrites its entry before recording
    (what a decision wrapped by code in the harness's interpreter did)."""
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    entry = decision.verdict(ctx, Outcome(stats=stats(target, [2] * len(target))))
    return record(ctx, change(entry) if change else entry)


def next_commit(root, i):
    (root / "candidate" / "README.md").write_text(f"iteration {i}\n")
    commit_all(root, f"iteration {i}")


@pytest.fixture
def kept_run(run_repo):
    """A run whose second evaluation is a real keep: from a target that solves nothing to one in the band."""
    root = run_repo("arithmetic", run_base=True)
    evaluate(root, WEAK)
    next_commit(root, 1)
    entry = evaluate(root, GOOD)
    assert entry.verdict.verdict == "keep", entry.verdict
    return root


@pytest.mark.slow
def test_verdicts_the_rules_gave_are_decided_again_the_same(kept_run):
    problems, count = verify(kept_run)
    assert problems == [] and count == 2


@pytest.mark.attack
@pytest.mark.slow
def test_a_keep_with_failed_gates_recorded_by_the_harness_itself_is_named_forged(kept_run, attack_row):
    root = kept_run
    next_commit(root, 2)
    wrapped = lambda entry: entry.model_copy(update={
        "gates": FAILED, "verdict": Verdict(verdict="keep", reason="forged", compared_to=read_entries(
            root / "feedback_log.jsonl")[-1].commit)})
    evaluate(root, GOOD, wrapped)
    problems, count = verify(root)
    assert len(problems) == 1 and count == -1, problems
    assert "entry 3" in problems[0] and "says `keep`" in problems[0] and "give `discard`" in problems[0]
    assert "1 gate(s) failed" in problems[0] and "forged" in problems[0]
    said = autoenv("verify", cwd=root)
    assert said.returncode == 1 and re.search(r"ledger: +forged", said.stdout)
    attack_row("a `keep` with failed gates, appended by the harness with a valid chain and note",
               f"autoenv verify exit {said.returncode}: " + problems[0].split(":")[0])


@pytest.mark.slow
def test_a_keep_that_names_no_reference_or_a_baseline_whose_numbers_say_discard_is_named(kept_run):
    root = kept_run
    entries = read_entries(root / "feedback_log.jsonl")
    config = preflight(EvalOptions(cwd=root, offline=True)).config
    orphan = entries[1].model_copy(update={"verdict": Verdict(verdict="keep", reason="x", compared_to="f" * 40)})
    assert "names no earlier kept or baseline entry" in forged([entries[0], orphan], config)[0]
    failed_baseline = entries[0].model_copy(update={"gates": FAILED})
    assert "says `baseline` but its own stored statistics and gates give `discard`" in forged(
        [failed_baseline], config)[0]
    discard = entries[1].model_copy(update={"gates": FAILED, "verdict": Verdict(verdict="discard", reason="x")})
    assert forged([entries[0], discard], config) == []  # only keep and baseline are what a forger wants


@pytest.mark.slow
def test_the_next_evaluation_is_compared_with_the_last_genuine_keep_and_warned_of_the_forged_one(kept_run, capsys):
    root = kept_run
    honest = read_entries(root / "feedback_log.jsonl")[-1]
    next_commit(root, 2)
    evaluate(root, WEAK, lambda entry: entry.model_copy(update={
        "verdict": Verdict(verdict="keep", reason="forged", compared_to=honest.commit)}))
    next_commit(root, 3)
    capsys.readouterr()
    entry = evaluate(root, GOOD)
    assert entry.verdict.compared_to == honest.commit, entry.verdict
    assert "is no reference for this evaluation's verdict" in capsys.readouterr().out
