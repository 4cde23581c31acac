"""feedback_log.jsonl: one JSON entry per evaluation, hash-chained, appended atomically.

An entry is never half-written: the new file (old lines plus the new one) is written to
a temporary file, fsynced and renamed over the log under an exclusive lock, so an
interrupted evaluation leaves the previous log intact. Each entry carries `prev_hash`,
the SHA-256 of the previous line, so an edited or deleted line shows.

Entries are `autoenv.record.Entry` objects; this module is the only place that turns them
into JSON and back (older schema versions are upgraded on read).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from autoenv.errors import AutoEnvError
from autoenv.record import SCHEMA_VERSION, Entry, RecordError

GENESIS = "0" * 64


def line_hash(line: str) -> str:
    return hashlib.sha256(line.rstrip("\n").encode()).hexdigest()


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` so readers see the old or the new file, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_entry(path: Path, entry: Entry) -> Entry:
    """Append `entry` (with schema_version and prev_hash filled in); return it as written."""
    with _locked(path):
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        lines = [line for line in old.splitlines() if line.strip()]
        entry = entry.model_copy(update={"schema_version": SCHEMA_VERSION,
                                         "prev_hash": line_hash(lines[-1]) if lines else GENESIS})
        atomic_write(path, old + entry.to_json() + "\n")
    return entry


def read_entries(path: Path) -> list[Entry]:
    """All entries, typed; raises AutoEnvError naming the line of a corrupt entry."""
    if not path.is_file():
        return []
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(Entry.from_json(json.loads(line)))
        except json.JSONDecodeError as e:
            raise AutoEnvError(
                f"{path.name} line {number} is not valid JSON ({e.msg})",
                where=f"{path}:{number}",
                fix="restore the file from a backup; the harness never writes partial lines",
            ) from None
        except RecordError as e:
            raise AutoEnvError(
                f"{path.name} line {number} is not a valid ledger entry ({e})",
                where=f"{path}:{number}",
                fix="restore the line from a backup (the harness writes only valid entries), "
                "or upgrade AutoEnv if a newer version wrote it",
            ) from None
    return entries


def verify_chain(path: Path) -> list[int]:
    """Line numbers whose prev_hash does not match the line before (empty when intact)."""
    broken, previous = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        expected = GENESIS if previous is None else line_hash(previous)
        if json.loads(line).get("prev_hash") != expected:
            broken.append(number)
        previous = line
    return broken


def last_kept(entries: list[Entry], accept: Callable[[Entry], bool] = lambda entry: True) -> Entry | None:
    """The newest entry whose verdict is keep (and that `accept` admits)."""
    for entry in reversed(entries):
        if entry.kept and accept(entry):
            return entry
    return None


def chain_breaks(path: Path) -> list[bool]:
    """For each entry `read_entries` returns, whether the hash chain breaks right before it
    (the line before was edited, or a line was removed)."""
    if not path.is_file():
        return []
    broken = set(verify_chain(path))
    numbers = [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    return [n in broken for n in numbers]
