"""A cause is named only on evidence beyond noise (autoenv/gates/noise.py and the rules that use it).

The cases are the ones a literal walk met: a clean `addition` discarded because a derived
kitchen-sink put the true line last by chance on 2 tasks of 12 (the reward reads the last
equation), and a keyword reward whose prompt-copy failure also blamed `correct`, which
prompt-copy earned on 3 tasks in 100 as it always had.
"""

from __future__ import annotations

import random

import pytest
from audits import rec

from autoenv.child.derived import mutate
from autoenv.core.config import load_config
from autoenv.core.paths import PROJECT
from autoenv.evaluation.report import check_fix
from autoenv.gates import noise
from autoenv.gates.derived_rules import judge_derived
from autoenv.gates.findings import Gates
from autoenv.judge.causes import causes

CONFIG = load_config(PROJECT / "config.toml")


def test_two_lucky_tasks_of_twelve_are_noise_and_an_exploit_is_not():
    lucky = [1.0, 1.0] + [0.0] * 10
    assert not noise.beyond(sum(lucky) / 12, 0.1, 12, 1.0, lucky)
    assert not noise.beyond(2 / 12, 0.1, 12)  # from the mean and count alone too
    five = [1.0] * 5 + [0.0] * 7
    assert noise.beyond(5 / 12, 0.1, 12, 1.0, five)
    assert noise.beyond(1.0, 0.1, 3, 1.0, [1.0] * 3)  # a real exploit, from three tasks on
    assert noise.beyond(1.0, 0.1, 3)
    even = [0.3] * 5  # a credit paid the same on every task is certain from few tasks
    assert noise.beyond(0.3, 0.1, 5, 1.0, even) and not noise.beyond(0.3, 0.1, 5)  # (the count alone cannot tell)
    assert not noise.beyond(0.1, 0.1, 1000, 1.0, [0.1] * 1000)  # at the limit is not above it
    assert "within noise" in noise.within(2 / 12, 0.1, 12, 1.0, lucky)


def test_the_false_decision_rate_at_the_limit_is_near_the_nominal_level():
    # a probe that earns exactly the limit on average, on 30 tasks of 0/1 scores: fails about 5% of the time
    rng = random.Random(1)
    fails = sum(noise.beyond(sum(v) / 30, 0.1, 30, 1.0, v)
                for v in ([float(rng.random() < 0.1) for _ in range(30)] for _ in range(2000)))
    assert fails / 2000 <= 0.08, fails


def derived(tasks: int, mutations: dict[str, list[float]], second: dict[str, list[float]] | None = None) -> dict:
    records = [{**rec("reference", i, {"correct": 1.0}), "role": "target"} for i in range(tasks)]
    for name, scores in mutations.items():
        records += [rec(name, i, {"correct": s}) for i, s in enumerate(scores)]
    for name, scores in (second or {}).items():
        records += [{**rec(name, i, {"correct": s}), "sample": 2} for i, s in enumerate(scores)]
    return {"records": records, "references": tasks}


def finding(report: Gates, name: str):
    return next(f for f in report.findings if f.name == name)


def test_a_derived_kitchen_sink_paid_by_chance_on_2_of_12_tasks_is_a_warning_not_a_cause():
    report = Gates()
    judge_derived(derived(12, {"kitchen-sink": [1.0, 1.0] + [0.0] * 10}), CONFIG, report)
    f = finding(report, "probe derived kitchen-sink")
    assert f.status == "warn" and "within noise" in f.message and "not a cause" in f.message, f.message
    assert report.failed == [] and causes(report.report(), check_fix) == []


@pytest.mark.parametrize("in_process, second, status", [
    ("pass", None, "warn"),  # its in-process counterpart passed: unconfirmed
    ("fail", None, "fail"),  # ... failed too: confirmed
    (None, [0.0] * 12, "warn"),  # no counterpart ran: a second draw that earns nothing does not confirm it
    (None, [1.0] * 6 + [0.0] * 6, "fail"),  # a second draw beyond noise too: confirmed
])
def test_a_derived_failure_on_few_tasks_needs_a_second_witness(in_process, second, status):
    report = Gates()
    if in_process is not None:
        report.probes["kitchen-sink"] = report.probes.get("kitchen-sink") or _summary(0.0 if in_process == "pass" else 1.0)
        report.add("probe kitchen-sink", in_process, "in-process")
    judge_derived(derived(12, {"kitchen-sink": [1.0] * 6 + [0.0] * 6}, {"kitchen-sink": second} if second else None),
                  CONFIG, report)
    f = finding(report, "probe derived kitchen-sink")
    assert f.status == status, f.message
    if status == "warn":
        assert "unconfirmed on few tasks" in f.message and "not a cause" in f.message


def test_on_enough_tasks_a_derived_failure_stands_alone():
    report = Gates()
    report.probes["kitchen-sink"] = _summary(0.0)
    report.add("probe kitchen-sink", "pass", "in-process")
    judge_derived(derived(30, {"kitchen-sink": [1.0] * 15 + [0.0] * 15}), CONFIG, report)
    assert finding(report, "probe derived kitchen-sink").status == "fail"


def _summary(mean: float):
    from autoenv.core.record import ProbeSummary
    return ProbeSummary(description="in-process", mean=mean, tasks=30, scored=30, skipped=0, errors=0,
                        harvested={}, best=[])


def test_the_kitchen_sink_never_puts_the_true_reply_first_or_last():
    # reading the last (or first) answer is the kitchen-sink's defence, not its exploit
    for seed in range(200):
        sink = mutate("kitchen-sink", "<answer>7</answer>", "7", [], [str(n) for n in range(40)],
                      random.Random(seed)).splitlines()
        assert sink.index("<answer>7</answer>") not in (0, len(sink) - 1)


def test_gates_compare_unrounded_means_at_the_exact_boundary():
    # the oracle earns 2/3 on every task (0.6667 once rounded) and a probe exactly its allowance, a tenth of that
    # (0.0667 rounded): compared rounded, 0.0667 > 0.1 x 0.6667 failed a probe that is exactly at its limit
    from audits import audit

    from autoenv.gates.rules import judge_audit

    records = [rec("oracle", i, {"correct": 2 / 3}) for i in range(30)]
    records += [rec("wrong-answer", i, {"correct": 2 / 30}) for i in range(30)]
    report = Gates()
    judge_audit(audit(records=records), CONFIG, report)
    f = finding(report, "probe wrong-answer")
    assert f.status == "pass", f.message
    assert f.message.startswith("mean 0.067 (allowed 10% of the oracle)")
