"""autoenv/core/record.py: the typed ledger entry, its committed JSON Schema, and version-1 entries on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoenv.core.errors import AutoEnvError
from autoenv.core.record import (
    SCHEMA_FILE,
    SCHEMA_VERSION,
    Entry,
    ErrorCounts,
    Findings,
    GateFinding,
    GateReport,
    RecordError,
    TaskRow,
    Verdict,
    json_schema,
    schema_text,
)
from autoenv.run.ledger import append_entry, read_entries, verify_chain

V1_LEDGER = Path(__file__).parent / "data" / "ledger_v1.jsonl"


def test_the_committed_schema_is_current():
    assert SCHEMA_FILE.is_file(), "run: .venv/bin/python -m autoenv.core.record"
    assert SCHEMA_FILE.read_text() == schema_text(), "autoenv/schema/entry.schema.json is stale: run python -m autoenv.core.record"


def test_the_schema_documents_every_field():
    schema = json_schema()
    missing = []
    for name, node in [("Entry", schema), *schema["$defs"].items()]:
        for field, spec in (node.get("properties") or {}).items():
            if not spec.get("description"):
                missing.append(f"{name}.{field}")
    assert missing == []


def test_verdicts_and_statuses_are_closed_sets():
    schema = json_schema()
    verdicts = {"baseline", "keep", "discard", "inconclusive", "crash", "tampered", "cached"}
    assert set(schema["$defs"]["Verdict"]["properties"]["verdict"]["enum"]) == verdicts
    assert set(schema["$defs"]["GateFinding"]["properties"]["status"]["enum"]) == {"pass", "warn", "fail", "skip"}
    with pytest.raises(ValueError):
        Verdict(verdict="maybe", reason="-")


def test_an_entry_round_trips_through_its_json_line():
    entry = Entry(commit="a" * 40, timestamp="2026-01-01T00:00:00+00:00", eval_success=True,
                  verdict=Verdict(verdict="keep", reason="first"),
                  gates=GateReport(findings=[GateFinding(name="oracle", status="fail", message="low")]))
    line = entry.to_json()
    back = Entry.from_json(json.loads(line))
    assert back == entry
    raw = json.loads(line)
    assert raw["gates"]["passed"] is False and raw["gates"]["failed"] == ["oracle: low"]  # derived, but written
    assert raw["schema_version"] == SCHEMA_VERSION


def test_a_baseline_is_kept_and_a_version_2_entry_still_reads():
    base = Entry(commit="a" * 40, timestamp="t", eval_success=True, verdict=Verdict(verdict="baseline", reason="first"))
    assert base.kept and Entry.from_json(json.loads(base.to_json())) == base
    assert not base.model_copy(update={"verdict": Verdict(verdict="inconclusive", reason="-")}).kept
    v2 = json.loads(base.model_copy(update={"verdict": Verdict(verdict="keep", reason="first")}).to_json())
    v2["schema_version"] = 2
    assert Entry.from_json(v2).kept and Entry.from_json(v2).schema_version == 2


def test_unknown_keys_and_newer_versions_are_refused():
    raw = json.loads(Entry(commit="a", timestamp="t", eval_success=True,
                           verdict=Verdict(verdict="keep", reason="-")).to_json())
    with pytest.raises(RecordError, match="surprise"):
        Entry.from_json(raw | {"surprise": 1})
    with pytest.raises(RecordError, match="newer"):
        Entry.from_json(raw | {"schema_version": SCHEMA_VERSION + 1})


def test_error_counts_and_rows_are_named():
    errors = ErrorCounts(provider_error=1, env_error=2)
    assert errors.total == 3 and errors.rate("env_error", 8) == 0.25 and errors.rate("timeout", 0) == 0.0
    assert TaskRow(sum=1.5, n=3, disagree=True).model_dump() == {"sum": 1.5, "n": 3, "disagree": True}


def test_findings_reject_a_score_out_of_range():
    good = {"summary": "s", "spec_fidelity": {"score": 7, "gaps": []},
            "reward_faithfulness": {"suspected_hacks": []}, "rl_readiness": {"assessment": "a", "concerns": []},
            "dataset_quality": {"assessment": "d", "issues": []}, "priorities": []}
    assert Findings.model_validate(good).spec_fidelity.score == 7
    with pytest.raises(ValueError):
        Findings.model_validate(good | {"spec_fidelity": {"score": 11, "gaps": []}})


# --- version-1 ledgers written by the first landed harness ---------------------------------


def test_a_version_1_ledger_is_read_by_the_new_code():
    entries = read_entries(V1_LEDGER)
    raw = [json.loads(line) for line in V1_LEDGER.read_text().splitlines() if line.strip()]
    assert len(entries) == len(raw) >= 4
    assert all(e.schema_version == 1 for e in entries)
    assert [e.verdict.verdict for e in entries] == [r["verdict"]["verdict"] for r in raw]
    assert {"keep", "discard", "crash"} <= {e.verdict.verdict for e in entries}
    for entry, line in zip(entries, raw):
        for role, stats in line["stats"].items():
            typed = entry.stats[role]
            assert typed.mean == stats["mean"] and typed.model == stats["model"]
            assert typed.errors.model_dump() == stats["errors"]
            for key, (total, n, disagree) in stats["per_task"].items():
                assert (typed.per_task[key].sum, typed.per_task[key].n, typed.per_task[key].disagree) == (
                    total, n, bool(disagree))
        if line["gates"]:
            assert entry.gates.failed == line["gates"]["failed"] and entry.gates.passed == line["gates"]["passed"]
        if not line["eval_success"]:
            assert entry.rl_readiness is None and entry.failed_stage == line["failed_stage"]


def test_a_new_entry_continues_a_version_1_chain(tmp_path):
    log = tmp_path / "feedback_log.jsonl"
    shutil.copy(V1_LEDGER, log)
    assert verify_chain(log) == []
    old = read_entries(log)
    written = append_entry(log, old[0].model_copy(update={"description": "after the upgrade"}))
    assert verify_chain(log) == []
    assert written.schema_version == SCHEMA_VERSION
    assert read_entries(log)[-1] == written
    assert read_entries(log)[: len(old)] == old


def test_a_version_1_entry_from_before_per_task_tables_is_never_a_baseline():
    raw = json.loads(V1_LEDGER.read_text().splitlines()[0])
    for stats in raw["stats"].values():
        del stats["per_task"]
    entry = Entry.from_json(raw)
    assert all(s.per_task is None for s in entry.stats.values())


def test_a_corrupt_version_1_line_names_its_line(tmp_path):
    log = tmp_path / "feedback_log.jsonl"
    lines = V1_LEDGER.read_text().splitlines()
    broken = json.loads(lines[1])
    broken["stats"]["target"]["per_task"] = {"abc": "not a row"}
    lines[1] = json.dumps(broken)
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(AutoEnvError) as info:
        read_entries(log)
    assert info.value.where == f"{log}:2" and "per_task" in info.value.what
