"""The child's other small files the parent reads: client_retries.json (autoenv.traces.read_retries) and
rescore.json (autoenv.rescore.read_outcome). The child writes them next to the candidate's code, so a forged or
broken file is an AutoEnvError naming the key, never a crash and never a number in the record."""

from __future__ import annotations

import json

import pytest

from autoenv.errors import AutoEnvError
from autoenv.fingerprint import RESCORE_FILE
from autoenv.rescore import read_outcome
from autoenv.traces import RETRIES_FILE, read_retries


def test_retries_as_the_rollouts_stage_writes_them(tmp_path):
    path = tmp_path / RETRIES_FILE
    assert read_retries(path) == {}  # the stock harness only: none written
    path.write_text(json.dumps({"target": 2, "strong": 0}))
    assert read_retries(path) == {"target": 2, "strong": 0}


@pytest.mark.parametrize("text, key", [('{"target": "many"}', "target"), ('{"target": -3}', "target"),
                                       ("[1]", "(top level)"), ('{"target": ', "(top level)")])
def test_forged_retries_are_a_clear_error(tmp_path, text, key):
    path = tmp_path / RETRIES_FILE
    path.write_text(text)
    with pytest.raises(AutoEnvError) as e:
        read_retries(path)
    assert f"{key}:" in e.value.what and e.value.where == str(path) and e.value.fix


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
    assert key in e.value.what and "not what it writes" in e.value.what and e.value.where == str(path)
