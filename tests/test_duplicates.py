"""Duplicates and labels: tasks keyed on what the model is given, ids never making a task unique, the same
prompt with different answers a conflicting label; unit tests on the measure and its rules, then a loader
of the real shape (tests/data/quiz-rows: a per-row `example_id`, half its questions repeated, one relabelled)
through the real child audit (`autoenv check --env`)."""

from __future__ import annotations

import json

import pytest

from autoenv.core.record import GateFinding
from autoenv.gates import dataset
from autoenv.gates.dataset import id_fields, measure
from autoenv.judge.offline import CHECK_FIXES
from tests.audits import audit, clean_rows
from tests.conftest import autoenv, small_config
from tests.test_gates import find, judge
from tests.test_real_shapes import DATA, planted

QUESTIONS = [f"What is the capital of country number {n} on the list? Reply with the city." for n in range(50)]


def loader_rows(questions: list[str], answers: list[str], **extra) -> list[dict]:
    """Rows as autoenv.child.task_rows builds them from a loader that numbers its rows (`example_id`, `info.row`)."""
    return [{"key": f"k{i}", "idx": i, "prompt": q, "system": "Answer briefly.", "parts": "", "answer": a,
             "data": json.dumps({"answer": a, "example_id": 5000 + i, "info": {"row": i, "split": "test"}, **extra})}
            for i, (q, a) in enumerate(zip(questions, answers))]


def test_id_like_fields_are_found_by_name_or_shape_and_a_seed_or_answer_is_not_one():
    rows = [{"prompt": f"Play deal {i}." if i % 2 else "Play.", "data": json.dumps({
        "example_id": i, "info": {"row": i, "seed": i, "sampleIdx": f"s{i}", "level": i % 3},
        "uuid_like": f"{i:08x}-1111-2222-3333-444455556666", "digest": f"{i:032x}", "answer": f"{i:016x}",
        "shown": f"{i:016x}" if i == 1 else f"{i + 100:016x}", "index": i % 5})} for i in range(10)]
    rows[1]["prompt"] += f" Ref {1:016x}."  # a hex value the prompt shows is the task's, not an id
    assert id_fields(rows) == ["digest", "example_id", "info.row", "info.sampleIdx", "uuid_like"]
    # kept: info.seed (a distinct int not named like an id: textarena's seed), info.level, answer, shown,
    # index (named like an id, but repeated: not a per-row id)


def test_a_per_row_id_makes_no_task_unique_and_half_repeated_questions_fail():
    questions = QUESTIONS[:25] * 2
    m = measure(loader_rows(questions, [f"city {i % 25}" for i in range(50)]), 0.9)
    assert m["exact_duplicates"] == 25 and m["exact_duplicate_share"] == 0.5 and m["conflicting_labels"] == 0
    assert m["distinguished_by"] == "prompt" and m["id_fields"] == ["example_id", "info.row"]
    assert m["duplicate_examples"][0] == [0, 25]
    f = find(judge(audit(dataset=m)), "exact duplicates")
    assert f.status == "fail" and f.message.startswith("25 repeated prompts (50.0%, allowed 1%); e.g. task idx 0 = 25")
    assert find(judge(audit(dataset=m)), "conflicting labels").status == "pass"


def test_the_same_prompt_with_different_answers_is_a_conflicting_label():
    answers = [f"city {i}" for i in range(50)]
    rows = loader_rows(QUESTIONS, answers)
    rows[30].update(prompt=rows[4]["prompt"], answer="Toronto")
    rows[31].update(prompt=rows[5]["prompt"], answer=" CITY  5 ")  # the same label written differently: no conflict
    m = measure(rows, 0.9)
    assert m["conflicting_labels"] == 1 and m["conflict_examples"] == [[4, "city 4", 30, "Toronto"]]
    assert m["exact_duplicates"] == 2  # both repeats are what the model sees twice
    report = judge(audit(dataset=m))
    f = find(report, "conflicting labels")
    assert f.status == "fail" and 'e.g. idx 4 "city 4" vs idx 30 "Toronto"' in f.message
    assert f.message.startswith("1 prompt given to several tasks with different answers")
    fix = CHECK_FIXES["conflicting labels"](f)
    assert "keep one task per prompt (dedupe), or fix the wrong label" in fix and "candidate's loader" in fix
    assert 'idx 4 "city 4" vs idx 30 "Toronto"' in fix
    assert find(judge(audit(dataset=measure(loader_rows(QUESTIONS, answers), 0.9))), "conflicting labels").status == "pass"
    unlabelled = [{k: v for k, v in r.items() if k != "answer"} for r in rows]
    assert find(judge(audit(dataset=measure(unlabelled, 0.9))), "conflicting labels").status == "skip"


def test_where_data_reaches_the_model_tasks_are_compared_whole_ids_aside():
    """verifiers' textarena (wordle): one prompt, the game's seed in `info`, played by a custom Env."""
    rows = [{"key": f"k{i}", "idx": i, "prompt": "Let's play wordle.", "system": "", "parts": "",
             "data": json.dumps({"info": {"game": "Wordle-v0", "seed": i % 20, "example_id": i}})} for i in range(40)]
    m = measure(rows, 0.9, reach="the custom Env TextArenaEnv")
    assert m["exact_duplicates"] == 20 and m["id_fields"] == ["info.example_id"] and m["conflicting_labels"] == 0
    f = find(judge(audit(dataset=m)), "exact duplicates")
    assert f.status == "fail" and f.message.startswith(
        "20 repeated tasks (same prompt and data fields, which reach the model through the custom Env "
        "TextArenaEnv) (50.0%, allowed 1%)")
    assert f.message.endswith("ids never make a task unique: info.example_id left out")
    assert "make the 20 repeated tasks distinct" in CHECK_FIXES["exact duplicates"](f)
    assert find(judge(audit(dataset=m)), "conflicting labels").status == "skip"
    distinct = measure([{**r, "data": json.dumps({"info": {"seed": r["idx"], "example_id": r["idx"]}})} for r in rows],
                       0.9, reach="the custom Env TextArenaEnv")
    assert distinct["exact_duplicates"] == 0


def test_prompt_less_tasks_drop_their_ids_too():
    rows = [{"key": f"k{i}", "idx": i, "prompt": "", "fields": True,
             "data": json.dumps({"seed": i % 4, "row_id": f"r{i}"})} for i in range(8)]
    m = measure(rows, 0.9)
    assert m["distinguished_by"] == "data fields" and m["exact_duplicates"] == 4 and m["id_fields"] == ["row_id"]


def test_a_prompt_differing_only_by_its_row_id_is_a_near_duplicate():
    long = ("Read the passage about the river delta, its sediment, the tides and the villages built on stilts, "
            "then say in one word which of them the passage mentions first. Item {n}.")
    rows = loader_rows([long.format(n=5000 + i) for i in range(2)], ["river", "river"])
    assert measure(rows, 0.8)["near_duplicate_pairs"] == 1  # the differing words are the id: not the task's data


def test_clean_rows_stay_clean():
    m = measure(clean_rows(), 0.9)
    assert m["exact_duplicates"] == 0 and m["conflicting_labels"] == 0 and m["id_fields"] == []
    assert dataset.exact_key(clean_rows(1)[0], False) == dataset.exact_key({**clean_rows(1)[0], "data": "{}"}, False)


def check_env(env, cwd) -> tuple[dict, dict]:
    """`autoenv check --env` on `env` from `cwd` (exit 1 when a gate failed): the findings by name and audit.json."""
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "config.toml").write_text(small_config())
    result = autoenv("check", "--env", str(env), cwd=cwd)
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-2000:]
    gates = max((cwd / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    findings = {f["name"]: f for f in json.loads(gates.read_text())["findings"]}
    return findings, json.loads((gates.parent / "audit.json").read_text())


@pytest.mark.slow
def test_a_loader_with_row_ids_half_repeated_and_one_relabelled_fails_on_both_counts(tmp_path):
    findings, audit_json = check_env(DATA / "quiz-rows", tmp_path / "bad")
    d = audit_json["dataset"]
    assert d["distinguished_by"] == "prompt" and d["data_reach"] is None
    assert d["id_fields"] == ["example_id", "info.row"]
    dup = findings["exact duplicates"]
    assert dup["status"] == "fail" and dup["message"].startswith("16 repeated prompts (50.0%, allowed 1%)"), dup
    labels = findings["conflicting labels"]
    assert labels["status"] == "fail" and 'idx 6 "Ottawa" vs idx 22 "Toronto"' in labels["message"], labels
    fixed = planted(tmp_path, "quiz-rows", 'SPLIT = CAPITALS + [(country, "Toronto" if country == "Canada" else city) '
                    'for country, city in CAPITALS]', "SPLIT = CAPITALS")
    findings, _ = check_env(fixed, tmp_path / "good")
    assert {findings[n]["status"] for n in ("exact duplicates", "conflicting labels")} == {"pass"}
    assert not [f for f in findings.values() if f["status"] == "fail"], findings


def test_a_finding_without_unit_keeps_the_old_wording():
    f = GateFinding(name="exact duplicates", status="fail", message="", data={"examples": [[0, 1]], "repeated": 1})
    assert CHECK_FIXES["exact duplicates"](f).startswith("make the 1 repeated prompts distinct")
