"""autoenv/run/ledger.py: the hash-chained, atomically written feedback log."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from autoenv.core.errors import AutoEnvError
from autoenv.core.record import Entry, Verdict
from autoenv.run import ledger
from autoenv.run.ledger import (
    GENESIS,
    SCHEMA_VERSION,
    TEMP_SUFFIX,
    append_entry,
    atomic_write,
    last_kept,
    read_entries,
    verify_chain,
)


def E(n: int = 0, commit: str | None = None, verdict: str = "keep", **fields) -> Entry:
    """A small valid entry; `n` travels in the description."""
    return Entry(commit=commit or f"{n:040d}", timestamp="2026-01-01T00:00:00+00:00", description=f"n={n}",
                 eval_success=True, verdict=Verdict(verdict=verdict, reason="-"), **fields)


def sha(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()


@pytest.fixture
def log(tmp_path) -> Path:
    return tmp_path / "feedback" / "feedback_log.jsonl"


def test_append_writes_one_line_per_entry_with_chain(log):
    first = append_entry(log, E(1, "aaa"))
    second = append_entry(log, E(2, "bbb"))
    third = append_entry(log, E(3, "ccc"))
    lines = log.read_text().splitlines()
    assert len(lines) == 3
    assert log.read_text().endswith("\n")
    parsed = [json.loads(line) for line in lines]
    assert [Entry.from_json(p) for p in parsed] == [first, second, third]
    assert [p["commit"] for p in parsed] == ["aaa", "bbb", "ccc"]
    assert all(p["schema_version"] == SCHEMA_VERSION for p in parsed)
    assert parsed[0]["prev_hash"] == GENESIS == "0" * 64
    assert parsed[1]["prev_hash"] == sha(lines[0])
    assert parsed[2]["prev_hash"] == sha(lines[1])
    assert verify_chain(log) == []


def test_append_creates_parent_directory(tmp_path):
    path = tmp_path / "a" / "b" / "log.jsonl"
    append_entry(path, E(1))
    assert path.is_file()


def test_append_does_not_mutate_the_callers_entry(log):
    entry = E(0, "aaa")
    written = append_entry(log, entry)
    assert entry.prev_hash == ""
    assert written.commit == "aaa" and written.prev_hash == GENESIS


def test_append_after_a_file_without_final_newline(log):
    append_entry(log, E(1))
    log.write_text(log.read_text().rstrip("\n"))  # an editor dropped the final newline
    append_entry(log, E(2))
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["prev_hash"] == sha(lines[0])
    assert verify_chain(log) == []


def test_verify_chain_flags_the_line_after_an_edit(log):
    for n in range(4):
        append_entry(log, E(n))
    lines = log.read_text().splitlines()
    edited = json.loads(lines[1])
    edited["description"] = "n=99"  # tamper with line 2's content
    lines[1] = json.dumps(edited)
    log.write_text("\n".join(lines) + "\n")
    assert verify_chain(log) == [3]


def test_verify_chain_flags_a_deleted_line(log):
    for n in range(4):
        append_entry(log, E(n))
    lines = log.read_text().splitlines()
    del lines[2]
    log.write_text("\n".join(lines) + "\n")
    assert verify_chain(log) == [3]


def test_verify_chain_flags_a_deleted_first_line(log):
    for n in range(3):
        append_entry(log, E(n))
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[1:]) + "\n")
    assert verify_chain(log) == [1]


def test_verify_chain_flags_an_edited_prev_hash(log):
    for n in range(3):
        append_entry(log, E(n))
    lines = log.read_text().splitlines()
    entry = json.loads(lines[2])
    entry["prev_hash"] = "f" * 64
    lines[2] = json.dumps(entry)
    log.write_text("\n".join(lines) + "\n")
    assert verify_chain(log) == [3]


def test_read_entries_round_trips(log):
    assert read_entries(log) == []  # no file yet
    written = [append_entry(log, E(n)) for n in range(3)]
    assert read_entries(log) == written


def test_read_entries_skips_blank_lines(log):
    append_entry(log, E(1))
    log.write_text(log.read_text() + "\n   \n")
    assert [e.description for e in read_entries(log)] == ["n=1"]


def test_read_entries_names_a_corrupt_line(log):
    for n in range(3):
        append_entry(log, E(n))
    lines = log.read_text().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]  # half a line
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(AutoEnvError) as info:
        read_entries(log)
    assert info.value.where == f"{log}:2"
    assert "line 2" in info.value.what
    assert info.value.fix


def test_atomic_write_replaces_content(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write(path, "old\n")
    atomic_write(path, "new\n")
    assert path.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_atomic_write_failure_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "feedback_log.jsonl"
    path.write_text("old line\n")

    def broken_replace(src, dst):
        raise OSError("disk vanished")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk vanished"):
        atomic_write(path, "new content\n")
    monkeypatch.undo()
    assert path.read_text() == "old line\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feedback_log.jsonl"]


def test_atomic_write_failure_while_writing(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_text("old\n")

    def broken_fsync(fd):
        raise OSError("fsync failed")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        atomic_write(path, "new\n")
    monkeypatch.undo()
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_append_entry_failure_keeps_log_intact(log, monkeypatch):
    append_entry(log, E(1))
    before = log.read_text()
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        append_entry(log, E(2))
    monkeypatch.undo()
    assert log.read_text() == before
    assert sorted(p.name for p in log.parent.iterdir() if not p.name.endswith(".lock")) == [log.name]
    assert verify_chain(log) == []


def test_append_entry_rejects_unserialisable_entry_without_damage(log):
    append_entry(log, E(1))
    before = log.read_text()
    with pytest.raises(ValueError):  # JSON has no NaN: the ledger refuses it rather than write a bad line
        append_entry(log, E(2, timings={"judge": float("nan")}))
    assert log.read_text() == before


def test_last_kept_skips_discard_and_crash():
    entries = [E(0, "a"), E(1, "b"), E(2, "c", "discard"), E(3, "d", "crash"), E(4, "e", "inconclusive")]
    assert last_kept(entries).commit == "b"


@pytest.mark.parametrize("verdict", [None, "absent", {"verdict": "maybe", "reason": "-"}])
def test_an_entry_without_a_real_verdict_is_refused_with_its_line(log, verdict):
    append_entry(log, E(0, "a"))
    raw = json.loads(log.read_text())
    if verdict == "absent":
        del raw["verdict"]
    else:
        raw["verdict"] = verdict
    log.write_text(log.read_text() + json.dumps(raw) + "\n")
    with pytest.raises(AutoEnvError) as info:
        read_entries(log)
    assert info.value.where == f"{log}:2" and "verdict" in info.value.what


def test_last_kept_none():
    assert last_kept([]) is None
    assert last_kept([E(0, verdict="discard"), E(1, verdict="crash")]) is None


def test_last_kept_over_a_real_log(log):
    append_entry(log, E(0, "a"))
    append_entry(log, E(1, "b", "discard"))
    assert last_kept(read_entries(log)).commit == "a"
    assert ledger.line_hash("x\n") == ledger.line_hash("x") == sha("x")


def test_append_after_a_trailing_blank_line_keeps_the_chain_valid(log):
    append_entry(log, E(1))
    log.write_text(log.read_text() + "\n")  # an editor left an empty last line
    assert verify_chain(log) == []  # blank lines are tolerated by the verifier...
    append_entry(log, E(2))
    assert verify_chain(log) == []  # ...so the harness's own append must not break it


def test_verify_passes_an_intact_ledger_and_a_missing_one(log):
    assert ledger.verify(log) == []  # no ledger yet: nothing to check
    for n in range(3):
        append_entry(log, E(n))
    assert ledger.verify(log) == []


@pytest.mark.parametrize("damage,where,words", [
    (lambda lines: lines[:1] + [lines[1][:40]] + lines[2:], 2, "not valid JSON"),
    (lambda lines: lines[:2] + ["[1, 2]"], 3, "not an object"),
    (lambda lines: [lines[0], lines[2]], 2, "breaks the hash chain"),
    (lambda lines: lines[1:], 1, "lines before it were removed"),
])
def test_verify_names_the_line_and_the_fix(log, damage, where, words):
    for n in range(3):
        append_entry(log, E(n))
    log.write_text("\n".join(damage(log.read_text().splitlines())) + "\n")
    with pytest.raises(AutoEnvError) as info:
        ledger.verify(log)
    assert info.value.where == f"{log}:{where}" and f"line {where}" in info.value.what
    assert words in info.value.what and "backup" in info.value.fix


def test_verify_names_a_line_that_is_not_utf8(log):
    append_entry(log, E(1))
    log.write_bytes(log.read_bytes() + b'{"commit": "\xff\xfe"}\n')
    with pytest.raises(AutoEnvError) as info:
        ledger.verify(log)
    assert info.value.where == f"{log}:2" and "not UTF-8" in info.value.what


def test_an_edited_line_is_refused_with_the_line_after_it(log):
    for n in range(4):
        append_entry(log, E(n))
    log.write_text(log.read_text().replace('"n=1"', '"n=one"'))
    with pytest.raises(AutoEnvError) as info:
        ledger.verify(log)
    assert info.value.where == f"{log}:3" and "line 2 or one above it was edited" in info.value.what
    assert f"mv {log.name} {log.name}.edited" in info.value.fix


def test_verify_removes_stale_temp_files_only(log):
    append_entry(log, E(1))
    before = log.read_text()
    stale = [log.parent / f".{log.name}.ab_c1234{TEMP_SUFFIX}", log.parent / f".{log.name}.zz9y8x7w"]  # new, older
    kept = [log.parent / f".{log.name}.bak", log.parent / f"{log.name}.ab_c1234.tmp", log.parent / "notes.tmp"]
    for path in stale + kept:
        path.write_text("half a line")
    assert ledger.temp_files(log) == sorted(stale)
    notes = ledger.verify(log)
    assert len(notes) == 2 and all("interrupted ledger write" in n and "intact" in n for n in notes)
    assert {p.name for p in stale} == {n.split(",")[0].removeprefix("removed ") for n in notes}
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)
    assert log.read_text() == before and ledger.verify(log) == []


def test_atomic_write_temp_files_are_the_ones_verify_recognises(log, monkeypatch):
    append_entry(log, E(1))
    seen = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (seen.append(Path(src)), real_replace(src, dst)))
    append_entry(log, E(2))
    (tmp,) = seen
    assert tmp.name.startswith(f".{log.name}.") and tmp.name.endswith(TEMP_SUFFIX)
    tmp.write_text("left by a kill")
    assert ledger.temp_files(log) == [tmp]
