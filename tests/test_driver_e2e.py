"""`autoenv run demo --agent command --max-evals 3`: the stand-in agent does three real iterations unattended.

A fresh run repository as a clone has it (evaluate.sh, program.md, config.toml, the
arithmetic example as candidate/, the project's venv), real offline evaluations through
the real CLI. The stand-in edits candidate/, commits and evaluates once per launch; on its
second launch it also tries to lower the bands in config.toml, and on its third it tries a
fourth evaluation past the budget.
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

from autoenv.core.paths import EXAMPLES, PROJECT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def fresh_run(root: Path) -> Path:
    root.mkdir()
    shutil.copytree(EXAMPLES / "arithmetic", root / "candidate",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "spec.md"))
    for name in ("evaluate.sh", "program.md", ".gitignore"):
        shutil.copy(PROJECT / name, root / name)
    shutil.copy(EXAMPLES / "arithmetic" / "spec.md", root / "spec.md")
    (root / "config.toml").write_text(small_config())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.name", "t"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.email", "t@t.invalid"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "a fresh clone"], cwd=root, check=True)
    (root / ".venv").symlink_to(PROJECT / ".venv")  # what setup.sh makes
    with open(root / ".git" / "info" / "exclude", "a") as f:
        f.write(".venv\n")
    done = autoenv("new", "demo", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def iteration(n: int) -> list[dict]:
    return [{"edit": "candidate/README.md", "append": f"\nIteration {n} of the stand-in agent.\n"},
            {"bash": f"git add -A && git commit -qm 'readme: iteration {n}'"},
            {"bash": f"bash evaluate.sh --offline --description 'iteration {n}'"}]


def test_three_iterations_unattended_within_the_evaluation_budget(tmp_path):
    root = fresh_run(tmp_path / "run")
    script = [iteration(1),
              [{"edit": "config.toml", "append": "\n[bands]\ntarget_min = 0.0\n"}, *iteration(2)],
              [*iteration(3), {"bash": "bash evaluate.sh --offline --description 'a fourth, past the budget'"}]]
    (tmp_path / "script.json").write_text(json.dumps(script))
    command = f"{sys.executable} {TESTS / 'agent_standin.py'} -p {{prompt}} --session-id {{session_id}} " \
              "--output-format stream-json --verbose --settings {settings}"
    env = {"STANDIN_SCRIPT": str(tmp_path / "script.json"), "STANDIN_LOG": str(tmp_path / "standin.jsonl"),
           "PATH": os.environ["PATH"]}
    done = autoenv("run", "demo", "--agent", "command", "--command", command, "--max-evals", "3", cwd=root, env=env,
                   timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped:      max_evals: 3 of 3 evaluations done" in done.stdout
    entries = ledger(root)
    assert len(entries) == 3 and [e["description"] for e in entries] == [f"iteration {n}" for n in (1, 2, 3)]
    assert entries[0]["verdict"]["verdict"] == "baseline"
    assert all(e["agent_cost_usd"] is not None for e in entries)
    assert entries[1]["agent_cost_usd"] >= 0.05 and entries[2]["agent_cost_usd"] >= 0.10  # earlier launches' cost
    runs = [json.loads(line) for line in (tmp_path / "standin.jsonl").read_text().splitlines()]
    assert runs[1]["denials"][0]["tool"] == "Edit" and "config.toml" in runs[1]["denials"][0]["message"]
    assert "target_min = 0.0" not in (root / "config.toml").read_text()
    # nothing half-written: every entry has its note, the tree is clean, the driver let go of the run
    assert autoenv("verify", cwd=root).returncode == 0
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout == ""
    state = json.loads((root / "outputs" / "agent" / "demo" / "driver.json").read_text())
    assert state["pid"] == 0 and state["stopping"].startswith("max_evals")
    log = autoenv("log", "--agent", cwd=root)
    assert log.returncode == 0 and "3 agent launches" in log.stdout and "max_evals" in log.stdout
