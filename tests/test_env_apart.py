"""`autoenv eval --env DIR` on a run branch: recorded apart from the run (keyed by the environment's id
and content hash), never compared with the run's entries, never overwriting a run commit's feedback or note
nor another env evaluation's feedback; not in the run's log, counts or sparkline (`log --env` shows it), not
spending the driver's evaluation budget."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from review_run import review
from test_pipeline import stats

from autoenv.cli import print_result
from autoenv.core.errors import AutoEnvError
from autoenv.driver.gate import driver_dir, refuse_when_spent, run_evaluations
from autoenv.evaluation.context import EvalOptions, Outcome
from autoenv.evaluation.decision import verdict
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recording import record
from autoenv.review.run import Project, load_run
from autoenv.run.envref import tree_hash
from autoenv.run.ledger import read_entries

GLOSSARY = Path(__file__).parent.parent / "examples" / "real-glossary"


def note(root: Path, commit: str) -> str:
    return subprocess.run(["git", "notes", "--ref", "autoenv", "show", commit], cwd=root, capture_output=True,
                          text=True, check=True).stdout


def evaluate_env(root: Path, target: list[int]):
    ctx = preflight(EvalOptions(cwd=root, offline=True, env=str(GLOSSARY)))
    return ctx, record(ctx, verdict(ctx, Outcome(stats=stats(target))))


@pytest.mark.slow
def test_an_env_evaluation_is_recorded_apart_from_the_run(run_repo, capsys):
    root = run_repo("arithmetic")
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    run_entry = record(ctx, verdict(ctx, Outcome(stats=stats())))
    feedback = (root / "feedback" / f"{run_entry.commit}.md").read_text()
    noted = note(root, run_entry.commit)

    env_ctx, first = evaluate_env(root, [2, 2, 2, 2, 0, 0])
    key = f"tiny-glossary@{tree_hash(GLOSSARY)[:12]}"
    assert first.commit == run_entry.commit and first.environment is not None and first.environment.key == key
    assert env_ctx.out == root / "outputs" / "env" / key and first.outputs == f"outputs/env/{key}"
    assert first.verdict.verdict == "baseline" and first.verdict.compared_to is None  # not the run's baseline
    assert first.verdict.reason.startswith(f"first evaluation of the environment {key} (--env {GLOSSARY})")
    assert not first.kept and first.cache_key is None
    assert (root / "feedback" / f"{run_entry.commit}.md").read_text() == feedback  # untouched
    assert note(root, run_entry.commit) == noted
    first_feedback = root / "feedback" / "env" / key / f"{first.run_id}.md"
    assert first.feedback_name == f"env/{key}/{first.run_id}.md" and first_feedback.is_file()
    first_text = first_feedback.read_text()

    _, second = evaluate_env(root, [2, 2, 2, 2, 2, 0])  # the same content again: compared with the first only
    assert second.verdict.compared_to == first.commit and second.verdict.verdict != "baseline"
    second_feedback = root / "feedback" / "env" / key / f"{second.run_id}.md"
    assert second.run_id != first.run_id and second_feedback.is_file()  # its own file, at the same commit
    assert first_feedback.read_text() == first_text  # the first evaluation's feedback is not overwritten
    assert sorted(p.name for p in (root / "feedback" / "env").rglob("*.md")) == sorted([first_feedback.name,
                                                                                       second_feedback.name])

    ctx = preflight(EvalOptions(cwd=root, offline=True))
    again = record(ctx, verdict(ctx, Outcome(stats=stats())))  # the run's next evaluation ignores both
    assert again.verdict.compared_to == run_entry.commit
    entries = read_entries(root / "feedback_log.jsonl")
    assert [e.environment.key if e.environment else None for e in entries] == [None, key, key, None]

    # the run's views are the run's: two evaluations, two marks on the sparkline, no env row
    run = load_run(Project.open(root))
    assert [r.environment for r in run.rows] == [None, None] and [r.number for r in run.rows] == [1, 2]
    assert [r.environment for r in run.apart] == [key, key] and [r.number for r in run.apart] == [1, 2]
    assert run.rows[0].kept and run.rows[1].verdict != "baseline"
    code, out, _ = review(capsys, root, "log")
    rows = [line for line in out.splitlines() if line[:3].strip().isdigit()]
    assert code == 0 and len(rows) == 2 and key not in out.split("target mean")[0], out
    assert re.search(r"autoenv/demo-arithmetic: 2 evaluations, 1 kept", out), out
    spark = next(line for line in out.splitlines() if line.startswith("target mean"))
    assert len(spark.split()[2]) == 2, spark  # one mark per run evaluation
    assert "and 2 `autoenv eval --env` evaluations of another environment, recorded apart (not counted above): " \
           "autoenv log --env" in out
    code, out, _ = review(capsys, root, "log", "--json")
    data = json.loads(out)
    assert [r["environment"] for r in data] == [None, None] and data[0]["feedback"] == f"feedback/{run_entry.commit}.md"

    # ... and the env evaluations are where a person looks for them, each with its own feedback file
    code, out, _ = review(capsys, root, "log", "--env")
    assert code == 0 and "2 `autoenv eval --env` evaluations of other environments" in out, out
    assert f"feedback/env/{key}/{first.run_id}.md" in out and f"feedback/env/{key}/{second.run_id}.md" in out
    code, out, _ = review(capsys, root, "log", "--env", "--json")
    data = json.loads(out)
    assert [r["feedback"] for r in data] == [f"feedback/env/{key}/{first.run_id}.md",
                                             f"feedback/env/{key}/{second.run_id}.md"]
    print_result(second, root)
    block = capsys.readouterr().out
    assert re.search(rf"(?m)^feedback:\s+feedback/env/{re.escape(key)}/{second.run_id}\.md$", block), block


@pytest.mark.slow
def test_the_driver_budget_counts_the_runs_evaluations_not_env_ones(run_repo):
    """A live driver allowing one evaluation: an `eval --env` entry does not spend it, a run evaluation does."""
    root = run_repo("arithmetic")
    evaluate_env(root, [2, 2, 2, 2, 0, 0])
    outputs, log = root / "outputs", root / "feedback_log.jsonl"
    state = driver_dir(outputs, "demo-arithmetic") / "driver.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"pid": os.getpid(), "ledger_start": 0, "max_evals": 1}))
    assert run_evaluations(log, 0) == 0
    refuse_when_spent(outputs, log, "autoenv/demo-arithmetic")  # not refused: the run has evaluated nothing
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert run_evaluations(log, 0) == 1
    with pytest.raises(AutoEnvError, match="allows 1 evaluations and 1 are done"):
        refuse_when_spent(outputs, log, "autoenv/demo-arithmetic")


def test_the_lock_file_of_an_evaluation_is_removed(run_repo):
    from autoenv.evaluation.pipeline import one_at_a_time
    from autoenv.run.gitrepo import Repo
    root = run_repo("arithmetic")
    repo = Repo(root)
    commit = repo.head().commit
    with one_at_a_time(repo, commit):
        assert (repo.git_dir / f"autoenv-eval-{commit}.lock").is_file()
    assert not list(repo.git_dir.glob("autoenv-eval-*.lock"))
