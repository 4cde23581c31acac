"""The driver's files under outputs/agent/<tag>/: the lock, driver.json, session.json and events.jsonl.

- `driver.lock`: one driver per run. It is held with flock for the driver's life (the
  kernel releases it when the process dies, so a crash never leaves a stale lock) and
  holds the PID, so a second `autoenv run` names the one that runs.
- `driver.json`: what evaluations read (autoenv.driver.gate), rewritten atomically.
- `session.json`: the agent's session id, kept across `autoenv run` invocations so a new
  driver resumes the same conversation.
- `events.jsonl`: one line per start, launch, nudge and stop (`autoenv log --agent`).
- `launch-NNN.jsonl` / `launch-NNN.stderr`: each launch's transcript.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import IO

from autoenv.core.errors import AutoEnvError
from autoenv.core.formats import iso_now
from autoenv.run.ledger import atomic_write


class DriverLock:
    def __init__(self, directory: Path):
        self.path = directory / "driver.lock"
        self._file: IO[str] | None = None

    def probe(self) -> None:
        """Refuse when another driver holds the lock; writes nothing (for the checks before a run starts)."""
        if self.path.is_file():
            with open(self.path, "a+") as f:
                self._take(f)
                fcntl.flock(f, fcntl.LOCK_UN)

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")  # noqa: SIM115 -- held open for the driver's life
        self._take(f)
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._file = f

    def _take(self, f) -> None:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            other = f.read().strip() or "unknown"
            f.close()
            raise AutoEnvError(f"another autoenv run drives this run already (PID {other})", where=str(self.path),
                               fix=f"one driver per run: wait for it, or stop it with `kill {other}` "
                                   "(it ends its agent cleanly)") from None

    def release(self) -> None:
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def write_json(path: Path, data: dict) -> None:
    atomic_write(path, json.dumps(data, indent=1) + "\n")


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def log_event(directory: Path, event: str, **fields) -> dict:
    record = {"event": event, "time": iso_now(), **fields}
    with open(directory / "events.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    return record


def read_events(directory: Path) -> list[dict]:
    path = directory / "events.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
