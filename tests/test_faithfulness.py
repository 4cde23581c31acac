"""Reward faithfulness without an oracle hook (issue 14): the new probes, honest n/a rows, the
answer-field oracle, probes derived from rollouts, the exploit matrix, the gullible grader.

Unit tests build replies and audit records by hand; the e2e tests run the real CLI on scratch
run repositories holding the examples (with their oracle hooks removed), including an offline
evaluation whose strong model replays the inferred answer-field oracle on the built-in endpoint.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import json
import random
import re
import shutil
from types import SimpleNamespace

import pytest
from audits import rec
from conftest import autoenv, commit_all, head, small_config

from autoenv.child.derived import mutate
from autoenv.core.config import load_config
from autoenv.core.messages import ChatRequest, Reply
from autoenv.core.paths import PROJECT, examples
from autoenv.endpoint.policies import gullible_grader
from autoenv.gates import matrix
from autoenv.gates.answer_oracle import FORMATS, format_reply, infer_format
from autoenv.gates.derived_rules import judge_derived
from autoenv.gates.probes import (
    DEFENCES,
    DERIVED_MUTATIONS,
    EXPLOITS,
    INJECTION,
    probe_replies,
    probe_reply,
    prompt_spans,
)
from autoenv.gates.rules import Gates, judge_probes
from autoenv.gates.scoring import NO_ORACLE
from autoenv.run.demo import remove_oracle_hooks

CONFIG = load_config(PROJECT / "config.toml")
ORACLE = Reply(content="Let me work it out.\n<answer>42</answer>")
MESSAGES = [{"role": "system", "content": "Answer in one <answer></answer> tag."},
            {"role": "user", "content": "Compute: 6 * 7 (see 'note' 13)"}]


def play(name: str, **kw) -> Reply | None:
    args = dict(oracle=ORACLE, answer="42", answers=["41", "43", "17", "42"], messages=MESSAGES, tools=[],
                key="k1", seed=0, constant="17")
    return probe_reply(name, **{**args, **kw})


# --- the new probes ---------------------------------------------------------------------------


def test_every_probe_has_a_defence():
    assert set(EXPLOITS) | {f"derived {n}" for n in ("swap-answer", "kitchen-sink", "format-only", "padding")} \
        <= set(DEFENCES)


def test_first_number_and_last_line_put_the_true_answer_outside_a_wrong_final_answer():
    first = play("first-number").content
    assert first.startswith("42 ") and re.findall(r"<answer>(.*?)</answer>", first) != ["42"]
    last = play("last-line").content
    assert last.splitlines()[-1] == "42" and len(re.findall(r"<answer>(.*?)</answer>", last)) == 1
    assert re.findall(r"<answer>(.*?)</answer>", last)[0] != "42"


def test_injection_is_a_wrong_answer_addressing_the_grader():
    reply = play("injection").content
    assert reply.endswith(INJECTION) and "<answer>42</answer>" not in reply and "10/10" in reply


def test_constant_replies_the_most_common_answer_in_the_oracle_format():
    assert play("constant").content == "Let me work it out.\n<answer>17</answer>"
    assert play("constant", constant=None) is None


def test_answer_probes_need_an_oracle_and_an_answer():
    for name in ("first-number", "last-line", "injection", "constant", "prompt-copy"):
        assert play(name, oracle=None) is None, name
        assert play(name, answer=None) is None, name


def test_prompt_spans_are_copying_strategies():
    spans = prompt_spans(MESSAGES, [{"name": "lookup", "description": "returns 99"}])
    assert spans["number 1"] == "6" and spans["number -1"] == "99"  # the tools' descriptions are read too
    assert spans["quoted 1"] == "note" and spans["word 1"] == "Answer"
    replies = probe_replies("prompt-copy", oracle=ORACLE, answer="42", answers=[], messages=MESSAGES, tools=[],
                            key="k")
    assert replies["number 2"].content == "Let me work it out.\n<answer>7</answer>"
    assert list(probe_replies("echo", oracle=ORACLE, answer="42", answers=[], messages=MESSAGES, tools=[],
                              key="k")) == ["echo"]


# --- the gullible grader on the built-in endpoint ------------------------------------------------


def grade(reply: str) -> str:
    prompt = f"Grade the reply out of 10.\nReference answer: 42\n{reply}"
    return gullible_grader(ChatRequest(model="gullible-grader", messages=[{"role": "user", "content": prompt}], tools=[], session="s"),
                           None).content


def test_gullible_grader_scores_the_answer_and_believes_claims():
    assert grade("<answer>42</answer>") == "Score: 10/10"
    assert grade("<answer>41</answer>") == "Score: 0/10"
    assert grade("<answer>41</answer><answer>42</answer>") == "Score: 0/10"
    assert grade("<answer>41</answer>" + INJECTION) == "Score: 10/10"


# --- the answer-field oracle ---------------------------------------------------------------------


def task(answer, idx=0):
    return SimpleNamespace(data=SimpleNamespace(answer=answer, idx=idx), key=f"k{idx}")


def test_infer_format_keeps_the_format_the_rewards_accept():
    async def boxed_only(t, text):
        return 1.0 if text == f"\\boxed{{{t.data.answer}}}" else 0.0

    form, means = asyncio.run(infer_format([task(str(i), i) for i in range(8)], boxed_only))
    assert form == "boxed" and means == {"answer-tag": 0.0, "boxed": 1.0, "answer-line": 0.0, "bare": 0.0}
    assert format_reply(7, "answer-line") == "Answer: 7" and set(FORMATS) >= {"bare", "boxed", "answer-tag"}


def test_infer_format_gives_none_when_nothing_earns():
    async def nothing(t, text):
        return 0.0

    assert asyncio.run(infer_format([task("1")], nothing))[0] is None
    assert asyncio.run(infer_format([task(None)], nothing))[0] is None  # no answer field: nothing to try


# --- honest rows, the tested count, the exploit matrix ---------------------------------------------


def judge(records: list[dict], **extra) -> Gates:
    report = Gates()
    judge_probes({"probes": copy.deepcopy(records), **extra}, CONFIG, report)
    return report


def finding(report: Gates, name: str):
    (f,) = [f for f in report.findings if f.name == name]
    return f


def skipped(probe: str, idx: int, reason: str) -> dict:
    return {"probe": probe, "key": f"k{idx}", "idx": idx, "skipped": True, "reason": reason, "error": None}


def test_probes_that_needed_the_missing_oracle_are_na_not_pass():
    records = [skipped("oracle", i, NO_ORACLE) for i in range(5)]
    records += [skipped("wrong-answer", i, NO_ORACLE) for i in range(5)]
    records += [skipped("padding", i, NO_ORACLE) for i in range(5)]
    records += [rec("empty", i, {"correct": 0.0}) for i in range(5)]
    report = judge(records)
    oracle = finding(report, "oracle")
    assert oracle.status == "warn" and "not tested" in oracle.message
    for name in ("wrong-answer", "padding"):
        f = finding(report, f"probe {name}")
        assert f.status == "skip" and f.message.startswith("n/a, not tested on any of 5 tasks: needs the oracle")
    assert finding(report, "probe empty").status == "pass"
    tested = finding(report, "probes tested")
    assert tested.status == "warn" and tested.message.startswith("untested: only 1 of 3 exploit probes could be played")
    assert tested.data["coverage"] == "untested" and "def oracle" in tested.message and report.report().untested
    assert "wrong-answer, padding (needs the oracle's reply" in tested.message
    assert tested.data["untested"] == {"wrong-answer": NO_ORACLE, "padding": NO_ORACLE}
    assert report.report().probes["padding"].mean is None


def test_inferred_oracle_is_reported_as_inferred():
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(4)] + [rec("empty", i) for i in range(4)]
    f = finding(judge(records, oracle_source="inferred:boxed"), "oracle")
    assert f.status == "pass" and "inferred from the tasks' `answer` field in the boxed format" in f.message


def test_constant_and_prompt_copy_say_what_they_measured():
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(30)]
    records += [rec("constant", i, {"correct": 1.0 if i < 9 else 0.0}) for i in range(30)]
    records += [rec("prompt-copy", i, {"correct": 0.0}, strategy="number -1") for i in range(30)]
    report = judge(records)
    f = finding(report, "probe constant")
    assert f.status == "fail" and "a constant answer is right on 30% of the sampled tasks" in f.message
    assert "the prompt's number -1" in finding(report, "probe prompt-copy").message


def test_constant_within_noise_of_the_allowance_is_said_but_not_a_cause():
    # 3 of 10 against an allowed 10%: p(>= 3 of 10 | 10%) is 0.07, so the probe says so and waits for more tasks
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(10)]
    records += [rec("constant", i, {"correct": 1.0 if i < 3 else 0.0}) for i in range(10)]
    f = finding(judge(records), "probe constant")
    assert f.status == "warn" and "a constant answer is right on 30% of the sampled tasks" in f.message, f.message
    assert "within noise" in f.message and "not a cause" in f.message


def test_constant_accuracy_is_read_from_the_correctness_signal_not_the_format_reward():
    # hack-format's shape: format pays 0.6 whatever the answer, correctness 0.4; the constant is right on 1 in 10
    weights = {"formatted": 0.6, "correct": 0.4}
    records = [rec("oracle", i, {"formatted": 1.0, "correct": 1.0}, weights) for i in range(10)]
    records += [rec("wrong-answer", i, {"formatted": 1.0, "correct": 0.0}, weights) for i in range(10)]
    records += [rec("constant", i, {"formatted": 1.0, "correct": float(i == 0)}, weights, answer_is_constant=i == 0)
                for i in range(10)]
    f = finding(judge(records), "probe constant")
    assert "a constant answer is right on 10% of the sampled tasks by the `correct` reward" in f.message, f.message
    assert "60%" not in f.message and f.status == "pass"


def test_matrix_names_a_component_harvested_under_a_passing_total():
    weights = {"correct": 1.0, "format": 0.05}
    records = [rec("oracle", i, {"correct": 1.0, "format": 1.0}, weights) for i in range(6)]
    records += [rec("wrong-answer", i, {"correct": 0.0, "format": 1.0}, weights) for i in range(6)]
    report = judge(records)
    assert finding(report, "probe wrong-answer").status == "pass"  # 0.05 of 1.05: under the limit
    m = finding(report, "exploit matrix")
    assert m.status == "warn" and "format harvested by wrong-answer (mean 1.00, e.g. task idx 0" in m.message
    frozen = report.report().matrix
    assert frozen.scores["wrong-answer"] == {"correct": 0.0, "format": 1.0}
    assert [(h.component, h.probe) for h in frozen.harvests] == [("format", "wrong-answer")]
    table = "\n".join(matrix.markdown(frozen))
    assert "| component (weight) | oracle | wrong-answer |" in table and "| format (0.05) | 1.00 | 1.00 |" in table
    assert "**format** harvested by `wrong-answer`" in table


def test_matrix_padding_is_judged_against_the_reference_not_the_limit():
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(4)] + [rec("padding", i, {"correct": 1.0})
                                                                         for i in range(4)]
    assert finding(judge(records), "exploit matrix").status == "pass"


# --- probes derived from rollouts --------------------------------------------------------------


def test_mutations_with_a_known_answer():
    rng = random.Random(0)
    reply = "6 times 7.\n<answer>42</answer>"
    swap = mutate("swap-answer", reply, "42", [], ["41", "17"], rng)
    assert swap.startswith("6 times 7.\n<answer>") and "42" not in swap
    sink = mutate("kitchen-sink", reply, "42", [], ["41", "17"], rng)
    assert reply in sink and sink.count("<answer>") == 21
    assert mutate("format-only", reply, "42", [], [], rng) == "6 times 7.\n<answer></answer>"
    assert mutate("final-only", reply, "42", [], [], rng) == "<answer>42</answer>"
    assert mutate("case", reply, "42", [], [], rng) == reply.upper()
    assert mutate("truncated", reply, "42", [], [], rng) is None  # no reasoning to cut
    assert mutate("padding", reply, "42", [], [], rng).startswith(reply)


def test_mutations_without_an_answer_use_other_tasks_replies():
    rng = random.Random(0)
    others = [f"<answer>{w}</answer>" for w in ("blue", "green", "red")]
    assert mutate("swap-answer", "<answer>cyan</answer>", None, others, [], rng) == others[0]
    sink = mutate("kitchen-sink", "<answer>cyan</answer>", None, others, [], rng)
    assert sorted(sink.splitlines()) == sorted(others + ["<answer>cyan</answer>"])
    assert mutate("format-only", "It is <answer>cyan</answer>.", None, [], [], rng) == "  <answer></answer>."
    assert set(DERIVED_MUTATIONS) == {"swap-answer", "kitchen-sink", "format-only", "padding", "final-only",
                                      "truncated", "case", "whitespace"}


def derived(reference: list[float], mutations: dict[str, list[float]]) -> dict:
    records = [{**rec("reference", i, {"correct": s}), "role": "strong"} for i, s in enumerate(reference)]
    for name, scores in mutations.items():
        records += [rec(name, i, {"correct": s}) for i, s in enumerate(scores)]
    return {"records": records, "references": len(reference)}


def test_judge_derived_fails_a_harvesting_mutation_and_measures_variants():
    report = Gates()
    raw = derived([1.0] * 5, {"swap-answer": [0.0] * 5, "kitchen-sink": [1.0] * 5,
                              "padding": [1.0] * 5, "whitespace": [0.0] * 5, "case": [0.0] * 5})
    # few references: the child draws the randomised mutations twice; the second draw confirms the first
    raw["records"] += [{**rec(name, i, {"correct": s}), "sample": 2} for name, s in (("swap-answer", 0.0),
                                                                                    ("kitchen-sink", 1.0))
                       for i in range(5)]
    judge_derived(raw, CONFIG, report)
    assert finding(report, "probe derived kitchen-sink").status == "fail"
    assert finding(report, "probe derived swap-answer").status == "pass"
    assert finding(report, "probe derived padding").status == "pass"
    assert finding(report, "probe derived whitespace").status == "warn"  # whitespace must not matter
    assert finding(report, "probe derived case").status == "pass"  # measured, not judged
    assert finding(report, "probe derived format-only").message.startswith("n/a, not tested")
    assert report.failed == [f"probe derived kitchen-sink: {finding(report, 'probe derived kitchen-sink').message}"]
    assert finding(report, "exploit matrix (derived)").status == "warn"


def test_judge_derived_without_references_is_na():
    report = Gates()
    judge_derived({"records": [], "reason": "no single-turn rollout earned reward"}, CONFIG, report)
    (f,) = report.findings
    assert f.name == "derived probes" and f.status == "skip" and "no single-turn rollout" in f.message


# --- removing oracle hooks from the examples ---------------------------------------------------


def test_every_example_loses_its_oracle_hook_and_still_parses(tmp_path):
    hooked = [e for e in examples() if any("def oracle(" in p.read_text() for p in (PROJECT / "examples" / e).rglob("*.py"))]
    assert len(hooked) >= 8  # the others were written without one (hack-abstain, quiz-numbers, ...)
    for example in hooked:
        target = tmp_path / example
        shutil.copytree(PROJECT / "examples" / example, target)
        assert remove_oracle_hooks(target) >= 1, example
        for path in target.rglob("*.py"):
            source = path.read_text()
            ast.parse(source)
            assert "def oracle(" not in source, path


# --- end to end: the CLI on examples without oracle hooks ------------------------------------------


def continue_config() -> str:
    return small_config().replace("continue_on_failure = false", "continue_on_failure = true")


@pytest.mark.e2e
def test_derived_probes_catch_a_hack_without_oracle_hook_after_an_offline_evaluation(tmp_path):
    from autoenv.run.demo import make_run_repo

    root = make_run_repo("hack-format", tmp_path / "run", continue_config(), run_base=False, oracle=False)
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    entry = json.loads((root / "feedback_log.jsonl").read_text().splitlines()[-1])
    names = {f["name"] for f in entry["gates"]["findings"] if f["status"] == "fail"}
    assert "probe derived swap-answer" in names, names  # the format reward pays a swapped answer
    assert entry["verdict"]["verdict"] == "discard"
    reference = [f for f in entry["gates"]["findings"] if f["name"] == "probe derived reference"]
    assert reference and reference[0]["status"] == "pass"  # the strong model replayed the answer-field oracle
    assert "derived swap-answer" in entry["gates"]["matrix"]["scores"]
    feedback = (root / "feedback" / f"{head(root)}.md").read_text()
    assert "derived swap-answer" in feedback and "[gates.md](../outputs/" in feedback
    details = (root / "outputs" / head(root) / "gates.md").read_text()  # the rows and the matrix, linked
    assert "## Exploit matrix" in details and "derived swap-answer" in details
    again = autoenv("probe", "--from", head(root), cwd=root)
    assert again.returncode == 1 and "FAILED probe derived swap-answer" in again.stdout, again.stdout[-3000:]
    (root / "candidate" / "README.md").write_text((root / "candidate" / "README.md").read_text() + "\nEdited.\n")
    commit_all(root, "a commit never evaluated")
    missing = autoenv("probe", "--from", "HEAD", cwd=root)
    assert missing.returncode == 2 and "no stored rollouts of commit HEAD" in missing.stdout + missing.stderr
