"""`autoenv run`: the driver with the stand-in agent (tests/agent_standin.py) in real scratch runs.

These launch real processes but no evaluation (fast); the three-iteration run with real
offline evaluations is in test_driver_e2e.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTS, autoenv, head, small_config

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import PROJECT
from autoenv.driver.loop import RunOptions, drive
from autoenv.run.demo import make_run_repo

pytestmark = pytest.mark.slow  # every test starts agent and hook processes
TAG = "demo-arithmetic"
STANDIN = TESTS / "agent_standin.py"
COMMIT = {"bash": "git add -A && git commit -qm 'stand-in change'"}


@pytest.fixture(scope="module")
def standin_bin(tmp_path_factory):
    """A directory whose `claude` is the stand-in agent."""
    directory = tmp_path_factory.mktemp("standin-bin")
    wrapper = directory / "claude"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "$@"\n')
    wrapper.chmod(0o755)
    return directory


@pytest.fixture
def agent(tmp_path, standin_bin):
    """Factory: the environment for the stand-in playing `script` (one list of actions per launch)."""

    def make(script: list[list[dict]]) -> dict:
        path = tmp_path / "script.json"
        path.write_text(json.dumps(script))
        return {**os.environ, "PATH": f"{standin_bin}:{os.environ['PATH']}", "ANTHROPIC_API_KEY": "test",
                "STANDIN_SCRIPT": str(path), "STANDIN_LOG": str(tmp_path / "standin.jsonl")}

    return make


def launches(env: dict) -> list[dict]:
    path = Path(env["STANDIN_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def edit(n: int) -> dict:
    return {"edit": "candidate/README.md", "append": f"\nstand-in edit {n}\n"}


def events(root: Path) -> list[dict]:
    path = root / "outputs" / "agent" / TAG / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_relaunches_resume_the_pinned_session_until_the_usd_budget(run_repo, agent):
    root = run_repo(run_base=True)
    env = agent([[edit(1), COMMIT], [edit(2), COMMIT, {"stop": True}, edit(3)]])
    summary = drive(RunOptions(cwd=root, tag=TAG, agent="claude", max_usd=0.12, env=env))
    runs = launches(env)
    assert summary.launches == len(runs) == 3 and summary.stop.startswith("max_usd")
    first, *later = runs
    sid = first["argv"][first["argv"].index("--session-id") + 1]
    assert all(r["argv"][r["argv"].index("--resume") + 1] == sid for r in later)
    assert "--session-id" not in later[0]["argv"] and summary.session_id == sid
    assert "relaunched you" in later[0]["argv"][1] and "No evaluation yet" in later[0]["argv"][1]
    assert abs(summary.spend.agent_usd - 0.15) < 1e-9  # 3 launches at the stand-in's $0.05
    log = events(root)
    assert [e["event"] for e in log] == ["start", "launch", "launch", "launch", "stop"]
    assert [e["cost_usd"] for e in log[1:4]] == [0.05] * 3 and log[1]["commits"] == 1
    assert all((root / "outputs" / "agent" / TAG / e["transcript"]).is_file() for e in log[1:4])
    # the ended run left nothing running and nothing half-written: the tree is clean
    assert summary.uncommitted == [] and subprocess.run(["git", "status", "--porcelain"], cwd=root,
                                                        capture_output=True, text=True).stdout == ""


def test_a_new_driver_resumes_the_session_of_the_last_one(run_repo, agent):
    root = run_repo(run_base=True)
    env = agent([[edit(1), COMMIT]])
    one = drive(RunOptions(cwd=root, tag=TAG, agent="claude", max_usd=0.05, env=env))
    two = drive(RunOptions(cwd=root, tag=TAG, agent="claude", max_usd=0.05, env=env))
    first, second = launches(env)
    assert "--session-id" in first["argv"] and second["argv"][second["argv"].index("--resume") + 1] == one.session_id
    assert two.session_id == one.session_id and "relaunched you" in second["argv"][1]
    assert [e["launch"] for e in events(root) if e["event"] == "launch"] == [1, 2]


def test_run_can_start_the_run_in_its_own_worktree(tmp_path, agent):
    root = make_run_repo("arithmetic", tmp_path / "main", small_config(), run_base=False)
    subprocess.run(["git", "branch", "-m", "main"], cwd=root, check=True)
    env = agent([[edit(1), COMMIT]])
    summary = drive(RunOptions(cwd=root, tag="night", agent="claude", max_usd=0.05, env=env,
                               new={"spec": None, "example": "arithmetic", "worktree": tmp_path / "night"}))
    assert summary.root == (tmp_path / "night").resolve() and summary.launches == 1
    assert head(tmp_path / "night") != head(root) and (tmp_path / "night" / ".autoenv" / "run.toml").is_file()
    # the agent is checked before the run is made: without its program, nothing is created
    with pytest.raises(AutoEnvError, match="not installed"):
        drive(RunOptions(cwd=root, tag="other", agent="claude", env={**env, "PATH": "/usr/bin:/bin"},
                         new={"spec": None, "example": "arithmetic", "worktree": tmp_path / "other"}))
    assert not (tmp_path / "other").exists()


def test_a_stalled_agent_is_ended_and_resumed_with_a_nudge(run_repo, agent):
    root = run_repo(run_base=True)
    env = agent([[{"hang": True}], [edit(1), COMMIT]])
    summary = drive(RunOptions(cwd=root, tag=TAG, agent="claude", max_usd=0.05, stall_minutes=0.05, env=env,
                               grace=5))
    runs = launches(env)
    assert summary.nudges == 1 and summary.launches == 2 and summary.stop.startswith("max_usd")
    assert "no commit and no evaluation for 0.05 minutes" in runs[1]["argv"][1]
    assert "--resume" in runs[1]["argv"]
    log = events(root)
    assert [e["event"] for e in log] == ["start", "launch", "nudge", "launch", "stop"]
    assert log[1]["ended_by"] == "nudge" and log[1]["exit_code"] == -signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.kill(runs[0]["pid"], 0)


def test_the_hours_budget_ends_a_hanging_agent(run_repo, agent):
    root = run_repo(run_base=True)
    env = agent([[edit(1), {"hang": True}]])
    began = time.monotonic()
    summary = drive(RunOptions(cwd=root, tag=TAG, agent="claude", max_hours=3 / 3600, env=env, grace=5))
    assert summary.stop.startswith("max_hours") and summary.launches == 1
    assert time.monotonic() - began < 15
    assert events(root)[1]["ended_by"] == "budget"
    assert summary.spend.agent_usd > 0  # priced from its tokens: it never reported a cost
    assert summary.uncommitted == ["candidate/README.md"]  # named in the summary, left for the person


def test_a_forbidden_edit_is_refused_by_the_hook(run_repo, agent):
    root = run_repo(run_base=True)
    before = (root / "config.toml").read_text()
    env = agent([[{"edit": "config.toml", "append": "\n# lower the bands\n"},
                  {"bash": "git add -A && sed -i s/target_min/x/ config.toml"}, edit(1), COMMIT]])
    summary = drive(RunOptions(cwd=root, tag=TAG, agent="claude", max_usd=0.05, env=env))
    run = launches(env)[0]
    assert (root / "config.toml").read_text() == before
    assert [d["tool"] for d in run["denials"]] == ["Edit", "Bash"]
    assert "config.toml is protected" in run["denials"][0]["message"]
    assert events(root)[1]["denials"] == 2 and summary.launches == 1


def test_an_agent_that_cannot_log_in_stops_the_run_at_once(run_repo, agent):
    root = run_repo(run_base=True)
    env = agent([[{"fail": "Invalid API key · Please run /login"}]])
    summary = drive(RunOptions(cwd=root, tag=TAG, agent="claude", env=env))
    assert summary.launches == 1 and "cannot authenticate" in summary.stop and "Invalid API key" in summary.stop


def test_launches_without_progress_end_the_run(run_repo, agent, capsys):
    root = run_repo(run_base=True)
    env = agent([[{"stop": True}]])
    summary = drive(RunOptions(cwd=root, tag=TAG, agent="claude", env=env, max_failures=2))
    assert summary.launches == 2 and "made no progress" in summary.stop
    printed = [line.strip() for line in capsys.readouterr().out.splitlines()]  # a line per launch and stop, plain
    assert [line.split(":")[0] for line in printed if line.startswith(("launch", "stop"))] == \
        ["launch 1", "launch 1 ended (the agent stopped, exit 0) after 0 s", "launch 2",
         "launch 2 ended (the agent stopped, exit 0) after 0 s", "stop"], printed
    assert printed[-1].startswith("stop: 2 launches in a row made no progress")


def test_the_driver_prints_each_evaluation_as_it_is_recorded(run_repo, agent, capsys):
    root = run_repo(run_base=True)
    env = agent([[edit(1), COMMIT, {"bash": "bash evaluate.sh --offline --description 'stand-in'"}]])
    (root / "evaluate.sh").write_text((PROJECT / "evaluate.sh").read_text())  # as a clone has them, kept out of git
    (root / ".venv").symlink_to(PROJECT / ".venv")
    with open(root / ".git" / "info" / "exclude", "a") as f:
        f.write("/evaluate.sh\n/.venv\n")
    summary = drive(RunOptions(cwd=root, tag=TAG, agent="claude", env=env, max_evals=1))
    assert summary.spend.evals == 1
    printed = capsys.readouterr().out
    assert re.search(r"(?m)^  evaluation 1: [0-9a-f]{12} (baseline|discard|inconclusive|tampered): ", printed), printed
    assert re.search(r"(?m)^  stop: max_evals", printed)


# -- bad input: refused with exit 2, nothing started -----------------------------------------------------------


def refused(root: Path, *args: str, env: dict | None = None) -> str:
    """The real CLI refuses with exit 2."""
    done = autoenv("run", *args, cwd=root, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stdout + done.stderr


def refusal(root: Path, env: dict, **options) -> str:
    """drive() refuses before writing or starting anything."""
    with pytest.raises(AutoEnvError) as error:
        drive(RunOptions(cwd=root, **{"tag": TAG, "agent": "claude", **options}, env=env))
    assert not (root / "outputs" / "agent").exists()
    return str(error.value)


def test_bad_input_is_refused_before_anything_starts(run_repo, agent, tmp_path):
    root = run_repo(run_base=True)
    env = agent([[edit(1)]])
    out = refused(root, TAG, "--agent", "claude", env={**env, "PATH": "/usr/bin:/bin"})
    assert "not installed" in out and "npm install -g @anthropic-ai/claude-code" in out and "nothing was started" in out
    no_key = {k: v for k, v in env.items() if not k.startswith(("ANTHROPIC", "CLAUDE"))}
    out = refusal(root, {**no_key, "HOME": str(tmp_path)})
    assert "no API key" in out and "ANTHROPIC_API_KEY" in out
    out = refusal(root, env, tag="nope")
    assert "there is no run 'autoenv/nope'" in out and "autoenv new nope" in out
    for flag, value in (("max_evals", 0), ("max_hours", -1.0), ("max_usd", 0.0)):
        out = refusal(root, env, **{flag: value})
        assert f"--{flag.replace('_', '-')} " in out and "above zero" in out
    out = refusal(root, env, agent="command")
    assert "no command" in out and "--command" in out
    (root / "candidate" / "README.md").write_text("dirty\n")
    out = refusal(root, env)
    assert "uncommitted changes" in out and "candidate/README.md" in out
    assert launches(env) == []


def test_a_second_driver_on_the_same_run_is_refused_with_the_pid(run_repo, agent):
    root = run_repo(run_base=True)
    env = agent([[edit(1), {"hang": True}]])  # its work in progress makes the tree dirty: the PID is named still
    first = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "run", TAG, "--agent", "claude",
                              "--max-hours", "0.01"], cwd=root, env={**env, "NO_COLOR": "1"},
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not launches(env) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert launches(env), "the first driver never launched its agent"
        out = refused(root, TAG, "--agent", "claude", env=env)
        assert f"another autoenv run drives this run already (PID {first.pid})" in out and f"kill {first.pid}" in out
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    # SIGTERM ended the driver and its agent: the agent's process is gone, the lock is free
    with pytest.raises(ProcessLookupError):
        os.kill(launches(env)[0]["pid"], 0)
    assert head(root)


def test_log_agent_reads_at_80_and_60_columns_with_the_stop_reason_whole(run_repo, agent):
    """A real run's events (a start, a launch ended by a nudge, two launches, the stop): in a narrow terminal
    `log --agent` stacks them, every line within the width, no header cut to a letter, the stop reason whole."""
    root = run_repo(run_base=True)
    env = agent([[{"hang": True}], [edit(1), COMMIT], [edit(2), COMMIT]])
    drive(RunOptions(cwd=root, tag=TAG, agent="claude", max_usd=0.1, stall_minutes=0.05, env=env, grace=5))
    log = events(root)
    assert [e["event"] for e in log] == ["start", "launch", "nudge", "launch", "launch", "stop"]
    reason = log[-1]["reason"]
    assert reason.startswith("max_usd: ") and len(reason) > 60
    for columns in (80, 60):
        done = autoenv("log", "--agent", cwd=root, env={"COLUMNS": str(columns)})
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        print(done.stdout)
        assert max(len(line) for line in lines) <= columns, [line for line in lines if len(line) > columns]
        assert "…" not in done.stdout and "time (U" not in done.stdout  # nothing cut, no squeezed table
        joined = " ".join(line.strip() for line in lines)
        assert joined.startswith(f"autoenv/{TAG}: 3 agent launches, 1 nudge, agent $0.1000 ")
        assert f"stop: {reason} after " in joined  # the reason whole, then its numbers
        assert "launch 1: start exit -15, ended by nudge" in joined
        assert "nudge (launch 1): no commit and no evaluation for 0.05 min: resumed with a nudge" in joined
        assert joined.count("tokens 2000/200 · evals 0 · commits 1 · refused 0") == 2
        events_at = [line for line in lines[1:] if not line.startswith(("   ", "  $"))]  # the heading may wrap
        assert len(events_at) == 6 and all(re.match(r"\d\d-\d\d \d\d:\d\d (start|launch|nudge|stop)", line)
                                           for line in events_at)  # an event's time first, the rest indented
    wide = autoenv("log", "--agent", cwd=root, env={"COLUMNS": "132"}).stdout
    assert "time (UTC)   event   launch  ended by  seconds" in wide and "tokens in/out" in wide  # room: the table
    assert " ".join(wide.split()).count("max_usd:") == 1 and reason.split()[-1] in wide
