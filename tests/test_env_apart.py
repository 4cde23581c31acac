"""`autoenv eval --env DIR` on a run branch: recorded apart from the run (keyed by the environment's id
and content hash), never compared with the run's entries, never overwriting a run commit's feedback or note."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from review_run import review
from test_pipeline import stats

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
    assert (root / "feedback" / "env" / f"{key}.md").is_file()

    _, second = evaluate_env(root, [2, 2, 2, 2, 2, 0])  # the same content again: compared with the first only
    assert second.verdict.compared_to == first.commit and second.verdict.verdict != "baseline"

    ctx = preflight(EvalOptions(cwd=root, offline=True))
    again = record(ctx, verdict(ctx, Outcome(stats=stats())))  # the run's next evaluation ignores both
    assert again.verdict.compared_to == run_entry.commit
    entries = read_entries(root / "feedback_log.jsonl")
    assert [e.environment.key if e.environment else None for e in entries] == [None, key, key, None]

    run = load_run(Project.open(root))
    assert [r.environment for r in run.rows] == [None, key, key, None]
    assert [r.kept for r in run.rows][:3] == [True, False, False] and run.rows[3].verdict != "baseline"
    code, out, _ = review(capsys, root, "log")
    rows = [line for line in out.splitlines() if line[:3].strip().isdigit()]
    assert code == 0 and all(f"env {key}" in row for row in rows[1:3]) and "env " not in rows[0] + rows[3]
    code, out, _ = review(capsys, root, "log", "--json")
    data = json.loads(out)
    assert [r["environment"] for r in data] == [None, key, key, None]
    assert data[1]["feedback"] == f"feedback/env/{key}.md" and data[0]["feedback"] == f"feedback/{run_entry.commit}.md"


def test_the_lock_file_of_an_evaluation_is_removed(run_repo):
    from autoenv.evaluation.pipeline import one_at_a_time
    from autoenv.run.gitrepo import Repo
    root = run_repo("arithmetic")
    repo = Repo(root)
    commit = repo.head().commit
    with one_at_a_time(repo, commit):
        assert (repo.git_dir / f"autoenv-eval-{commit}.lock").is_file()
    assert not list(repo.git_dir.glob("autoenv-eval-*.lock"))
