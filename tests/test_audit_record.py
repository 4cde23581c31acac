"""autoenv/gates/audit_record.py: the audit's typed record, as the child writes it and the parent reads it.

The child runs candidate code, so the parent validates audit.json: a forged or broken file
(wrong types, missing keys, unknown keys, not JSON) is an AutoEnvError naming the key, never a
crash inside a rule and never a silent pass.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from audits import audit, rec

from autoenv.core.config import load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import PROJECT
from autoenv.gates.audit_record import AUDIT_FILE, AuditRecord, parse_audit
from autoenv.gates.rules import Gates, judge_audit, run_gates

CONFIG = load_config(PROJECT / "config.toml")


def test_the_record_round_trips_with_the_same_keys():
    raw = audit(gold={"checked": 3, "valid": 3, "invalid": [], "unchecked": [], "errors": []},
                seats=["first", "second"], seat_reference={"policy": "choice", "why": "the fixed policy"},
                reward_range=[-1, 1])
    written = json.loads(AuditRecord.model_validate(raw).to_json())
    assert set(written) == set(raw)  # only what the child set, under the same names as before the record was typed
    assert written["probes"][0] == raw["probes"][0]
    assert written["dataset"] == raw["dataset"]
    record = parse_audit(written)
    assert record.dataset.size == 1000 and record.gold is not None and record.gold.valid == 3
    assert record.probes is not None and record.probes[0].components == {"correct": 1.0}
    assert record.seat_reference is not None and record.seat_reference.policy == "choice"


def test_a_check_without_probes_writes_no_probes_key():
    raw = audit()
    del raw["probes"], raw["deterministic_scoring"]
    written = json.loads(AuditRecord.model_validate(raw).to_json())
    assert "probes" not in written and parse_audit(written).probes is None


def test_scores_are_kept_as_the_candidate_returned_them():
    """A NaN, a string or a bool is not coerced into a number: the rules name it as an environment error."""
    records = [rec("oracle", 0, {"correct": math.nan}), rec("oracle", 1, {"correct": "1.0"}),
               rec("oracle", 2, {"correct": True}), rec("oracle", 3, {"correct": 1})]
    text = AuditRecord.model_validate(audit(records)).to_json()
    assert "NaN" in text
    parsed = parse_audit(json.loads(text))
    assert parsed.probes is not None
    assert [type(r.components["correct"]) for r in parsed.probes] == [float, str, bool, int]
    report = Gates()
    judge_audit(parsed, CONFIG, report)
    errors = next(f for f in report.findings if f.name == "reward errors")
    assert errors.status == "fail"
    assert "returned nan, not a finite number" in errors.message and "returned '1.0'" in " ".join(errors.data["examples"])
    assert "returned True" in " ".join(errors.data["examples"])


@pytest.mark.parametrize("forged, key", [
    ({"probes": "all passed"}, "probes"),
    ({"dataset": {"size": "many"}}, "dataset.size"),
    ({"modules": [{"module": "candidate_env"}]}, "modules.0.ok"),
    ({"time_limits": "none"}, "time_limits"),
    ({"mode": "trusted"}, "mode"),
    ({"probes": [{"probe": "oracle", "key": "k0", "components": {"correct": 1.0}}]}, "probes.0.idx"),
    ({"probes": [{**rec("oracle", 0, {"correct": 1.0}), "weights": {"correct": "heavy"}}]}, "probes.0.weights.correct"),
    ({"gates_passed": True}, "gates_passed"),  # an unknown key is an error, never ignored
    ({"gold": {"valid": 5, "invalid": "none"}}, "gold.invalid"),
])
def test_a_forged_record_is_a_clear_error_naming_the_key(forged, key):
    with pytest.raises(AutoEnvError) as e:
        judge_audit({**audit(), **forged}, CONFIG, Gates())
    assert f"{key}:" in e.value.what and "not what the audit stage writes" in e.value.what
    assert e.value.where and e.value.fix and "gates/" in e.value.fix


def test_run_gates_refuses_a_forged_audit_file(tmp_path):
    """The gates read what the child wrote: a candidate that overwrote it with something else gets no pass."""
    forged = {**audit(), "probes": [{"probe": "oracle", "verdict": "pass"}]}

    def run(stage: str) -> None:
        (tmp_path / AUDIT_FILE).write_text(json.dumps(forged))

    worker = SimpleNamespace(run=run, job=SimpleNamespace(audit_dir=tmp_path))
    with pytest.raises(AutoEnvError, match=r"probes\.0\.") as e:
        run_gates(CONFIG, worker)  # type: ignore[arg-type]
    assert e.value.where == str(tmp_path / AUDIT_FILE)
    assert not (tmp_path / "gates.json").exists()
