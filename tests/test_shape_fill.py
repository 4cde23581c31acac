"""The shape-fill probe (autoenv.gates.shapes): degenerate fillings of the right answer's own shape.

Unit level: the fillings of list, JSON-list and numeric answers, none of them one a correct reward may accept
(no reordering, no answer written twice); a reward with partial credit for a superset stays under the gate's
limit, one that accepts it fails. The real shape: tests/data/prime-list (a list of primes scored by a set
comparison) as the clean control, and its two planted flaws, a recall-only comparison and a count-and-range
check, each caught with the filling that earned.
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
from tests.test_real_shapes import DATA, planted, probe_env

ANSWERS = ["2, 3, 5, 7", "11, 13, 17", "23, 29", "31, 37, 41, 43"]


def test_a_list_answer_is_filled_as_a_superset_the_domain_one_item_repeated_and_unknown_items():
    found = shapes.fillings("11, 13, 17", ANSWERS, "The primes from 10 to 20.")
    assert found["superset"].startswith("11, 13, 17, ") and len(found["superset"].split(", ")) == 6
    whole = found["whole domain"].split(", ")
    assert whole[0] == "2" and whole[-1] == "43" and len(whole) == 42  # every integer the tasks and prompt span
    assert found["repeated item"] == "11, 11, 11"
    unknown = found["unknown items"].split(", ")
    assert len(unknown) == 3 and not set(unknown) & set(", ".join(ANSWERS).split(", "))
    for legit in ("17, 13, 11", "11, 13, 17, 11, 13, 17", "11, 13, 17"):  # a set's reading accepts these
        assert legit not in found.values()


def test_json_lists_keep_their_form_and_numbers_get_leading_digits_and_a_tenth():
    found = shapes.fillings('["red", "blue"]', ['["red", "blue"]', '["green"]', '["blue", "white"]'], "")
    assert found["superset"] == '["red", "blue", "green", "white"]'
    assert found["repeated item"] == '["red", "red"]'
    assert found["unknown items"] == '["red-unknown-1", "blue-unknown-2"]'
    far = {"far above": "1000000000", "far below": "-1000000000"}
    assert shapes.fillings("1234", [], "") == {"leading digits": "123", "a tenth": "123.4", **far}
    assert shapes.fillings("-0.5", [], "") == {"a tenth": "-0.05", **far}
    assert shapes.fillings("0", [], "") == far  # no tenth of nothing, but a bound still shows
    assert shapes.fillings("7" * 12, [], "")["far above"] == "7" * 12 + "000"  # far from a large answer too
    assert len(shapes.fillings("7" * 400, [], "")["far above"]) == 404  # past a float's range: still a number
    assert shapes.fillings("Paris", ["Paris", "Rome"], "") == {}
    assert shapes.located("['a', 'b']", "<answer>a, b</answer>") == "a, b"  # a data field's list, written out


def test_a_mapping_is_filled_with_its_keys_alone_and_with_one_value_for_every_key():
    assert shapes.fillings('{"city": "Oslo", "country": "Norway"}', [], "") == {
        "keys only": '{"city": "", "country": ""}', "one value for every key": '{"city": "Oslo", "country": "Oslo"}'}
    assert shapes.fillings("{'a': 1, 'b': 1}", [], "") == {"keys only": "{'a': None, 'b': None}"}  # values alike
    assert shapes.fillings('{"a": 1}', [], "") == {}  # one key: nothing to fill wrongly that a check could miss
    # a data field's dict, written as JSON in the reply
    assert shapes.located("{'a': 1, 'b': 2}", 'Result: {"a": 1, "b": 2}') == '{"a": 1, "b": 2}'


def test_the_probe_puts_each_filling_where_the_oracle_wrote_the_answer():
    replies = probe_replies("shape-fill", oracle=Reply(content="<answer>11, 13, 17</answer>"), answer="11, 13, 17",
                            answers=ANSWERS, messages=[{"role": "user", "content": "The primes from 10 to 20."}],
                            tools=[], key="k")
    assert replies["repeated item"].content == "<answer>11, 11, 11</answer>"
    assert set(replies) == {"superset", "whole domain", "repeated item", "unknown items"}


def judged(filled: float) -> dict:
    records = [rec("oracle", i, {"correct": 1.0}) for i in range(10)]
    records += [rec("shape-fill", i, {"correct": filled}, strategy="superset") for i in range(10)]
    report = Gates()
    judge_probes({"probes": records}, CONFIG, report)
    return {f.name: f for f in report.findings}


def test_partial_credit_for_a_superset_passes_and_full_credit_fails_naming_the_filling():
    assert judged(2 / 3)["probe shape-fill"].status == "pass"  # F1 of a superset twice the answer's size
    failed = judged(1.0)["probe shape-fill"]
    assert failed.status == "fail" and "best filling: superset" in failed.message


@pytest.mark.slow
@pytest.mark.parametrize("check,filling", [("set", None), ("recall", ("superset", "whole domain")),
                                           ("count", ("repeated item",))])
def test_the_prime_list_control_passes_and_each_planted_comparison_is_caught(tmp_path, check, filling):
    env = tmp_path / f"prime-list-{check}"
    shutil.copytree(DATA / "prime-list", env, ignore=shutil.ignore_patterns("__pycache__"))
    source = env / "prime_list" / "__init__.py"
    source.write_text(source.read_text().replace('CHECK = "set"', f'CHECK = "{check}"'))
    findings, audit = probe_env(env, tmp_path / "run")
    failed = {n for n, f in findings.items() if f["status"] == "fail"}
    if filling is None:
        assert not failed, {n: findings[n]["message"] for n in failed}
        assert findings["probe shape-fill"]["status"] == "pass"
        return
    assert "probe shape-fill" in failed, findings["probe shape-fill"]["message"]
    assert any(f"best filling: {name}" in findings["probe shape-fill"]["message"] for name in filling)


@pytest.mark.slow
@pytest.mark.parametrize("bound,filling", [(">=", "far above"), ("<=", "far below")])
def test_a_one_sided_bound_for_equality_is_caught_by_a_value_far_beyond_every_answer(tmp_path, bound, filling):
    """tests/data/abs-compare with its comparison slipped to a bound; its signed comparison is the control
    (tests/test_near_miss.py: no gate fails with SIGNED = True)."""
    env = planted(tmp_path, "abs-compare", "float(got == want if SIGNED else abs(got) == abs(want))",
                  f"float(got {bound} want)")
    findings, _ = probe_env(env, tmp_path / "run")
    row = findings["probe shape-fill"]
    assert row["status"] == "fail" and any(f"best filling: {f}" in row["message"] for f in filling), row["message"]


@pytest.mark.slow
@pytest.mark.parametrize("check,filling", [("values", None), ("keys", ("keys only", "one value for every key")),
                                           ("types", ("one value for every key",))])
def test_a_mapping_answer_scored_by_its_values_is_clean_and_by_its_keys_or_types_is_caught(tmp_path, check, filling):
    env = planted(tmp_path, "city-facts", 'CHECK = "values"', f'CHECK = "{check}"')
    findings, _ = probe_env(env, tmp_path / "run")
    row = findings["probe shape-fill"]
    if filling is None:
        failed = {n: f["message"] for n, f in findings.items() if f["status"] == "fail"}
        assert not failed and row["status"] == "pass", failed or row
        return
    assert row["status"] == "fail" and any(f"best filling: {f}" in row["message"] for f in filling), row["message"]
