"""feedback_log.jsonl: one JSON entry per evaluation, hash-chained, appended atomically.

An entry is never half-written: the new file (old lines plus the new one) is written to
a temporary file, fsynced and renamed over the log under an exclusive lock, so an
interrupted evaluation leaves the previous log intact. Each entry carries `prev_hash`,
the SHA-256 of the previous line, so an edited or deleted line shows.

Entries are `autoenv.core.record.Entry` objects; this module is the only place that turns them
into JSON and back (older schema versions are upgraded on read).

`verify` is preflight's check: every line JSON, a valid entry, and the chain intact,
refused with file:line and the fix before any work (a corrupt line used to surface only
when recording, after all model spend). It also removes a temporary file a killed write
left behind (`.feedback_log.jsonl.<random>.tmp`, git-ignored): under the lock no write is
in flight, so any such file is stale.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from autoenv.core.errors import AutoEnvError
from autoenv.core.record import SCHEMA_VERSION, Entry, RecordError

GENESIS = "0" * 64
TEMP_SUFFIX = ".tmp"


def line_hash(line: str) -> str:
    return hashlib.sha256(line.rstrip("\n").encode()).hexdigest()


@contextmanager
def locked(path: Path):
    """The ledger's exclusive lock (held by every write); not re-entrant."""
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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
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
    with locked(path):
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        lines = [line for line in old.splitlines() if line.strip()]
        entry = entry.model_copy(update={"schema_version": SCHEMA_VERSION,
                                         "prev_hash": line_hash(lines[-1]) if lines else GENESIS})
        atomic_write(path, old + entry.to_json() + "\n")
    return entry


def raw_lines(path: Path) -> list[str]:
    """The ledger's non-blank lines as written (none when the file is missing)."""
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]


def _objects(path: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line number, line, JSON object) for each non-blank line; AutoEnvError names a bad one."""
    if not path.is_file():
        return
    for number, raw in enumerate(path.read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
            data = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            reason = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8 text"
            raise AutoEnvError(
                f"{path.name} line {number} is not valid JSON ({reason})",
                where=f"{path}:{number}",
                fix="the person restores the file from a backup (the harness never writes partial lines)",
            ) from None
        if not isinstance(data, dict):
            raise AutoEnvError(
                f"{path.name} line {number} is JSON but not an object (a ledger entry is one object per line)",
                where=f"{path}:{number}",
                fix="the person restores the line from a backup (the harness writes only entry objects)",
            )
        yield number, line, data


def read_entries(path: Path) -> list[Entry]:
    """All entries, typed; raises AutoEnvError naming the line of a corrupt entry."""
    entries = []
    for number, _, data in _objects(path):
        try:
            entries.append(Entry.from_json(data))
        except RecordError as e:
            raise AutoEnvError(
                f"{path.name} line {number} is not a valid ledger entry ({e})",
                where=f"{path}:{number}",
                fix="the person restores the line from a backup (the harness writes only valid entries), "
                "or upgrades AutoEnv if a newer version wrote it",
            ) from None
    return entries


def verify_chain(path: Path) -> list[int]:
    """Line numbers whose prev_hash does not match the line before (empty when intact)."""
    broken, previous = [], None
    for number, line, data in _objects(path):
        expected = GENESIS if previous is None else line_hash(previous)
        if data.get("prev_hash") != expected:
            broken.append(number)
        previous = line
    return broken


def verify(path: Path) -> list[str]:
    """Preflight's check of the ledger: stale temporary files removed (returned as notes),
    then every entry read and the chain verified; AutoEnvError with file:line otherwise."""
    notes = remove_stale_temp_files(path)
    read_entries(path)
    broken = verify_chain(path)
    if broken:
        first = broken[0]
        more = f" (and {len(broken) - 1} more line(s) after it)" if len(broken) > 1 else ""
        cause = ("lines before it were removed" if first == 1
                 else f"line {first - 1} or one above it was edited, removed or reordered")
        raise AutoEnvError(
            f"{path.name} line {first}{more} breaks the hash chain: its prev_hash is not the hash of the line "
            f"before it, so {cause}; the verdict's baseline cannot be trusted",
            where=f"{path}:{first}",
            fix=f"the person restores {path.name} from a backup (the harness only appends), or moves it aside to "
            f"start a new ledger (mv {path.name} {path.name}.edited): the next evaluation is then the first, kept one",
        )
    return notes


def temp_files(path: Path) -> list[Path]:
    """Temporary files `atomic_write` makes for `path` (mkstemp's 8 random characters; the
    `.tmp` suffix is missing on files left by older versions)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}({re.escape(TEMP_SUFFIX)})?")
    if not path.parent.is_dir():
        return []
    return sorted(p for p in path.parent.iterdir() if pattern.fullmatch(p.name) and p.is_file())


def remove_stale_temp_files(path: Path) -> list[str]:
    """Remove what a killed append left behind (under the lock, so never a write in flight)."""
    if not temp_files(path):
        return []
    with locked(path):
        stale = temp_files(path)
        for tmp in stale:
            tmp.unlink(missing_ok=True)
    return [f"removed {tmp.name}, a temporary file an interrupted ledger write left behind ({path.name} itself "
            "is intact)" for tmp in stale]


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
