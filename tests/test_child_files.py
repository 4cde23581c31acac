"""The files the child writes that the parent reads (autoenv.core.childfiles): audit.json and derived.json (not a record
at all; their keys are tested in test_audit_record.py and test_derived_record.py), client_retries.json
(autoenv.core.traces.read_retries) and rescore.json (autoenv.evaluation.rescore.read_outcome). The child writes them next to the candidate's code, so a forged or
broken file is an AutoEnvError naming the key, never a crash and never a number in the record."""

from __future__ import annotations

import json

import pytest

from autoenv.core.errors import AutoEnvError
from autoenv.core.traces import RETRIES_FILE, read_retries
from autoenv.evaluation.rescore import read_outcome
from autoenv.gates.audit_record import AUDIT_FILE, read_audit
from autoenv.gates.derived_record import read_derived
from autoenv.gates.probes import DERIVED_FILE
from autoenv.run.fingerprint import RESCORE_FILE


def test_retries_as_the_rollouts_stage_writes_them(tmp_path):
    path = tmp_path / RETRIES_FILE
    assert read_retries(path) == {}  # the stock harness only: none written
    path.write_text(json.dumps({"target": 2, "strong": 0}))
    assert read_retries(path) == {"target": 2, "strong": 0}


@pytest.mark.parametrize("text, said", [('{"target": "many"}', "target:"), ('{"target": -3}', "target:"),
                                        ("[1]", "(top level):"), ('{"target": ', "cannot be read as JSON")])
def test_forged_retries_are_a_clear_error(tmp_path, text, said):
    path = tmp_path / RETRIES_FILE
    path.write_text(text)
    with pytest.raises(AutoEnvError) as e:
        read_retries(path)
    assert said in e.value.what and e.value.where == str(path) and e.value.fix


def test_the_rescore_outcome_as_the_stage_writes_it(tmp_path):
    path = tmp_path / RESCORE_FILE
    missing = read_outcome(path)
    assert missing.rescored is False and missing.reason == "no rescore.json"
    path.write_text(json.dumps({"rescored": False, "reason": "the taskset loaded no tasks", "source": "x", "seconds": 1}))
    assert read_outcome(path).reason == "the taskset loaded no tasks"
    path.write_text(json.dumps({"rescored": 12, "source": "x", "traces": 14, "kept": 2, "errors": 0, "seconds": 3.5}))
    outcome = read_outcome(path)
    assert outcome.rescored == 12 and outcome.kept == 2


@pytest.mark.parametrize("forged, key", [({"rescored": "all"}, "rescored"), ({"rescored": 3, "kept": "some"}, "kept"),
                                         ({"rescored": 3, "verdict": "keep"}, "verdict"), ({}, "rescored")])
def test_a_forged_rescore_outcome_is_a_clear_error(tmp_path, forged, key):
    path = tmp_path / RESCORE_FILE
    path.write_text(json.dumps(forged))
    with pytest.raises(AutoEnvError) as e:
        read_outcome(path)
    assert key in e.value.what and "not what the rescore stage writes" in e.value.what and e.value.where == str(path)


@pytest.mark.parametrize("name, read, missing", [(AUDIT_FILE, read_audit, "wrote no audit record"),
                                                 (DERIVED_FILE, read_derived, "wrote no record of its probes")])
def test_a_record_file_that_is_not_a_record_at_all(tmp_path, name, read, missing):
    path = tmp_path / name
    for text in ("[1, 2, 3]", "null"):
        path.write_text(text)
        with pytest.raises(AutoEnvError, match=r"\(top level\)") as e:
            read(path)
        assert e.value.where == str(path)
    path.write_text('{"records": [')
    with pytest.raises(AutoEnvError, match="cannot be read as JSON") as e:
        read(path)
    assert e.value.where == str(path) and e.value.fix and "gates/" in e.value.fix
    with pytest.raises(AutoEnvError, match=missing):
        read(tmp_path / "missing" / name)
