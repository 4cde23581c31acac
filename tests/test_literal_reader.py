"""The literal-reader test: an agent that does exactly what program.md and the feedback say succeeds.

tests/literal_reader.py knows only program.md and the files the harness writes. On a fresh run
that `autoenv new --example hack-format` made (a format reward worth 0.6 that pays without
correctness), it runs program.md's loop commands in order: evaluates (discard), reads the
result block and the feedback's first "Fix first" item, changes candidate/ as that item says,
probes, commits, evaluates again (baseline). It must get there with zero refused or failed
harness commands, bare and under `autoenv run --agent command` (where every call goes through
the driver's PreToolUse hook first). With program.md's old step 3 (`... > run.log 2>&1`) it
cannot evaluate at all: the bare reader's first evaluation is refused (the log it redirected
makes the tree dirty), and under the driver the redirection itself is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS, autoenv, ledger, small_config

from autoenv.core.paths import PROJECT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
WARM = True  # several evaluations of one run per test: the warm child forks them (tests/conftest.py)
READER = TESTS / "literal_reader.py"
OLD_STEP_3 = 'Run `bash evaluate.sh --description "<what you changed and what you expect>" > run.log 2>&1`'


def fresh_clone(root: Path, program: str | None = None, *, example: str = "hack-format", tag: str = "lit",
                config: str | None = None) -> Path:
    """What a clone holds (harness files, the project's venv), then `autoenv new <tag> --example <example>`."""
    root.mkdir()
    for name in ("evaluate.sh", "program.md", ".gitignore", "README.md"):
        shutil.copy(PROJECT / name, root / name)
    if program is not None:
        (root / "program.md").write_text(program)
    shutil.copytree(PROJECT / "candidate", root / "candidate", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(PROJECT / "examples" / "arithmetic" / "spec.md", root / "spec.md")
    (root / "config.toml").write_text(config or small_config())
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "t"], ["config", "user.email", "t@t.invalid"],
                 ["add", "-A"], ["commit", "-qm", "a fresh clone"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / ".venv").symlink_to(PROJECT / ".venv")  # what setup.sh makes
    with open(root / ".git" / "info" / "exclude", "a") as f:
        f.write(".venv\n")
    done = autoenv("new", tag, "--example", example, cwd=root, env={"OPENAI_API_KEY": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def steps(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def reader_env(tmp_path: Path) -> dict:
    return {**os.environ, "OPENAI_API_KEY": "", "LITERAL_LOG": str(tmp_path / "reader.jsonl"), "NO_COLOR": "1"}


def assert_succeeded(log: list[dict], root: Path) -> None:
    commands = [s for s in log if "command" in s or "edit" in s]
    assert [s for s in log if s["step"] == "stuck"] == [], log[-1]
    assert all(s["refused"] is None for s in commands), [s for s in commands if s["refused"]]
    assert all(s["exit"] == 0 for s in commands), [(s.get("command"), s["exit"], s.get("tail")) for s in commands]
    assert [s["step"] for s in commands][:5] == ["step 3", "step 2: edit", "step 2: probe", "step 2: commit",
                                                 "step 3 again"]
    read = [s["command"] for s in commands[5:]]  # then every reading command program.md names, on the baseline
    assert {c.split()[1] for c in read} == {"check", "probe", "show", "log"} and all(s["step"] == "reading"
                                                                                  for s in commands[5:])
    assert any("probe --from" in c for c in read) and any(c.startswith(".venv/bin/autoenv log --json") for c in read)
    assert [s["verdict"] for s in log if s["step"] in ("step 4", "step 4 again")] == ["discard", "baseline"]
    item = next(s["item"] for s in log if s["step"] == "step 4: fix first")
    assert "`formatted`" in item and "pays the format whatever the answer" in item  # the planted cause, first
    assert [e["verdict"]["verdict"] for e in ledger(root)] == ["discard", "baseline"]
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True,
                          check=False).stdout == ""


def test_a_literal_reader_of_program_md_gets_from_discard_to_baseline_bare(tmp_path):
    root = fresh_clone(tmp_path / "run")
    done = subprocess.run([sys.executable, str(READER)], cwd=root, env=reader_env(tmp_path), capture_output=True,
                          text=True, timeout=900, check=False)
    log = steps(tmp_path / "reader.jsonl")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:] + json.dumps(log[-1])
    assert_succeeded(log, root)
    run_log = root / "outputs" / ledger(root)[-1]["commit"] / "run.log"  # the harness kept the output
    assert run_log.read_text().rstrip().endswith(f"log:               outputs/{ledger(root)[-1]['commit']}/run.log")


def test_a_literal_reader_of_program_md_gets_from_discard_to_baseline_under_autoenv_run(tmp_path):
    root = fresh_clone(tmp_path / "run")
    command = f"{sys.executable} {READER} --settings {{settings}} --session-id {{session_id}}"
    done = autoenv("run", "lit", "--agent", "command", "--command", command, "--max-usd", "0.5", cwd=root,
                   env=reader_env(tmp_path), timeout=900)
    log = steps(tmp_path / "reader.jsonl")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert all(s["driver"] for s in log)  # every call went through the driver's hook
    assert_succeeded(log, root)
    printed = done.stdout
    assert "launch 1:" in printed and "evaluation 1: " in printed and "evaluation 2: " in printed
    assert "stop: max_usd" in printed


def test_program_md_with_the_old_step_3_fails_the_literal_reader(tmp_path):
    text = (PROJECT / "program.md").read_text()
    new_step_3 = next(line for line in text.splitlines() if line.startswith("3. Run `bash evaluate.sh"))
    old = text.replace(new_step_3, "3. " + OLD_STEP_3 + " and read its")
    assert OLD_STEP_3 in old
    root = fresh_clone(tmp_path / "run", program=old)
    done = subprocess.run([sys.executable, str(READER)], cwd=root, env=reader_env(tmp_path), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 1
    log = steps(tmp_path / "reader.jsonl")
    (evaluation,) = [s for s in log if s.get("command", "").startswith("bash evaluate.sh")]
    assert evaluation["command"].endswith("> run.log 2>&1 --offline") or "> run.log" in evaluation["command"]
    assert evaluation["exit"] == 2 and ledger(root) == []  # the log it redirected dirtied the tree: refused
    assert "run.log" in (root / "run.log").read_text() and "git add" not in (root / "run.log").read_text()
    hook = subprocess.run([sys.executable, "-m", "autoenv.driver.hook", "--root", str(root)], check=False,
                          input=json.dumps({"tool_name": "Bash", "tool_input": {"command": evaluation["command"]},
                                            "cwd": str(root)}), capture_output=True, text=True, timeout=30)
    assert hook.returncode == 2 and "redirection" in hook.stderr  # and under autoenv run it is refused outright
