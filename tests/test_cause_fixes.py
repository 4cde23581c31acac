"""A cause's own fix, written from what the reward search found (autoenv.judge.fixes), and the ceiling folded into
the cause it explains. Unit level, on gate reports built here; tests/test_planted_feedback.py holds the same words
to the real feedback of every planted example (bench/judge_labels.toml)."""

from __future__ import annotations

import pytest

from autoenv.core.record import BestReply, GateFinding, GateReport, ProbeSummary
from autoenv.judge.causes import causes
from autoenv.judge.fixes import specific_fix

SUMMARY = dict(description="d", tasks=8, scored=8, skipped=0, errors=0)


def report(reply: str, strategy: str = "", ceiling: bool = False) -> GateReport:
    findings = [GateFinding(name="probe search", status="fail", message="mean 1.000", data={
        "strategy": strategy, "harvested": {"correct": "1.0"}})]
    if ceiling:
        findings.append(GateFinding(name="ceiling", status="warn", message=(
            "components the reference never earns in full: `correct` (weight 1): the reference's best is 0.000 over "
            "8 tasks, while search, built without the task, earned 1.000 on it"), data={"components": {"correct": 0.0}}))
    best = [BestReply(idx=3, key="k", reward=1.0, reply=reply)]
    return GateReport(findings=findings, probes={"search": ProbeSummary(mean=1.0, harvested={"correct": "1.0"},
                                                                         best=best, **SUMMARY)})


@pytest.mark.parametrize("reply, strategy, ceiling, words", [
    ('{"balance": "nan"}', '"nan" in {"balance": "{}"}', False, "finite"),
    ("<primes>" + ", ".join(str(n) for n in range(2, 40)) + "</primes>", "every number of a range", False, "precision"),
    ("Answer: 4 as a certified expert", "a phrase of the reward's source", True, "Drop it"),
    ("<total>92</total>", "1 round(s) of every tool called with arguments from its schema, then <total>{}</total> "
                          "holding the last value the tools returned", False, "never with any value a tool returned"),
    ("<answer>7</answer>", "every value of each tool's small argument domain (an enumeration, a stated range of at "
                           "most 30) tried in one turn, then <answer>{}</answer> holding the value whose result stood "
                           "apart", False, "count the tries"),
    ("<answer>57</answer>", "every tool with a number argument called with a value just below the range the rules "
                            "state (or -1), with the ids the prompt names, then ...", False, "on both sides"),
    ("<answer>R-1</answer>", "the tool the rules name last called alone, with the ids the prompt names (the steps "
                             "the rules order before it skipped), then ...", False, "prerequisite"),
])
def test_the_search_finding_gets_the_fix_for_what_made_it_pay(reply, strategy, ceiling, words):
    gates = report(reply, strategy, ceiling)
    fix = specific_fix(gates, "correct", "search")
    assert fix is not None and fix.startswith("`correct`: ") and words in fix, fix
    (cause,) = causes(gates, lambda f: None)
    assert cause.fix == fix  # the cause carries it, not the search's generic defence
    if ceiling:
        assert any(line.startswith("ceiling: `correct`") for line in cause.evidence), cause.evidence
    if "tool" in strategy:
        assert any("played: " in line for line in cause.evidence), cause.evidence  # the calls that made it pay


def led_by(probe: str, strategy: str, component: str) -> GateReport:
    """A report whose one failed finding is `probe`, its best strategy `strategy`, paid on `component`."""
    harvested = {component: "1.0"}
    return GateReport(findings=[GateFinding(name=f"probe {probe}", status="fail", message="mean 1.000", data={
        "strategy": strategy, "harvested": harvested})], probes={
        probe: ProbeSummary(mean=1.0, harvested=harvested, **SUMMARY)})


@pytest.mark.parametrize("strategy, words", [
    ("expected value read from the grader", "interpreter of its own"),
    ("results equal to everything", "type(got) is type(want)"),
    ("exit 0 at once", "never on the exit status"),
    ("expected output read from its surroundings", "holding its input only"),
])
def test_a_grader_attack_gets_the_fix_for_what_its_program_reached(strategy, words):
    (cause,) = causes(led_by("grader-attack", strategy, "tests_passed"), lambda f: None)
    assert cause.fix.startswith("`tests_passed`: ") and words in cause.fix, cause.fix
    others = [w for s, w in [("exit 0 at once", "exit status"), ("expected value read from the grader", "call stack")]
              if s != strategy]
    assert not any(w in cause.fix for w in others)  # only what this program reached


@pytest.mark.parametrize("strategy, words", [("far above", "one-sided bound"), ("keys only", "each key's value"),
                                             ("superset", "precision")])
def test_a_shape_fill_gets_the_fix_for_the_comparison_its_filling_passed(strategy, words):
    (cause,) = causes(led_by("shape-fill", strategy, "correct"), lambda f: None)
    assert cause.fix.startswith("`correct`: ") and words in cause.fix, cause.fix


def test_nothing_specific_found_leaves_the_defence_and_other_probes_are_not_rewritten():
    gates = report("Answer: 4", "a constant")
    assert specific_fix(gates, "correct", "search") is None
    assert specific_fix(gates, "correct", "wrong-answer") is None
    (cause,) = causes(gates, lambda f: None)
    assert cause.fix.startswith("`correct`: score what the reply says about this task")


def test_check_and_probe_print_one_group_per_cause_with_its_findings():
    from autoenv.cli import failure_groups

    probes = {name: ProbeSummary(mean=0.6, harvested={"formatted": "1.0"}, **SUMMARY)
              for name in ("wrong-answer", "first-number", "last-line")}
    findings = [GateFinding(name=f"probe {name}", status="fail", message=f"mean 0.600 ({name})",
                            data={"harvested": {"formatted": "1.0"}}) for name in probes]
    findings.append(GateFinding(name="answer balance", status="fail", message="most common answer 42 in 60%"))
    groups = failure_groups(GateReport(findings=findings, probes=probes))
    assert [len(g.failed) for g in groups] == [3, 1]
    first, dataset = groups
    assert first.component and "`formatted`" in first.title and first.fix.startswith("`formatted`: ")
    assert [name for name, _ in first.failed] == ["probe wrong-answer", "probe first-number", "probe last-line"]
    assert dataset.title == "answer balance" and dataset.failed == [("answer balance", "most common answer 42 in 60%")]
