"""Runs side by side: each worktree's evaluation runs its own candidate, whatever the shared venv has installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import commit_all, ledger, small_config

from autoenv.core.paths import PROJECT
from autoenv.run.demo import make_run_repo
from autoenv.run.lifecycle import new_run
from autoenv.sandbox.install import install_candidate
from autoenv.sandbox.rollouts import child_env


@pytest.fixture
def two_runs(tmp_path) -> tuple[Path, Path]:
    """Two runs in worktrees of one repository: the arithmetic example and a planted format hack."""
    main = make_run_repo("arithmetic", tmp_path / "repo", small_config(), run_base=False)
    subprocess.run(["git", "branch", "-qm", "main"], cwd=main, check=True)
    a = new_run(main, "a", example="arithmetic", worktree=tmp_path / "run-a")
    b = new_run(main, "b", example="hack-format", worktree=tmp_path / "run-b")
    return a, b


def imported_from(candidate: Path) -> str:
    code = "import candidate_env; print(candidate_env.__file__)"
    return subprocess.run([sys.executable, "-c", code], env=child_env(candidate), cwd=candidate,
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow
def test_the_child_imports_its_own_candidate_not_the_installed_one(two_runs):
    a, b = two_runs
    install_candidate(a / "candidate", force=True)  # the shared venv now holds run a's candidate
    assert imported_from(a / "candidate").startswith(str(a / "candidate"))
    assert imported_from(b / "candidate").startswith(str(b / "candidate"))  # PYTHONPATH first: b's own


@pytest.mark.e2e
def test_two_worktree_runs_evaluate_their_own_candidates_at_the_same_time(two_runs):
    a, b = two_runs
    env = {**os.environ, "NO_COLOR": "1"}
    started = time.time()
    procs = {root: subprocess.Popen([sys.executable, "-m", "autoenv.cli", "eval", "--offline"], cwd=root, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for root in (a, b)}
    outputs = {root: proc.communicate(timeout=600)[0] for root, proc in procs.items()}
    assert all(proc.returncode == 0 for proc in procs.values()), outputs
    (entry_a,), (entry_b,) = ledger(a), ledger(b)
    assert entry_a["verdict"]["verdict"] == "baseline" and entry_a["stats"]["strong"]["mean"] == 1.0
    assert entry_b["verdict"]["verdict"] == "discard" and entry_b["stats"] == {}  # the hack is caught by the probes
    assert any("format" in item for item in entry_b["gates"]["failed"]), entry_b["gates"]["failed"]
    for root, entry in ((a, entry_a), (b, entry_b)):
        assert entry["branch"] == f"autoenv/{root.name[-1]}" and entry["rules"].startswith("checked against")
        run = json.loads((root / "outputs" / entry["commit"] / "run.json").read_text())
        assert run["commit"] == entry["commit"]
    notes = subprocess.run(["git", "notes", "--ref", "autoenv", "list"], cwd=a, capture_output=True, text=True,
                           check=True).stdout
    assert len(notes.splitlines()) == 2  # both notes landed in the shared ref
    print(f"two runs side by side: {time.time() - started:.1f} s")


def test_evaluate_sh_in_a_run_worktree_uses_the_main_checkouts_venv(tmp_path):
    main = make_run_repo("arithmetic", tmp_path / "repo", small_config(), run_base=False)
    shutil.copy(PROJECT / "evaluate.sh", main / "evaluate.sh")
    commit_all(main, "the harness's evaluate.sh")
    (main / ".venv").symlink_to(Path(sys.executable).parent.parent)  # the venv lives in the main checkout only
    with open(main / ".git" / "info" / "exclude", "a") as exclude:
        exclude.write(".venv\n")
    run = new_run(main, "side", worktree=tmp_path / "run-side")
    result = subprocess.run(["bash", "evaluate.sh", "--help"], cwd=run, capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "usage: autoenv eval" in result.stdout, result.stderr
    (main / ".venv").unlink()
    result = subprocess.run(["bash", "evaluate.sh", "--help"], cwd=run, capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "run: bash setup.sh" in result.stderr


@pytest.mark.e2e
def test_a_new_worktree_run_sees_no_lost_ledger_in_another_runs_notes_but_a_deleted_own_ledger_is_named(tmp_path):
    """The notes are the repository's, shared by its worktrees: another run's evaluated commits in them are not this
    run's lost ledger (the first evaluation of every `--worktree` run warned so once)."""
    from autoenv.evaluation.commands import verify

    main = make_run_repo("arithmetic", tmp_path / "repo", small_config(), run_base=False)
    subprocess.run(["git", "branch", "-qm", "main"], cwd=main, check=True)
    a = new_run(main, "a", example="arithmetic", worktree=tmp_path / "run-a")
    result = subprocess.run([sys.executable, "-m", "autoenv.cli", "eval", "--offline"], cwd=a, capture_output=True,
                            text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:]
    c = new_run(main, "c", example="arithmetic", worktree=tmp_path / "run-c")
    assert verify(c) == ([], 0)
    (a / "feedback_log.jsonl").unlink()
    problems, _ = verify(a)
    assert len(problems) == 1 and "feedback_log.jsonl is missing or empty but 1 evaluated commit(s)" in problems[0]
