"""What an evaluation asks of a running driver: may it start, and what has the agent spent.

`autoenv run` keeps `outputs/agent/<tag>/driver.json` up to date (its PID, the ledger
length when it started, its evaluation budget, and `stopping` once a budget is spent).
The evaluation reads it in preflight: with a live driver whose budget is spent, it refuses
to start (exit 2, nothing recorded), so no evaluation starts past a budget even between
the moment the budget is reached and the moment the driver has ended the agent; one that
starts may spend on the models only what the run has left of max_usd (`usd_left`). Without
a driver (an evaluation by hand) it changes nothing. Standard library only: pipeline
imports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from autoenv.core.errors import AutoEnvError

AGENT_DIR = "agent"


def driver_dir(outputs: Path, tag: str) -> Path:
    return outputs / AGENT_DIR / tag


def read_state(outputs: Path, branch: str | None) -> dict | None:
    """The live driver's state for the run on `branch`, or None (no driver, or its process is gone)."""
    if not branch or not branch.startswith("autoenv/"):
        return None
    path = driver_dir(outputs, branch[len("autoenv/"):]) / "driver.json"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and alive(state.get("pid")) else None


def alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def refuse_when_spent(outputs: Path, log_file: Path, branch: str | None) -> None:
    """Raise when a live driver of this run has spent its budget (see the module docstring)."""
    state = read_state(outputs, branch)
    if state is None:
        return
    where = str(driver_dir(outputs, (branch or "")[len("autoenv/"):]) / "driver.json")
    fix = ("nothing to do: the driver has ended the run (see `autoenv log --agent`); a new budget is the person's: "
           "they start one with autoenv run")
    if state.get("stopping"):
        raise AutoEnvError(f"autoenv run (PID {state['pid']}) has stopped the run: {state['stopping']}; "
                           "no new evaluation starts", where=where, fix=fix)
    start, limit = state.get("ledger_start", 0), state.get("max_evals")
    done = run_evaluations(log_file, start if isinstance(start, int) else 0)
    if isinstance(limit, int) and done >= limit:
        raise AutoEnvError(f"autoenv run (PID {state['pid']}) allows {limit} evaluations and {done} are done; "
                           "no new evaluation starts", where=where, fix=fix)


def run_evaluations(log_file: Path, start: int) -> int:
    """Ledger entries after the first `start` lines that evaluated the run's candidate (not `eval --env`'s)."""
    try:
        lines = [line for line in log_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError:
        return 0
    return sum(1 for line in lines[start:] if not _environment(line))


def _environment(line: str) -> bool:
    try:
        entry = json.loads(line)
    except ValueError:
        return False
    return isinstance(entry, dict) and bool(entry.get("environment"))


def agent_usd(outputs: Path, branch: str | None) -> float | None:
    """USD the coding agent has spent in the live driver's run so far, or None without a driver."""
    state = read_state(outputs, branch)
    if state is None:
        return None
    value = (state.get("spend") or {}).get("agent_usd")
    return float(value) if isinstance(value, (int, float)) else None


def usd_left(outputs: Path, branch: str | None) -> float | None:
    """USD the live driver's run has left of its max_usd (never below 0), or None without a driver; the
    evaluation's forwarder refuses model requests past it (autoenv.sandbox.forwarder.SpendCap)."""
    state = read_state(outputs, branch)
    if state is None:
        return None
    limit = (state.get("limits") or {}).get("usd")
    spent = (state.get("spend") or {}).get("usd", 0.0)
    if not isinstance(limit, (int, float)) or not isinstance(spent, (int, float)):
        return None
    return max(0.0, float(limit) - float(spent))
