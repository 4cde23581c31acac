"""Every evaluation's output ends with the result block, and the harness keeps that output in
outputs/<commit>/run.log: a crash, a tampered commit (recorded or refused) and a refused dirty tree
included. The tampered verdict's recovery is a command the driver permits, and it works."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import autoenv, commit_all, ledger, small_config

from autoenv.core.paths import PROJECT
from autoenv.driver.rules import forbidden_command
from autoenv.run.demo import make_run_repo


def block(stdout: str) -> dict[str, str]:
    """The `key: value` lines after the last `---`, as `grep -A20 '^---'` shows them."""
    tail = stdout.rsplit("\n---\n", 1)[1] if "\n---\n" in stdout else stdout.split("---\n", 1)[1]
    return dict(re.match(r"^(\w+): +(.*)$", line).groups() for line in tail.splitlines() if line.strip())


@pytest.mark.slow
def test_a_crash_ends_with_the_result_block_and_keeps_its_log(run_repo):
    root = run_repo("arithmetic")
    subprocess.run(["git", "rm", "-rqf", "candidate"], cwd=root, check=True)
    shutil.copytree(PROJECT / "candidate", root / "candidate", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    commit = commit_all(root, "back to the stub")
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    fields = block(result.stdout)
    assert fields["verdict"] == "crash" and fields["feedback"] == f"feedback/{commit}.md"
    assert fields["reason"].startswith("the evaluation failed") and fields["log"] == f"outputs/{commit}/run.log"
    log = (root / "outputs" / commit / "run.log").read_text()
    assert log.rstrip().endswith(result.stdout.rstrip().splitlines()[-1])  # the same output, the block last
    assert "error:" in log and "▶ preflight" in log  # stderr's error and the stages, in order
    assert "\x1b[" not in log
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=False).stdout == ""


@pytest.mark.slow
def test_tampered_names_a_recovery_the_driver_permits_and_it_works(tmp_path):
    root = make_run_repo("arithmetic", tmp_path / "r", small_config(), run_base=True)
    text = (root / "config.toml").read_text().replace("target_min = 0.2", "target_min = 0.0")
    (root / "config.toml").write_text(text)
    (root / "candidate" / "README.md").write_text((root / "candidate" / "README.md").read_text() + "\nmore\n")
    bad = commit_all(root, "widen the band, and a readme line")
    result = autoenv("eval", "--offline", "--description", "x", cwd=root)
    assert result.returncode == 0
    fields = block(result.stdout)
    assert fields["verdict"] == "tampered" and "config.toml (modified)" in fields["reason"]
    recovery = re.search(r"\((git revert --no-edit [0-9a-f ]+)\)", fields["reason"]).group(1)
    assert recovery == f"git revert --no-edit {bad[:12]}"
    assert forbidden_command(recovery, root) is None  # the driver lets the agent run it as written
    subprocess.run(recovery, shell=True, cwd=root, check=True, capture_output=True)
    again = autoenv("eval", "--offline", "--description", "reverted", cwd=root)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert block(again.stdout)["verdict"] != "tampered"
    assert [e["verdict"]["verdict"] for e in ledger(root)] == ["tampered", "baseline"]


@pytest.mark.slow
def test_refused_rules_end_with_a_tampered_block_that_records_nothing(tmp_path):
    config = small_config().replace('on_tamper = "record"', 'on_tamper = "refuse"')
    root = make_run_repo("arithmetic", tmp_path / "r", config, run_base=True)
    (root / "spec.md").write_text("an easier spec\n")
    bad = commit_all(root, "easier spec")
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2
    fields = block(result.stdout)
    assert fields["verdict"] == "tampered" and fields["recorded"] == "no" and fields["exit_code"] == "2"
    assert f"git revert --no-edit {bad[:12]}" in result.stderr and ledger(root) == []
