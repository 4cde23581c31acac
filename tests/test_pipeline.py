"""autoenv/evaluation/pipeline.py in-process: the verdict and record stages on a real git repository, no worker."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess

import pytest
from conftest import commit_all

from autoenv.cli import print_result
from autoenv.core import display
from autoenv.core.config import load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.job import Job
from autoenv.core.paths import spec_problem
from autoenv.core.record import CandidateInfo, GateFinding, GateReport
from autoenv.core.traces import Rollout
from autoenv.evaluation.commands import recompute
from autoenv.evaluation.context import Context, EvalOptions, Outcome
from autoenv.evaluation.decision import verdict
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recording import judge, note_text, record
from autoenv.evaluation.stats import model_stats
from autoenv.judge.offline import offline_findings
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import read_entries, verify_chain


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


def stats(target: list[int] | None = None, strong: list[int] | None = None, models=("small", "big")):
    return {"target": model_stats(models[0], rollouts(target or [1, 0, 2, 1, 0, 1]), 1.0),
            "strong": model_stats(models[1], rollouts(strong or [2, 2, 2, 2, 2, 2]), 1.0)}


def note(ctx: Context, commit: str) -> str:
    return subprocess.run(["git", "notes", "--ref", "autoenv", "show", commit], cwd=ctx.config.root,
                          capture_output=True, text=True, check=True).stdout


def test_record_writes_the_feedback_the_ledger_line_and_the_note(ctx, capsys):
    entry = record(ctx, verdict(ctx, Outcome(stats=stats())))
    root = ctx.config.root
    assert entry.verdict.verdict == "baseline" and entry.verdict.compared_to is None
    assert entry.verdict.reason.startswith("first evaluation of the run autoenv/demo-arithmetic")
    assert "Target 0.417 [" in entry.verdict.reason  # its interval crosses an edge: not "inside"
    assert "overlapping its band 0.2–0.7 (mean inside, its interval crosses the edge)" in entry.verdict.reason
    assert "in the wanted state by the means, not yet by their intervals" in entry.verdict.reason
    assert read_entries(ctx.config.path("log_file")) == [entry]
    assert verify_chain(ctx.config.path("log_file")) == []
    feedback = (root / "feedback" / f"{ctx.head.commit}.md").read_text()
    assert "- verdict: **baseline** — first evaluation of the run" in feedback
    assert "| target (wanted 0.2–0.7) | small |" in feedback
    shown = note(ctx, ctx.head.commit)
    assert shown.startswith(note_text(entry)) and "\nentry: " in shown  # the entry's hash: autoenv verify
    assert shown.startswith("autoenv: baseline | target 0.4167 (small)")
    capsys.readouterr()
    print_result(entry)
    block = capsys.readouterr().out
    assert "\nverdict:" in block and any(line.split() == ["verdict:", "baseline"] for line in block.splitlines())
    assert entry.budget is not None and entry.budget.examples == ctx.config.budget.examples
    assert entry.strong_model.mean == 1.0 and entry.strong_model.solvable is True


def test_the_second_record_is_compared_with_the_first(ctx):
    first = record(ctx, verdict(ctx, Outcome(stats=stats())))
    second = record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert first.verdict.verdict == "baseline" and first.kept
    assert second.verdict.compared_to == first.commit
    assert second.verdict.verdict == "inconclusive"
    assert f"at the run's baseline {first.commit[:8]} on autoenv/demo-arithmetic" in second.verdict.reason
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


def test_two_runs_sharing_one_ledger_never_cite_each_other(ctx):
    """Two `autoenv/<tag>` branches of one repository, evaluated in turn into one ledger."""
    root, repo = ctx.config.root, ctx.repo
    run_a = ctx.head.branch
    assert run_a == "autoenv/demo-arithmetic"

    def evaluate(branch: str, change: str | None, target: list[int]):
        subprocess.run(["git", "checkout", "-q", branch], cwd=root, check=True)
        if change:
            (root / "candidate" / "README.md").write_text(change)
            commit_all(root, change)
        here = dataclasses.replace(ctx, head=repo.head())
        return record(here, verdict(here, Outcome(stats=stats(target))))

    a1 = evaluate(run_a, None, [0] * 18 + [1, 1])  # below the band
    subprocess.run(["git", "checkout", "-qb", "autoenv/other"], cwd=root, check=True)
    b1 = evaluate("autoenv/other", "another environment", [2] * 20)  # above the band
    a2 = evaluate(run_a, "run a, second iteration", [1] * 20)  # inside the band: reliably closer
    b2 = evaluate("autoenv/other", "run b, second iteration", [2] * 19 + [1])
    assert [e.branch for e in (a1, b1, a2, b2)] == [run_a, "autoenv/other", run_a, "autoenv/other"]
    assert len({a1.commit, b1.commit, a2.commit, b2.commit}) == 4
    assert a1.verdict.verdict == b1.verdict.verdict == "baseline"  # b1 is not judged against a1
    assert a2.verdict.compared_to == a1.commit and a2.verdict.verdict == "keep"
    assert b2.verdict.compared_to == b1.commit
    assert f"{a1.commit[:8]} on {run_a}" in a2.verdict.reason
    assert f"{b1.commit[:8]} on autoenv/other" in b2.verdict.reason
    runs = {run_a: {a1.commit, a2.commit}, "autoenv/other": {b1.commit, b2.commit}}
    for e in read_entries(ctx.config.path("log_file")):
        others = set().union(*(commits for branch, commits in runs.items() if branch != e.branch))
        assert e.verdict.compared_to not in others
        assert not any(c[:8] in e.verdict.reason for c in others), e.verdict.reason
        assert not any(c[:8] in note(ctx, e.commit) for c in others)


def test_without_an_oracle_hook_an_offline_evaluation_is_inconclusive(ctx):
    ctx.options.offline = True
    ctx.candidate = CandidateInfo(taskset="T", oracle_hook=False)
    zero = stats([0] * 6, [0] * 6, models=("noisy-oracle:0.45", "oracle"))
    entry = record(ctx, verdict(ctx, Outcome(stats=zero)))
    assert entry.verdict.verdict == "inconclusive" and not entry.kept
    assert "no oracle hook" in entry.verdict.reason and "def oracle(self, messages)" in entry.verdict.reason
    first = offline_findings(entry, ctx.config.bands, []).priorities[0]
    assert "nothing to play" in first.issue and "def oracle(self, messages)" in first.fix
    advice = " ".join(p.issue + p.fix for p in offline_findings(entry, ctx.config.bands, []).priorities)
    assert "strong model cannot solve" not in advice and "rewards against correct answers" not in advice
    ctx.candidate = CandidateInfo(taskset="T", oracle_hook=True)  # the hook added: the next one is the baseline
    assert verdict(ctx, Outcome(stats=stats(models=("noisy-oracle:0.45", "oracle")))).verdict.verdict == "baseline"


def test_recomputing_an_older_commit_stays_in_its_run(ctx):
    """feedback.py --commit <older>: not checked out, it keeps the branch and candidate it was evaluated with."""
    ctx.candidate = CandidateInfo(taskset="T", oracle_hook=True)
    old = record(ctx, verdict(ctx, Outcome(stats=stats())))
    root = ctx.config.root
    (root / "candidate" / "README.md").write_text("a later iteration")
    commit_all(root, "a later commit")  # HEAD moves on: the older commit's branch is no longer known from git
    ctx.out.mkdir(parents=True, exist_ok=True)
    Job(candidate_dir=str(root / "candidate"), out_dir=str(ctx.out)).write(ctx.out / "job.json")
    again = recompute(root, commit=old.commit, eval_success=False)
    assert again.commit == old.commit and again.branch == "autoenv/demo-arithmetic"
    assert again.candidate == old.candidate


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
