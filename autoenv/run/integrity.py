"""The ledger against the git notes: `autoenv verify`, and the check every evaluation records.

The hash chain in feedback_log.jsonl shows an edited, inserted or reordered line, but not
a deleted *last* line: nothing comes after it to notice. So the git note of each evaluated
commit carries the hash of its entry's line (`entry: <sha256>`) and of the ledger's first
line (`ledger: <sha256>`, so notes written for another ledger, e.g. another worktree's
or one moved aside, are told apart). `check` compares the two and names each problem by
line and commit. Every recorded line is also appended to `outputs/<commit>/entries.jsonl`,
so `rebuild` can restore a lost ledger from the notes and the stored outputs.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.core.record import Entry, RecordError
from autoenv.run.ledger import GENESIS, atomic_write, line_hash, locked, raw_lines

ENTRY_FIELD = re.compile(r"(?m)^entry: ([0-9a-f]{64})$")
LEDGER_FIELD = re.compile(r"(?m)^ledger: ([0-9a-f]{64})$")
STORED = "entries.jsonl"


def note_fields(entry_hash: str, ledger_id: str) -> str:
    """The lines a note carries so `check` can find its entry."""
    return f"entry: {entry_hash}\nledger: {ledger_id}"


@dataclass(frozen=True)
class Noted:
    commit: str
    entry: str
    ledger: str | None


def parse_notes(notes: dict[str, str]) -> list[Noted]:
    """Notes that carry an entry hash (older harnesses wrote none)."""
    out = []
    for commit, text in notes.items():
        entry, ledger = ENTRY_FIELD.search(text), LEDGER_FIELD.search(text)
        if entry:
            out.append(Noted(commit, entry.group(1), ledger.group(1) if ledger else None))
    return out


def own_commits(outputs: Path, ancestors: list[str]) -> set[str]:
    """The commits whose notes a missing ledger here would have written: HEAD's ancestors, and the commits this
    checkout's outputs folder holds an entry for (notes are shared by every worktree of the repository; another
    worktree's evaluations are neither)."""
    stored = {p.parent.name for p in outputs.glob(f"*/{STORED}")} if outputs.is_dir() else set()
    return set(ancestors) | stored


def check(path: Path, notes: dict[str, str], ours: set[str] | None = None) -> list[str]:
    """Every problem found, each naming the line or commit (empty when ledger and notes agree). `ours`
    (own_commits): with the ledger missing, only these commits' notes say it was lost."""
    lines = raw_lines(path)
    hashes = [line_hash(line) for line in lines]
    where = {h: i + 1 for i, h in enumerate(hashes)}
    commits = [_commit(line) for line in lines]
    ledger_id = hashes[0] if hashes else None
    noted = [n for n in parse_notes(notes) if ledger_id is None or n.ledger in (None, ledger_id)]
    by_hash = {n.entry: n for n in noted}
    problems: list[str] = []
    if not lines:
        noted = [n for n in noted if ours is None or n.commit in ours]
        if noted:
            problems.append(f"{path.name} is missing or empty but {len(noted)} evaluated commit(s) have git notes: "
                            "the ledger was lost or deleted (autoenv verify --rebuild restores it)")
        return problems
    prevs = [_prev_hash(line) for line in lines]
    # a line whose predecessor stands after it: the lines were reordered (a skip is then no insertion)
    reordered = [i + 1 for i, p in enumerate(prevs) if p in where and where[p] > i]
    for i, prev in enumerate(prevs):
        number = i + 1
        expected = GENESIS if i == 0 else hashes[i - 1]
        if prev == expected or (reordered and prev in where):
            if number in reordered:
                problems.append(f"line {number} is out of order: its entry came after line {where[prev]}'s "
                                "(reordered)")
            continue
        if prev in where:
            problems.append(f"line(s) {where[prev] + 1}–{number - 1} were inserted: line {number} continues the "
                            f"chain from line {where[prev]}")
        elif prev in by_hash and by_hash[prev].commit not in commits:
            problems.append(f"the entry of commit {by_hash[prev].commit[:12]} before line {number} was deleted")
        elif prev == GENESIS:
            problems.append(f"line {number} starts a new chain: the lines before it do not belong to this ledger")
        elif i == 0:
            problems.append("line 1 is not the first entry: the lines before it were deleted")
        else:
            problems.append(f"line {number - 1} was edited, or an entry before line {number} was deleted")
    for note in noted:
        if note.entry in where:
            last = max(i for i, c in enumerate(commits) if c == note.commit) + 1 if note.commit in commits else None
            if last is not None and last != where[note.entry]:
                problems.append(f"line {last} (commit {note.commit[:12]}) is not the entry its git note records "
                                f"(line {where[note.entry]}): inserted by hand")
            continue
        mine = [i + 1 for i, c in enumerate(commits) if c == note.commit]
        if mine:
            problems.append(f"line {mine[-1]} (commit {note.commit[:12]}) was edited: its hash is not the one its "
                            "git note records")
        elif not any(p.startswith(f"the entry of commit {note.commit[:12]}") for p in problems):
            problems.append(f"the entry of commit {note.commit[:12]} was deleted: its git note records entry "
                            f"{note.entry[:12]}, which is not in {path.name}")
    return problems


NO_NOTE = "has no git note"


def written_by_others(path: Path, seen: list[str], notes: dict[str, str]) -> tuple[list[str], list[str]]:
    """The ledger now against `seen`, its lines when this evaluation's preflight verified it:
    (what someone other than the harness wrote, the lines to keep).

    Other evaluations (other commits, other worktrees of the run) may append meanwhile: their
    lines continue the chain, read as entries and carry the git note the harness writes. Any
    other change (a line edited or removed, a line that is no entry, breaks the chain or has
    no note) was written by someone else: the candidate when it ran unconfined, or the agent.
    The lines to keep are `seen` plus the harness's appended lines before the first such one."""
    now = raw_lines(path)
    if now[:len(seen)] != seen:
        changed = next((i + 1 for i, line in enumerate(seen) if i >= len(now) or now[i] != line), len(seen))
        return [f"line {changed} of the {len(seen)} preflight verified was changed or removed"], seen
    by_entry = {n.entry for n in parse_notes(notes)}
    keep, problems = list(seen), []
    for number, line in enumerate(now[len(seen):], len(seen) + 1):
        try:
            Entry.from_json(json.loads(line))
        except (ValueError, RecordError, AttributeError) as e:
            problems.append(f"line {number} is not a ledger entry ({str(e).splitlines()[0][:120]})")
        else:
            if _prev_hash(line) != (line_hash(keep[-1]) if keep else GENESIS):
                problems.append(f"line {number} does not continue the hash chain")
            elif line_hash(line) not in by_entry:
                problems.append(f"line {number} (commit {_commit(line)[:12]}) {NO_NOTE}: no evaluation recorded it")
        if problems:
            break
        keep.append(line)
    return problems, keep


FOUND = "ledger-written-by-others.jsonl"


def restore_if_written(path: Path, seen: list[str], notes: Callable[[], dict[str, str]], aside: Path) -> list[str]:
    """Before recording: what someone other than the harness wrote to the ledger since `seen`.

    When something was, the ledger as found is copied to `aside` and the ledger is rewritten
    to the lines to keep, under the ledger's lock. A line without its note is looked at again
    after a moment: another evaluation appends its line first and writes the note right after."""
    for wait in (1.0, 2.0, None):
        with locked(path):
            problems, keep = written_by_others(path, seen, notes())
            if not problems:
                return []
            if wait is None or not all(NO_NOTE in problem for problem in problems):
                aside.parent.mkdir(parents=True, exist_ok=True)
                aside.write_bytes(path.read_bytes() if path.is_file() else b"")
                atomic_write(path, "".join(line + "\n" for line in keep))
                return problems
        time.sleep(wait)
    return []


def summary(path: Path, notes: dict[str, str], problems: list[str]) -> str:
    """One line for the entry and the terminal."""
    if problems:
        return f"{len(problems)} problem(s): " + "; ".join(problems)
    return f"intact: {len(raw_lines(path))} entries, the hash chain and the git notes agree"


def rebuild(path: Path, outputs: Path, notes: dict[str, str]) -> int:
    """Restore a lost ledger from the lines stored under `outputs` and the git notes; the number of entries."""
    if raw_lines(path):
        raise AutoEnvError(f"{path.name} exists and is not empty: rebuild only restores a lost ledger",
                           where=str(path), fix=f"the person moves it aside first (mv {path.name} "
                           f"{path.name}.damaged), then runs autoenv verify --rebuild")
    stored = {line_hash(line): line for f in sorted(outputs.rglob(STORED)) for line in raw_lines(f)}
    heads = [stored[n.entry] for n in parse_notes(notes) if n.entry in stored]
    if not heads:
        raise AutoEnvError("no git note points at an entry stored under the outputs", where=str(outputs),
                           fix="nothing to rebuild from: the next evaluation starts a new ledger")
    pointed = {_prev_hash(line) for line in stored.values()}
    tips = [line for line in heads if line_hash(line) not in pointed] or heads  # nothing recorded after them
    chain = [max(tips, key=lambda line: json.loads(line).get("timestamp", ""))]
    while (prev := _prev_hash(chain[-1])) != GENESIS:
        if prev not in stored:
            raise AutoEnvError(f"the entry before {_commit(chain[-1])[:12]} is not stored under {outputs}",
                               where=str(outputs), fix="the person restores the outputs folder from a backup")
        chain.append(stored[prev])
    atomic_write(path, "".join(line + "\n" for line in reversed(chain)))
    return len(chain)


def _prev_hash(line: str) -> str:
    try:
        return str(json.loads(line).get("prev_hash", ""))
    except (ValueError, AttributeError):
        return ""


def _commit(line: str) -> str:
    """The line's commit; "" for an `--env` evaluation, which writes no git note (its commit's note is the run's)."""
    try:
        data = json.loads(line)
        return "" if data.get("environment") else str(data.get("commit", ""))
    except (ValueError, AttributeError):
        return ""
