"""Preflight refuses bad input before any work and records nothing."""

from __future__ import annotations

import subprocess

from conftest import autoenv, ledger, small_config


def test_not_a_git_repository(tmp_path):
    result = autoenv("eval", "--offline", cwd=tmp_path)
    assert result.returncode == 2
    assert "not inside a git repository" in result.stderr
    assert "git init" in result.stderr


def test_missing_config_file(run_repo):
    root = run_repo()
    (root / "config.toml").unlink()
    subprocess.run(["git", "commit", "-qam", "drop config"], cwd=root, check=True)
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2
    assert "no config file" in result.stderr and "--config" in result.stderr


def test_config_typo_names_line_and_key(run_repo):
    root = run_repo()
    text = (root / "config.toml").read_text().replace("examples = 3", "exampels = 3")
    (root / "config.toml").write_text(text)
    subprocess.run(["git", "commit", "-qam", "typo"], cwd=root, check=True)
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2
    line = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("exampels"))
    assert f"config.toml:{line}" in result.stderr
    assert "budget.exampels" in result.stderr and "budget.examples" in result.stderr
    assert ledger(root) == []


def test_dirty_tree_is_refused_and_names_the_files(run_repo):
    root = run_repo()
    (root / "candidate" / "candidate_env" / "taskset.py").write_text("# edited\n", encoding="utf-8")
    (root / "notes.txt").write_text("untracked\n")
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2
    assert "uncommitted changes" in result.stderr
    assert "candidate/candidate_env/taskset.py" in result.stderr and "notes.txt" in result.stderr
    assert not (root / "feedback_log.jsonl").exists()
    assert not (root / "outputs").exists()


def test_repository_without_commits(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "config.toml").write_text(small_config())
    result = autoenv("eval", "--offline", cwd=tmp_path)
    assert result.returncode == 2
    assert "no commits yet" in result.stderr


def test_missing_api_key_fails_before_any_work(run_repo):
    root = run_repo()
    result = autoenv("eval", cwd=root, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stderr and "--offline" in result.stderr
    assert not (root / "outputs").exists() and ledger(root) == []
