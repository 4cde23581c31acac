"""autoenv/gates/derived_record.py: the derive stage's typed record, as the child writes it and the parent reads it.

The child runs candidate code, so the parent validates derived.json like audit.json: a forged or broken
file (wrong types, missing or unknown keys, a probe the stage does not play, a NaN reward, not JSON) is an
AutoEnvError naming the key, never a crash inside a rule and never a silent pass.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from audits import rec

from autoenv.core.config import load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import PROJECT
from autoenv.core.record import GateReport
from autoenv.gates.derived_record import DerivedRecord, parse_derived
from autoenv.gates.derived_rules import judge_derived, run_derived
from autoenv.gates.findings import Gates
from autoenv.gates.probes import DERIVED_FILE, DERIVED_MUTATIONS

CONFIG = load_config(PROJECT / "config.toml")


def written(reference: float = 1.0, mutations: dict[str, float] | None = None, tasks: int = 4) -> dict:
    """derived.json as the derive stage writes it: references with their role, mutations, a skipped one."""
    records = [{**rec("reference", i, {"correct": reference}), "role": "strong", "stored_reward": reference}
               for i in range(tasks)]
    for name, value in (mutations or {"swap-answer": 0.0, "padding": reference}).items():
        records += [{**rec(name, i, {"correct": value}), "reference_reward": reference} for i in range(tasks)]
    records.append({"probe": "truncated", "key": "k0", "idx": 0, "skipped": True,
                    "reason": "does not apply to this reply"})
    return {"source": "outputs/scratch/x", "references": tasks, "records": records, "mutations": DERIVED_MUTATIONS,
            "replayed": 0, "seconds": 0.5}


def finding(report: Gates, name: str):
    return next(f for f in report.findings if f.name == name)


def test_the_record_round_trips_with_the_same_keys():
    raw = written()
    out = json.loads(DerivedRecord.model_validate(raw).to_json())
    assert set(out) == set(raw) and out["records"] == raw["records"]  # only what the child set, as before
    record = parse_derived(out)
    assert record.records[0].role == "strong" and record.records[-1].skipped


@pytest.mark.parametrize("forged, key", [
    ({"records": "all passed"}, "records"),
    ({"records": [{"probe": "reference", "key": "k0", "components": {"correct": 1.0}}]}, "records.0.idx"),
    ({"records": [{**rec("reference", 0, {"correct": 1.0}), "verdict": "pass"}]}, "records.0.verdict"),
    ({"records": [rec("made-up", 0, {"correct": 1.0})]}, "records.0.probe"),
    ({"records": [{**rec("replay reference", 0, {"correct": 1.0}), "reward": math.nan}]}, "records.0.reward"),
    ({"records": [{**rec("reference", 0, {"correct": 1.0}), "weights": {"correct": "heavy"}}]},
     "records.0.weights.correct"),
    ({"replayed": "some"}, "replayed"),
    ({"gates_passed": True}, "gates_passed"),  # an unknown key is an error, never ignored
])
def test_a_forged_record_is_a_clear_error_naming_the_key(forged, key):
    with pytest.raises(AutoEnvError) as e:
        judge_derived({**written(), **forged}, CONFIG, Gates())
    assert f"{key}:" in e.value.what and "not what the derive stage writes" in e.value.what
    assert e.value.where and e.value.fix and "gates/" in e.value.fix


def test_records_are_required():
    with pytest.raises(AutoEnvError, match=r"records: Field required"):
        parse_derived({"references": 3})


def test_a_score_that_is_not_a_finite_number_is_an_error_row_not_a_crash_or_a_pass():
    """A reference whose reward returned None, a string or NaN is not multiplied or averaged: it is left out
    as an environment error, and with no reference left the derived probes are n/a, never passed."""
    raw = written(mutations={"kitchen-sink": 1.0})
    raw["records"][0]["components"] = {"correct": None}
    raw["records"][1]["components"] = {"correct": "1.0"}
    raw["records"][2]["components"] = {"correct": math.nan}
    # few references: the second draw of the randomised kitchen-sink is its witness (autoenv.gates.derived_rules)
    raw["records"] += [{**rec("kitchen-sink", i, {"correct": 1.0}), "reference_reward": 1.0, "sample": 2}
                       for i in range(4)]
    report = Gates()
    judge_derived(json.loads(DerivedRecord.model_validate(raw).to_json()), CONFIG, report)
    assert finding(report, "probe derived reference").message.startswith("1 best replies")
    assert finding(report, "probe derived kitchen-sink").status == "fail"  # the planted flaw is still caught
    for record in raw["records"][3:4]:
        record["components"] = {"correct": None}
    report = Gates()
    judge_derived(raw, CONFIG, report)
    (f,) = [f for f in report.findings if f.name.startswith("derived") or f.name.startswith("probe derived")]
    assert f.name == "derived probes" and f.status == "skip" and "n/a, not tested" in f.message


def test_a_replayed_reward_that_is_not_finite_cannot_pass():
    records = [rec("replay reference", i, {"correct": 1.0}, reward=1.0) for i in range(3)]
    records += [rec("replay swap-answer", i, {"correct": math.inf}, reward=1.0) for i in range(3)]
    report = Gates()
    judge_derived({"records": records, "replayed": 3}, CONFIG, report)
    assert finding(report, "probe replay swap-answer").message.startswith("n/a, not tested")


def test_run_derived_refuses_a_forged_file(tmp_path):
    """The gates read what the child wrote: a candidate that overwrote it with a pass gets no gate report."""
    forged = {"records": [{"probe": "reference", "verdict": "pass"}], "references": 1}

    def run(stage: str) -> None:
        (tmp_path / DERIVED_FILE).write_text(json.dumps(forged))

    worker = SimpleNamespace(run=run, job=SimpleNamespace(audit_dir=tmp_path))
    with pytest.raises(AutoEnvError, match=r"records\.0\.") as e:
        run_derived(CONFIG, worker, GateReport(findings=[]))  # type: ignore[arg-type]
    assert e.value.where == str(tmp_path / DERIVED_FILE)
    assert not (tmp_path / "gates.json").exists()
