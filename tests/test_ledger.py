"""autoenv/ledger.py: the hash-chained, atomically written feedback log."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from autoenv import ledger
from autoenv.errors import AutoEnvError
from autoenv.ledger import GENESIS, SCHEMA_VERSION, append_entry, atomic_write, last_kept, read_entries, verify_chain


def sha(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()


@pytest.fixture
def log(tmp_path) -> Path:
    return tmp_path / "feedback" / "feedback_log.jsonl"


def test_append_writes_one_line_per_entry_with_chain(log):
    first = append_entry(log, {"commit": "aaa", "n": 1})
    second = append_entry(log, {"commit": "bbb", "n": 2})
    third = append_entry(log, {"commit": "ccc", "n": 3})
    lines = log.read_text().splitlines()
    assert len(lines) == 3
    assert log.read_text().endswith("\n")
    parsed = [json.loads(line) for line in lines]
    assert parsed == [first, second, third]
    assert [p["commit"] for p in parsed] == ["aaa", "bbb", "ccc"]
    assert all(p["schema_version"] == SCHEMA_VERSION for p in parsed)
    assert parsed[0]["prev_hash"] == GENESIS == "0" * 64
    assert parsed[1]["prev_hash"] == sha(lines[0])
    assert parsed[2]["prev_hash"] == sha(lines[1])
    assert verify_chain(log) == []


def test_append_creates_parent_directory(tmp_path):
    path = tmp_path / "a" / "b" / "log.jsonl"
    append_entry(path, {"x": 1})
    assert path.is_file()


def test_append_does_not_mutate_the_callers_dict(log):
    entry = {"commit": "aaa"}
    written = append_entry(log, entry)
    assert entry == {"commit": "aaa"}
    assert written["commit"] == "aaa" and "prev_hash" in written


def test_append_after_a_file_without_final_newline(log):
    append_entry(log, {"n": 1})
    log.write_text(log.read_text().rstrip("\n"))  # an editor dropped the final newline
    append_entry(log, {"n": 2})
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["prev_hash"] == sha(lines[0])
    assert verify_chain(log) == []


def test_verify_chain_flags_the_line_after_an_edit(log):
    for n in range(4):
        append_entry(log, {"n": n, "verdict": {"verdict": "keep"}})
    lines = log.read_text().splitlines()
    edited = json.loads(lines[1])
    edited["n"] = 99  # tamper with line 2's content
    lines[1] = json.dumps(edited)
    log.write_text("\n".join(lines) + "\n")
    assert verify_chain(log) == [3]


def test_verify_chain_flags_a_deleted_line(log):
    for n in range(4):
        append_entry(log, {"n": n})
    lines = log.read_text().splitlines()
    del lines[2]
    log.write_text("\n".join(lines) + "\n")
    assert verify_chain(log) == [3]


def test_verify_chain_flags_a_deleted_first_line(log):
    for n in range(3):
        append_entry(log, {"n": n})
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[1:]) + "\n")
    assert verify_chain(log) == [1]


def test_verify_chain_flags_an_edited_prev_hash(log):
    for n in range(3):
        append_entry(log, {"n": n})
    lines = log.read_text().splitlines()
    entry = json.loads(lines[2])
    entry["prev_hash"] = "f" * 64
    lines[2] = json.dumps(entry)
    log.write_text("\n".join(lines) + "\n")
    assert verify_chain(log) == [3]


def test_read_entries_round_trips(log):
    assert read_entries(log) == []  # no file yet
    written = [append_entry(log, {"n": n}) for n in range(3)]
    assert read_entries(log) == written


def test_read_entries_skips_blank_lines(log):
    append_entry(log, {"n": 1})
    log.write_text(log.read_text() + "\n   \n")
    assert [e["n"] for e in read_entries(log)] == [1]


def test_read_entries_names_a_corrupt_line(log):
    for n in range(3):
        append_entry(log, {"n": n})
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
    append_entry(log, {"n": 1})
    before = log.read_text()
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        append_entry(log, {"n": 2})
    monkeypatch.undo()
    assert log.read_text() == before
    assert sorted(p.name for p in log.parent.iterdir() if not p.name.endswith(".lock")) == [log.name]
    assert verify_chain(log) == []


def test_append_entry_rejects_unserialisable_entry_without_damage(log):
    append_entry(log, {"n": 1})
    before = log.read_text()
    with pytest.raises(TypeError):
        append_entry(log, {"n": object()})
    assert log.read_text() == before


def test_last_kept_skips_discard_and_crash():
    entries = [
        {"commit": "a", "verdict": {"verdict": "keep"}},
        {"commit": "b", "verdict": {"verdict": "keep"}},
        {"commit": "c", "verdict": {"verdict": "discard"}},
        {"commit": "d", "verdict": {"verdict": "crash"}},
        {"commit": "e"},
        {"commit": "f", "verdict": None},
    ]
    assert last_kept(entries)["commit"] == "b"


def test_last_kept_none():
    assert last_kept([]) is None
    assert last_kept([{"verdict": {"verdict": "discard"}}, {"verdict": {"verdict": "crash"}}]) is None


def test_last_kept_over_a_real_log(log):
    append_entry(log, {"commit": "a", "verdict": {"verdict": "keep"}})
    append_entry(log, {"commit": "b", "verdict": {"verdict": "discard"}})
    assert last_kept(read_entries(log))["commit"] == "a"
    assert ledger.line_hash("x\n") == ledger.line_hash("x") == sha("x")


def test_append_after_a_trailing_blank_line_keeps_the_chain_valid(log):
    append_entry(log, {"n": 1})
    log.write_text(log.read_text() + "\n")  # an editor left an empty last line
    assert verify_chain(log) == []  # blank lines are tolerated by the verifier...
    append_entry(log, {"n": 2})
    assert verify_chain(log) == []  # ...so the harness's own append must not break it
