"""The field-copy probe: the task's other data fields written back where the answer goes.

Unit level: which fields it writes (never the index, the prompt or a field equal to this task's answer; a whole
number in words too) and how the gate reads it. The real shape: tests/data/order-total, whose honest reward
compares with the answer (the control), and its planted lazy check that pays any number of the task's data.
"""

from __future__ import annotations

import shutil

import pytest

from autoenv.core.messages import Reply
from autoenv.gates import shapes
from autoenv.gates.probes import probe_replies
from autoenv.gates.rules import Gates, judge_probes
from tests.audits import rec
from tests.test_gates import CONFIG
from tests.test_real_shapes import DATA, probe_env


def test_the_other_fields_are_written_as_stated_and_whole_numbers_in_words_too():
    fields = {"idx": 4, "prompt": "Order 3 lamps.", "items": 3, "weekday": "Monday", "paid": True, "total": "17",
              "notes": "line one\nline two", "parts": [1, 2]}
    assert shapes.written_back(fields, "17") == {"`items`": "3", "`items` in words": "three", "`weekday`": "Monday"}
    replies = probe_replies("field-copy", oracle=Reply(content="<total>17</total>"), answer="17", answers=["17"],
                            messages=[], tools=[], key="k", fields=fields)
    assert replies["`items` in words"].content == "<total>three</total>"
    assert probe_replies("field-copy", oracle=Reply(content="<total>17</total>"), answer="17", answers=["17"],
                         messages=[], tools=[], key="k", fields={"idx": 1}) == {}


def test_fields_at_their_declared_default_are_not_the_tasks_data():
    import verifiers.v1 as vf  # deferred: nothing of verifiers at collection time

    from autoenv.child.task_fields import other_fields

    class OrderData(vf.TaskData):
        total: int
        note: str = ""

    class Task:
        data = OrderData(prompt="Order 3 lamps.", total=17, note="rush")

    # verifiers' own fields (artifact_max_bytes, skills, timeout, ...) hold their defaults: nothing to write back
    assert other_fields(Task(), "total") == {"prompt": "Order 3 lamps.", "note": "rush"}


def test_a_field_that_earns_fails_naming_it():
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(10)]
    records += [rec("field-copy", i, {"correct": 1.0}, strategy="`items`") for i in range(10)]
    report = Gates()
    judge_probes({"probes": records}, CONFIG, report)
    found = {f.name: f for f in report.findings}["probe field-copy"]
    assert found.status == "fail" and "best field: `items` written where the answer goes" in found.message


@pytest.mark.slow
@pytest.mark.parametrize("check", ["answer", "any field"])
def test_order_total_is_clean_with_its_answer_check_and_caught_paying_any_field(tmp_path, check):
    env = tmp_path / "order-total"
    shutil.copytree(DATA / "order-total", env, ignore=shutil.ignore_patterns("__pycache__"))
    source = env / "order_total" / "__init__.py"
    source.write_text(source.read_text().replace('CHECK = "answer"', f'CHECK = "{check}"'))
    findings, _ = probe_env(env, tmp_path / "run")
    probe = findings["probe field-copy"]
    if check == "answer":
        assert not [n for n, f in findings.items() if f["status"] == "fail"], findings
        assert probe["status"] == "pass"
    else:
        assert probe["status"] == "fail" and "best field: `" in probe["message"], probe["message"]


def test_a_field_that_is_another_form_of_the_answer_is_never_written_back():
    rows = [("B", {"answer_text": "Paris", "topic": "capitals", "qid": "q1"}),
            ("C", {"answer_text": "Rome", "topic": "capitals", "qid": "q2"}),
            ("B", {"answer_text": "Paris", "topic": "rivers", "qid": "q3"})]
    # answer_text goes with its answer both ways; topic does not; qid differs where the answer repeats
    assert shapes.answer_forms(rows) == {"answer_text"}
