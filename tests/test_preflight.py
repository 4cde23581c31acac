"""Preflight refuses bad input before any work and records nothing."""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from conftest import autoenv, ledger, small_config
from cpu_hog import slack

from autoenv.core.record import Entry, Verdict
from autoenv.run.ledger import append_entry


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_missing_api_key_fails_before_any_work(run_repo):
    root = run_repo()
    result = autoenv("eval", cwd=root, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stderr and "--offline" in result.stderr
    assert not (root / "outputs").exists() and ledger(root) == []


def entries_with_chain(root, n: int = 3) -> str:
    """A real ledger of `n` entries at the repo root; returns its text."""
    for i in range(n):
        append_entry(root / "feedback_log.jsonl", Entry(
            commit=f"{i:040d}", timestamp="2026-01-01T00:00:00+00:00", eval_success=True,
            verdict=Verdict(verdict="discard", reason="-")))
    return (root / "feedback_log.jsonl").read_text()


@pytest.mark.parametrize("damage,line,words", [
    (lambda lines: lines[:1] + [lines[1][:50]] + lines[2:], 2, "not valid JSON"),
    (lambda lines: [lines[0], lines[2]], 2, "breaks the hash chain"),
])
@pytest.mark.attack
def test_a_damaged_ledger_is_refused_before_any_work(run_repo, damage, line, words, attack_row):
    root = run_repo()
    lines = entries_with_chain(root).splitlines()
    damaged = "\n".join(damage(lines)) + "\n"
    (root / "feedback_log.jsonl").write_text(damaged)
    started = time.time()
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"feedback_log.jsonl:{line}" in result.stderr and words in result.stderr and "backup" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (root / "outputs").exists() and (root / "feedback_log.jsonl").read_text() == damaged
    assert time.time() - started < slack(20, cap=4)  # refused in preflight, not after the rollouts
    said = next(text for text in result.stderr.splitlines() if "feedback_log.jsonl" in text)
    attack_row(f"ledger edited by hand ({words})", f"exit {result.returncode} in preflight, before any work: "
               f"'{said.strip()}'; the file left as it was")


@pytest.mark.slow
def test_a_stale_ledger_temp_file_is_ignored_by_git_and_cleaned(run_repo):
    root = run_repo()
    entries_with_chain(root, 1)
    stale = [root / ".feedback_log.jsonl.k3j_9x2q.tmp", root / ".feedback_log.jsonl.a1b2c3d4"]  # now, older versions
    for path in stale:
        path.write_text('{"half": ')
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert status == ""  # git-ignored: `git add -A` can never commit one
    result = autoenv("eval", cwd=root, env={"OPENAI_API_KEY": ""})  # stops at the key check, after the tree check
    assert result.returncode == 2 and "OPENAI_API_KEY" in result.stderr, result.stdout + result.stderr
    assert "uncommitted" not in result.stderr
    for path in stale:
        assert f"removed {path.name}, a temporary file an interrupted ledger write left behind" in result.stdout
        assert not path.exists()
    assert len(ledger(root)) == 1


@pytest.mark.slow
def test_the_dirty_tree_fix_never_commits_the_harness_files(run_repo):
    text = small_config().replace('outputs = "outputs"', 'outputs = "runs"').replace(
        'log_file = "feedback_log.jsonl"', 'log_file = "results/log.jsonl"')  # results git does not ignore
    root = run_repo(config_text=text)
    (root / "runs" / "abc").mkdir(parents=True)
    (root / "runs" / "abc" / "traces.jsonl").write_text("{}\n")
    (root / "results").mkdir()
    append_entry(root / "results" / "log.jsonl", Entry(commit="0" * 40, timestamp="t", eval_success=True,
                                                       verdict=Verdict(verdict="keep", reason="-")))
    (root / "candidate" / "README.md").write_text("edited\n")
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2 and "uncommitted changes" in result.stderr
    listed = result.stderr.split("evaluated:\n")[1].split("where:")[0].split()
    assert listed == ["candidate/README.md"]
    command = re.search(r"(git add .*?) && git commit", result.stderr).group(1)
    assert command == "git add candidate"
    assert "to .gitignore" in result.stderr
    subprocess.run(command, shell=True, cwd=root, check=True)  # the fix as printed
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=root, capture_output=True,
                            text=True).stdout.split()
    assert staged == ["candidate/README.md"]


def test_the_dirty_tree_fix_never_commits_a_file_outside_the_candidate(run_repo):
    root = run_repo()
    (root / "run.log").write_text("an evaluation's output, redirected by hand\n")
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2 and "run.log" in result.stderr
    assert "git add" not in result.stderr  # nothing to commit: the log is not the candidate's
    assert "run.log: outside candidate/" in result.stderr and "outputs/<commit>/run.log" in result.stderr
    assert ".gitignore" not in result.stderr
    assert re.search(r"^verdict: +none$", result.stdout, re.MULTILINE) and re.search(r"^recorded: +no$", result.stdout, re.MULTILINE)


def test_feedback_refuses_an_edited_ledger_before_recomputing(run_repo):
    root = run_repo()
    lines = entries_with_chain(root).splitlines()
    (root / "feedback_log.jsonl").write_text("\n".join([lines[0], lines[2]]) + "\n")
    result = autoenv("feedback", cwd=root)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "feedback_log.jsonl:2" in result.stderr and "hash chain" in result.stderr
