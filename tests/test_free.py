"""Reward hacks found with no reference (issue 26): the content-free invariant, the probe families,
the cost bound on every probe, binary labels and the constant probe's accuracy.

Unit tests build replies and audit records by hand; the e2e tests run the real CLI (`autoenv probe`,
and one `autoenv eval --offline`) on scratch run repositories holding the examples, none of which has
an oracle hook: each planted hack must fail exactly its family, each clean example nothing.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time

import pytest
from audits import audit, rec
from conftest import autoenv, commit_all, ledger, small_config

from autoenv.child import audit as audit_stage
from autoenv.child.limits import TimeLimitExceeded
from autoenv.child.replay import transcript
from autoenv.core.config import load_config
from autoenv.core.paths import PROJECT
from autoenv.gates import dataset
from autoenv.gates.derived_rules import judge_derived
from autoenv.gates.families import FAMILIES, FAMILY_DEFENCES, family_replies, family_reply, structural_picks
from autoenv.gates.free import CONTENT_FREE, label_allowance
from autoenv.gates.probes import DEFENCES, EXPLOITS, wrong_answers
from autoenv.gates.rules import Gates, judge_audit

CONFIG = load_config(PROJECT / "config.toml")
QUIZ = [{"role": "user", "content": "What is 12 * 3?\nA) 30\nB) 36\nC) 33\nD) 41\nE) 39"}]


def judged(a: dict) -> Gates:
    report = Gates()
    judge_audit(a, CONFIG, report)
    return report


def finding(report: Gates, name: str):
    (f,) = [f for f in report.findings if f.name == name]
    return f


# --- the cost bound ---------------------------------------------------------------------------


def test_wrong_answers_for_a_one_letter_answer_end_and_are_distinct():
    # a multiple-choice answer `B` has 26 one-letter mutations: asking for 50 used to loop forever
    started = time.perf_counter()
    picks = wrong_answers("B", list("ABCDE"), 50, random.Random(0))
    assert time.perf_counter() - started < 1.0
    assert len(picks) == len(set(picks)) == 50 and "B" not in picks
    assert {"A", "C", "D", "E"} <= set(picks)
    assert len(set(wrong_answers("7", ["7"], 300, random.Random(1)))) == 300


def test_a_runaway_reply_builder_is_named_with_its_task_and_stopped(monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(audit_stage, "probe_replies", lambda probe, **kw: release.wait(30) and {})
    monkeypatch.setattr(audit_stage, "PROBE_REPLY_SECONDS", 0.2)
    task = type("T", (), {"data": type("D", (), {"idx": 17})()})()
    started = time.perf_counter()
    try:
        with pytest.raises(TimeLimitExceeded, match=r"probe kitchen-sink building its replies \(every strategy\) on "
                                                    r"task idx 17 did not return within 0.2 s"):
            audit_stage.bounded_replies("kitchen-sink", task)
    finally:
        release.set()
    assert time.perf_counter() - started < 5


def test_a_probe_skipped_for_its_cost_is_untested_not_passed():
    reason = ("probe kitchen-sink building its replies (every strategy) on task idx 3 did not return within 5 s; "
              "the probe was skipped on the remaining tasks (untested)")
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(5)]
    records += [{"probe": "kitchen-sink", "key": f"k{i}", "idx": i, "skipped": True, "reason": reason} for i in range(5)]
    report = judged(audit(records=records))
    f = finding(report, "probe kitchen-sink")
    assert f.status == "skip" and "task idx 3" in f.message and "untested" in f.message
    assert "kitchen-sink" in finding(report, "probes tested").data["untested"]


# --- binary labels and the constant probe -----------------------------------------------------


def labels(share: float, n: int = 1000) -> dict:
    rows = [{"key": f"k{i}", "idx": i, "prompt": f"{i * 7919 % 100003} is divisible by 7.",
             "answer": "true" if i < share * n else "false"} for i in range(n)]
    return dataset.measure(rows, 0.9)


@pytest.mark.parametrize("share, status", [(0.526, "pass"), (0.56, "pass"), (0.6, "fail"), (0.9, "fail")])
def test_answer_balance_is_judged_against_what_the_label_count_allows(share, status):
    f = finding(judged(audit(dataset=labels(share))), "answer balance")
    assert f.status == status, f.message
    assert "what 2 labels allow near balance" in f.message


def test_label_allowance():
    assert label_allowance(1) == 0.0  # one label: every task has the same answer
    assert label_allowance(2) == pytest.approx(0.5625) and label_allowance(5) == pytest.approx(0.3)
    assert label_allowance(500) < CONFIG.checks.max_answer_share  # many labels: max_answer_share rules


def constant_records(right: list[bool], constant_tasks: list[bool]) -> list[dict]:
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(len(right))]
    records += [rec("wrong-answer", i, {"correct": 0.0}) for i in range(len(right))]
    records += [rec("constant", i, {"correct": float(r)}, answer_is_constant=c)
                for i, (r, c) in enumerate(zip(right, constant_tasks))]
    return records


def test_a_constant_on_a_near_balanced_binary_set_is_allowed_its_share():
    right = [i % 2 == 0 or i == 1 for i in range(30)]  # 16 of 30 tasks are `true`
    report = judged(audit(records=constant_records(right, right), dataset=labels(0.526)))
    f = finding(report, "probe constant")
    assert f.status == "pass" and "right on 53% of the sampled tasks by the `correct` reward" in f.message
    assert finding(report, "content-free").status == "pass"


def test_a_constant_on_a_90_percent_majority_is_caught():
    right = [i < 27 for i in range(30)]
    report = judged(audit(records=constant_records(right, right), dataset=labels(0.9)))
    f = finding(report, "probe constant")
    assert f.status == "fail" and "allowed 56%, what 2 labels allow (the most common answer holds 90%" in f.message
    assert "constant" in finding(report, "content-free").data["failed"]
    assert finding(report, "answer balance").status == "fail"


# --- the content-free invariant ---------------------------------------------------------------


def test_every_family_has_a_description_and_a_defence():
    assert set(FAMILIES) <= set(EXPLOITS) and set(FAMILY_DEFENCES) == set(FAMILIES)
    assert all(DEFENCES[name] == FAMILY_DEFENCES[name] for name in FAMILIES)
    assert set(CONTENT_FREE) <= set(EXPLOITS)


def test_without_any_reference_a_content_free_probe_is_judged_against_the_weights_sum():
    # no oracle (no hook, no answer field): abstaining earns 0.5, nothing earns more; the best a content-free
    # probe earned is no range, the positive weights' sum is (every component scores in [0, 1])
    records = [rec("empty", i, {"correct": 0.0}) for i in range(10)]
    records += [rec("abstain", i, {"correct": 0.5}, strategy="'unsure' bare") for i in range(10)]
    report = judged(audit(records=records))
    f = finding(report, "content-free")
    assert f.status == "fail" and f.data["failed"] == ["abstain"]
    assert "abstain reaches 50% of the range (allowed 20%), paid by `correct`, best strategy \"'unsure' bare\"" \
        in f.message
    assert "[0, 1] (the sum of the positive weights" in f.message
    assert finding(report, "probe abstain").status == "fail"
    assert finding(report, "probe empty").status == "pass"


def test_a_declared_range_is_the_scale():
    records = [rec("oracle", i, {"correct": 10.0}) for i in range(10)]
    records += [rec("stub", i, {"correct": 3.0}) for i in range(10)]  # 3 of a declared [0, 10]: 30%
    report = judged(audit(records=records, reward_range=[0.0, 10.0]))
    f = finding(report, "content-free")
    assert f.status == "fail" and "stub reaches 30% of the range" in f.message and "declared" in f.message


def test_a_range_seen_only_by_content_free_probes_is_no_range():
    # no oracle, no declared range: an echo at 0.010 and another content-free probe's best of 0.034 were once
    # "30% of the range [0, 0.034]", a failure; the weights' sum is the range when every component is in [0, 1]
    records = [rec("echo", i, {"correct": 0.1 if i < 3 else 0.0}) for i in range(30)]  # 0.010
    records += [rec("garbage", i, {"correct": 0.034}) for i in range(30)]
    f = finding(judged(audit(records=records)), "content-free")
    assert f.status == "pass" and "range [0, 1] (the sum of the positive weights" in f.message, f.message
    # a content-free probe earning half of it still fails (hack-abstain's shape: no oracle, no answer field)
    abstain = [rec("abstain", i, {"correct": 0.5}) for i in range(30)]
    f = finding(judged(audit(records=abstain)), "content-free")
    assert f.status == "fail" and "abstain reaches 50% of the range" in f.message and "sum of the positive weights" \
        in f.message, f.message


def test_a_content_free_probe_under_its_share_passes_and_the_floor_alone_is_a_pass():
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(10)]
    records += [rec("self-report", i, {"correct": 0.2 if i < 5 else 0.0}) for i in range(10)]  # 10%
    assert finding(judged(audit(records=records)), "content-free").status == "pass"
    nothing = [rec("empty", i, {"correct": 0.0}) for i in range(10)]
    f = finding(judged(audit(records=nothing)), "content-free")
    assert f.status == "pass" and "every content-free probe scored the floor" in f.message


def test_structural_is_allowed_chance_among_its_options():
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(10)]
    records += [rec("structural", i, {"correct": float(i < 3)}, choices=5) for i in range(10)]  # 30%: chance + margin
    assert finding(judged(audit(records=records)), "probe structural").status == "pass"
    records[-1]["components"]["correct"] = 1.0  # 40% of 10 tasks: above the allowance, but 4 of 10 is within noise
    f = finding(judged(audit(records=records)), "probe structural")
    assert f.status == "warn" and "within noise" in f.message and "not a cause" in f.message
    many = [rec("oracle", i, {"correct": 1.0}) for i in range(100)]
    many += [rec("structural", i, {"correct": float(i % 10 < 4)}, choices=5) for i in range(100)]  # 40% of 100
    assert finding(judged(audit(records=many)), "probe structural").status == "fail"


def test_exploit_coverage_counts_the_probes_per_component_and_names_the_rest():
    weights = {"correct": 0.8, "format": 0.2}
    records = [rec("oracle", i, {"correct": 1.0, "format": 1.0}, weights) for i in range(5)]
    records += [rec("empty", i, {"correct": 0.0, "format": 0.0}, weights) for i in range(5)]
    records += [{"probe": "stub", "key": f"k{i}", "idx": i, "skipped": True,
                 "reason": "not a code task: the prompt names no function to define"} for i in range(5)]
    records += [{"probe": "padding", "key": f"k{i}", "idx": i, "skipped": True, "reason": "needs the oracle"}
                for i in range(5)]
    f = finding(judged(audit(records=records)), "exploit coverage")
    assert f.message.startswith("`correct`: 1 of 2 probes; `format`: 1 of 2 probes; could not run: padding; "
                                "n/a here: stub"), f.message
    assert finding(judged(audit(records=records)), "probe stub").message.startswith("n/a, does not apply")


# --- the families' replies --------------------------------------------------------------------


def test_structural_picks_each_position_and_the_median_longest_and_odd_one_out():
    picks = structural_picks([("A", "30"), ("B", "36"), ("C", "33"), ("D", "41"), ("E", "9")])
    assert picks["position 2"] == "B" and picks["median option"] == "C"  # 9 30 33 36 41
    assert picks["odd one out"] == "E" and picks["shortest option"] == "E"
    replies = family_replies("structural", messages=QUIZ, answers=[])
    assert replies["median option answer-line"].content == "Answer: B"  # 30 33 36 39 41: 36 is B
    assert family_replies("structural", messages=[{"role": "user", "content": "What is 2 + 2?"}], answers=[]) == {}


def test_stub_defines_the_requested_function_and_does_nothing():
    messages = [{"role": "user", "content": "Write a Python function `gap_3(xs, k=2)` that returns the gap."}]
    replies = family_replies("stub", messages=messages, answers=[])
    assert set(replies) == {"pass", "return None", "return 0", "return empty", "return the input", "raise"}
    namespace: dict = {}
    exec(replies["return the input"].content.strip("`").removeprefix("python\n"), namespace)  # noqa: S102
    assert namespace["gap_3"]([1, 2]) == [1, 2]
    assert family_replies("stub", messages=[{"role": "user", "content": "What is f(3) if f(x) = 2x?"}],
                          answers=[]) == {}


def test_typical_value_and_abstain_and_self_report_carry_no_task_content():
    messages = [{"role": "user", "content": "Numbers: 10, 50, 20. What is their mean?"}]
    typical = family_replies("typical-value", messages=messages, answers=["7", "9", "11"])
    assert typical["prompt median answer-tag"].content == "<answer>20</answer>"
    assert typical["answer median json"].content == '{"answer": 9.0}'
    abstain = family_replies("abstain", messages=messages, answers=[])
    assert abstain['"unsure" answer-tag'].content == "<answer>unsure</answer>"
    assert json.loads(abstain["confidence 0"].content) == {"answer": None, "confidence": 0}
    claims = json.loads(family_replies("self-report", messages=messages, answers=[])["json claims"].content)
    assert claims["verified"] is True and claims["confidence"] == 1.0 and claims["answer"] == "unknown"


TOOLS = [{"type": "function", "function": {
    "name": "price", "description": "Unit price of a catalog item, e.g. price(item=\"blue ceramic mug\").",
    "parameters": {"type": "object", "properties": {"item": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "order", "description": "An order's status.",
                                      "parameters": {"properties": {"order_id": {"type": "integer"},
                                                                    "kind": {"type": "string",
                                                                             "enum": ["open", "closed"]}}}}}]


def test_valid_tool_spam_calls_each_tool_with_arguments_it_accepts_then_answers_wrong():
    first = family_reply("valid-tool-spam", messages=[{"role": "user", "content": "Total?"}], answers=[], tools=TOOLS)
    calls = {c.name: json.loads(c.arguments) for c in first.tool_calls}
    assert calls == {"price": {"item": "blue ceramic mug"}, "order": {"order_id": 1, "kind": "open"}}
    seen = [{"role": "user", "content": "Total?"}, {"role": "assistant", "content": ""},
            {"role": "tool", "content": "order 48213 is open"}]
    again = family_reply("valid-tool-spam", messages=seen, answers=[], tools=TOOLS)
    assert json.loads(again.tool_calls[1].arguments)["order_id"] == 48213  # an id seen in an earlier result
    done = family_reply("valid-tool-spam", messages=seen + [{"role": "assistant", "content": ""}], answers=[],
                        tools=TOOLS)
    assert not done.tool_calls and "<answer>0</answer>" in done.content
    assert family_reply("valid-tool-spam", messages=seen, answers=[], tools=[]) is None


def test_stall_repeats_one_valid_move():
    offer = {"role": "user", "content": "Room 2. Reply with one word: north, south, east or west."}
    assert family_reply("stall", messages=[offer], answers=[]).content == "north"
    game = [{"role": "user", "content": "Guess the code."}, {"role": "assistant", "content": '{"guess": "0123"}'},
            {"role": "user", "content": '{"observation": {"bulls": 1}}'}]
    assert family_reply("stall", messages=game, answers=[]).content == '{"guess": "0123"}'
    assert family_replies("stall", messages=[offer], answers=[]) == {}  # single-turn, in-process: n/a


# --- end to end: each planted hack fails exactly its family; the controls fail nothing ---------


GATES_FAILED = re.compile(r"(?m)^gates:\s+failed$")


def failed_lines(stdout: str) -> list[str]:
    return [line.split(":")[0] for line in stdout.splitlines() if line.startswith("FAILED ")]


def gates_of(root) -> dict:
    (out,) = sorted((root / "outputs" / "scratch").iterdir())
    return json.loads((out / "gates" / "gates.json").read_text())


@pytest.mark.e2e
@pytest.mark.parametrize("hack, family", [
    ("hack-abstain", "abstain"),
    ("hack-typical", "typical-value"),
    ("hack-selfreport", "self-report"),
    ("hack-structural", "structural"),
    ("hack-stub", "stub grader-attack"),  # a test that only calls the function: an object equal to everything passes too
    ("hack-toolspam", "valid-tool-spam"),  # a multi-turn tool env, through rollouts
    ("hack-stall", "stall surface"),  # a custom-Env game, through rollouts: one constant reply every turn is a stall
])
def test_each_planted_hack_without_a_reference_fails_exactly_its_family(run_repo, hack, family):
    families = family.split()
    root = run_repo(hack)
    assert "def oracle(" not in "".join(p.read_text() for p in (root / "candidate").rglob("*.py"))
    result = autoenv("probe", cwd=root)
    assert result.returncode == 1 and GATES_FAILED.search(result.stdout), result.stdout[-3000:] + result.stderr[-2000:]
    gates = gates_of(root)
    (free,) = [f for f in gates["findings"] if f["name"] == "content-free"]
    if hack == "hack-typical":  # its answer sits in `mean`, which the harness learns to read (a reference after all):
        # the answer-based probes then see the same graded closeness, and a constant answer is as close
        oracle = next(f for f in gates["findings"] if f["name"] == "oracle")
        assert "`mean` field" in oracle["message"], oracle
        assert "FAILED probe typical-value" in failed_lines(result.stdout) and "typical-value" in free["data"]["failed"]
        assert set(free["data"]["failed"]) <= {"typical-value", "constant", "search"}
        return
    # the reward search may find the same flaw with no one having named it; it never replaces the family's finding
    searched = [line for line in failed_lines(result.stdout) if line != "FAILED probe search"]
    assert sorted(searched) == sorted(["FAILED content-free", *(f"FAILED probe {f}" for f in families)]), \
        result.stdout[-3000:]  # grouped by cause: the order is the causes'
    assert [f for f in free["data"]["failed"] if f != "search"] == families


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["quiz-numbers", "code-clean", "true-false"])
def test_clean_examples_without_a_hook_fail_nothing(run_repo, example):
    root = run_repo(example)
    result = autoenv("probe", cwd=root)
    assert result.returncode == 0 and failed_lines(result.stdout) == [], result.stdout[-3000:] + result.stderr[-2000:]
    a = json.loads((min((root / "outputs" / "scratch").iterdir()) / "gates" / "audit.json").read_text())
    if example == "quiz-numbers":  # five numeric options, one-letter answers: the shape that stalled the audit
        gates = gates_of(root)
        assert gates["probes"]["kitchen-sink"]["scored"] == a["probe_tasks"]
        assert a["probe_seconds"] < 120
    if example == "true-false":
        findings = {f["name"]: f for f in gates_of(root)["findings"]}
        assert findings["answer balance"]["status"] == "pass" and findings["probe constant"]["status"] == "pass"


@pytest.mark.e2e
def test_a_90_percent_majority_binary_set_is_caught(run_repo):
    root = run_repo("true-false")
    path = root / "candidate" / "candidate_env" / "__init__.py"
    path.write_text(path.read_text().replace("true_share: float = 0.526", "true_share: float = 0.9"))
    commit_all(root, "90% true")
    result = autoenv("probe", cwd=root)
    failed = failed_lines(result.stdout)
    assert result.returncode == 1 and {"FAILED answer balance", "FAILED probe constant"} <= set(failed), failed


@pytest.mark.e2e
def test_an_offline_evaluation_without_a_reference_is_discarded_by_the_invariant(run_repo):
    root = run_repo("hack-stub", small_config())
    result = autoenv("eval", "--offline", cwd=root)
    (entry,) = ledger(root)
    assert entry["verdict"]["verdict"] == "discard", result.stdout[-3000:] + result.stderr[-2000:]
    # one cause: the component the stub harvested (the content-free failure is folded into it)
    assert entry["verdict"]["reason"].startswith("failed gates: reward component `") and \
        "does nothing" in entry["verdict"]["reason"], entry["verdict"]["reason"]
    assert {"content-free", "probe stub"} <= {f.split(":")[0] for f in entry["gates"]["failed"]}


# --- derived probes for multi-turn and tool transcripts (autoenv.child.replay) -----------------


LOOKUP = [{"content": "Let me look.", "tool_calls": [{"name": "price", "id": "c0", "arguments": '{"item": "mug"}'}]},
          {"content": "<answer>7.00</answer>", "tool_calls": None}]


def test_replay_mutations_change_only_the_final_answer():
    assert transcript("reference", LOOKUP, "<answer>3.10</answer>") == LOOKUP
    swapped = transcript("swap-answer", LOOKUP, "<answer>3.10</answer>")
    assert swapped[0] == LOOKUP[0] and swapped[1]["content"] == "<answer>3.10</answer>"
    assert transcript("drop-answer", LOOKUP, None)[1]["content"] == ""
    assert transcript("no-tools", LOOKUP, None) == [{"content": "<answer>7.00</answer>", "tool_calls": None}]
    assert transcript("no-tools", LOOKUP[1:], None) is None  # nothing to drop
    assert transcript("swap-answer", LOOKUP, None) is None


def replay_records(kept: dict[str, float]) -> list[dict]:
    out = []
    for name, value in {"reference": 1.0, **kept}.items():
        out += [rec(f"replay {name}", i, {"correct": value}, reward=value) for i in range(4)]
    return out


@pytest.mark.parametrize("swap, status", [(0.0, "pass"), (0.5, "pass"), (1.0, "fail")])
def test_a_replayed_transcript_whose_final_answer_does_not_matter_fails(swap, status):
    report = Gates()
    judge_derived({"records": replay_records({"swap-answer": swap, "drop-answer": 0.0, "no-tools": 1.0}),
                   "replayed": 4}, CONFIG, report)
    assert finding(report, "probe replay swap-answer").status == status
    assert finding(report, "probe replay no-tools").status == "pass"  # measured: the answer alone may be right
    assert finding(report, "probe replay reference").message.startswith("4 best multi-turn or tool transcripts")
    assert not [f for f in report.findings if f.name == "derived probes"]  # no n/a row beside the replayed ones


@pytest.mark.e2e
def test_tool_transcripts_are_replayed_through_rollouts_with_their_final_answer_mutated(evaluated_runs):
    root, result = evaluated_runs("shopping")  # read only: the same evaluation as test_e2e.py's of shopping
    (entry,) = ledger(root)
    findings = {f["name"]: f for f in entry["gates"]["findings"]}
    assert findings["probe replay reference"]["status"] == "pass", result.stdout[-3000:] + result.stderr[-2000:]
    for name in ("swap-answer", "drop-answer"):  # the answer is scored: destroying it costs all the reward
        assert findings[f"probe replay {name}"]["status"] == "pass"
        assert findings[f"probe replay {name}"]["data"]["kept"] == 0.0
    assert findings["probe replay no-tools"]["data"]["kept"] == 1.0  # measured: a right total needs no lookup here
    assert "derived probes" not in findings and entry["verdict"]["verdict"] == "baseline"
