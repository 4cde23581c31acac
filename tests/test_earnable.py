"""`passed` only where something could earn (autoenv.gates.earnable).

A reward no scored reply earned offline, with no reference reply and no declared range, leaves the gates
`untested` with what the reward seems to need; a reply that earns anything, a reference reply, a declared range
or verifiers' gold check each make the probes a measurement again. The real shape: tests/data/hashed-code,
whose honest reward pays only for a computed code no offline probe writes, with and without its oracle hook.
"""

from __future__ import annotations

import shutil

import pytest

from autoenv.gates import coverage
from autoenv.gates.probes import EXPLOITS, NEEDS_TOOLS
from autoenv.gates.rules import Gates, judge_probes
from tests.audits import rec
from tests.test_gates import CONFIG
from tests.test_real_shapes import DATA, probe_env

NO_ORACLE = "no oracle hook, and the answer-field oracle found no field"


def records(earned: dict[str, float] | None = None, tasks: int = 8, oracle: float | None = None) -> list[dict]:
    """The oracle skipped (no reference reply) unless `oracle` is given; every exploit probe at 0 unless `earned`."""
    out = [rec("oracle", i, {"correct": oracle}) if oracle is not None else
           rec("oracle", i, {}, {}, skipped=True, reason=NO_ORACLE) for i in range(tasks)]
    for name in EXPLOITS:
        if name not in NEEDS_TOOLS:
            out += [rec(name, i, {"correct": (earned or {}).get(name, 0.0)}) for i in range(tasks)]
    return out


def judged(audit: dict) -> dict:
    report = Gates()
    judge_probes(audit, CONFIG, report)
    return {f.name: f for f in report.findings}


def test_nothing_earned_and_no_reference_is_untested_naming_what_the_reward_needs():
    findings = judged({"probes": records(), "has_tools": True, "runtime_rewards": ["cited"]})
    earnable = findings["earnable"]
    assert earnable.status == "skip" and earnable.data["coverage"] == coverage.UNTESTED
    assert "no reply could earn this reward offline" in earnable.message
    assert "a tool call or an action whose result the reward checks" in earnable.message
    assert "`cited`" in earnable.message and "def oracle(self, messages)" in earnable.message
    untested = coverage.untested(judged({"probes": records()}).values())
    assert untested and untested[0].startswith("earnable: untested")
    assert "a reply that none of the probes wrote" in untested[0]


@pytest.mark.parametrize("audit", [
    {"probes": records({"padding": 0.2})},  # one probe earned: its mean is a measurement of something
    {"probes": records(oracle=1.0)},  # a reference reply earned
    {"probes": records(), "reward_range": [0.0, 1.0]},  # the floor is the env's declared range
    {"probes": records(), "gold": {"checked": 8, "valid": 8}},  # verifiers' gold check proved the answer earns
], ids=["a probe earned", "a reference reply", "declared range", "gold check"])
def test_anything_that_earned_or_a_stated_floor_leaves_the_gates_tested(audit):
    assert "earnable" not in judged(audit)


def test_a_reference_reply_that_earns_nothing_fails_the_oracle_and_is_not_called_untested():
    findings = judged({"probes": records(oracle=0.0)})
    assert findings["oracle"].status == "fail" and "earnable" not in findings


@pytest.mark.slow
def test_an_honest_reward_no_probe_can_earn_is_untested_and_its_oracle_hook_makes_it_a_pass(tmp_path):
    findings, audit = probe_env(DATA / "hashed-code", tmp_path / "bare")
    assert audit["oracle_source"] is None and audit["oracle_formats_tried"]  # `word` tried, nothing earned
    assert findings["earnable"]["status"] == "skip" and findings["earnable"]["data"]["coverage"] == "untested"
    assert not [n for n, f in findings.items() if f["status"] == "fail"], findings
    hooked = tmp_path / "hashed-code-hooked"
    shutil.copytree(DATA / "hashed-code", hooked, ignore=shutil.ignore_patterns("__pycache__"))
    source = hooked / "hashed_code" / "__init__.py"
    source.write_text(source.read_text().replace("WITH_ORACLE = False", "WITH_ORACLE = True"))
    findings, audit = probe_env(hooked, tmp_path / "hooked")
    assert audit["oracle_source"] == "hook" and "earnable" not in findings
    assert findings["oracle"]["status"] == "pass"
    assert not [n for n, f in findings.items() if f["status"] == "fail"], findings
