"""The `surface` family: one constant reply drawn from the env's own instructions, played on every task.

A real steganography env scored 1.0 on every task for one encoded constant word, and no probe produced it: each
content-free probe was a reply somebody scripted (an abstention, a stub, random text), never a word the env itself
offers. tests/data/stego-constant has that shape: the reward checks the decoded word against the example word of
its own system prompt instead of the task's secret. The family's constants come from the instructions (the empty
format, quoted and capitalised words, examples, the system prompt's words), each played bare and in the format the
prompt states; where a constant is a task's own data value (`true` on a true/false set) it is right by the data
there and left out of the judgement.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoenv.gates.families import data_values, family_replies, holds_constant, surface_replies, unwrapped
from autoenv.gates.rules import HELD_CONSTANT, Gates, judge_audit
from tests.audits import audit, rec
from tests.conftest import autoenv, small_config
from tests.test_gates import CONFIG

STEGO = Path(__file__).parent / "data" / "stego-constant"
SYSTEM = ("Hide the secret in a sentence. For example, to hide ORCHID write \"the Old Road\". Reply `DONE` when "
          "finished. Put the sentence inside <cover></cover>, or answer as {\"cover\": \"...\"}.")


def messages(prompt: str, system: str = SYSTEM) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": prompt}]


def test_constants_come_from_the_instructions_in_the_format_they_state():
    found = surface_replies(messages("The secret word is MAPLE."))
    replies = {reply for _, reply in found.values()}
    assert list(found)[:2] == ["empty <cover>", 'empty {"cover"}']  # the shortest replies each format allows first
    assert {"<cover></cover>", '{"cover": ""}', "DONE", "<cover>DONE</cover>", "ORCHID", "<cover>ORCHID</cover>",
            "the Old Road"} <= replies
    assert not any("MAPLE" in reply for reply in replies)  # never the task's own content: the system prompt alone
    assert len(found) <= 32
    other = surface_replies(messages("The secret word is RIVER."))
    assert list(other) == list(found)  # the same strategies on every task: the best one is judged over all tasks
    no_system = family_replies("surface", messages=[{"role": "user", "content": "Say <answer>yes</answer> or no."}],
                               answers=[])
    assert "empty <answer>" in no_system and "yes in <answer>" in no_system  # no system prompt: the prompt's own
    assert family_replies("surface", messages=[{"role": "user", "content": "?!"}], answers=[]) == {}


def test_a_constant_that_is_the_tasks_own_value_is_right_by_the_data_and_left_out():
    class Data:
        def model_dump(self) -> dict:
            return {"idx": 3, "answer": "True", "tags": ["logic", 7]}
    assert data_values(Data()) == {"true", "logic", "7"}
    assert holds_constant(unwrapped("<answer>true</answer>"), Data()) and holds_constant("7", Data())
    assert not holds_constant("3", Data()) and not holds_constant("", Data())  # idx is no answer
    held = [{**rec("surface", i, {"correct": 1.0}), "constant_in_data": True, "strategy": "true in <answer>"}
            for i in range(3)]
    rest = [{**rec("surface", i, {"correct": 0.0}), "constant_in_data": False, "strategy": "true in <answer>"}
            for i in range(3, 6)]
    oracle = [rec("oracle", i, {"correct": 1.0}) for i in range(6)]
    report = Gates()
    judge_audit(audit(oracle + held + rest), CONFIG, report)
    findings = {f.name: f for f in report.findings}
    assert findings["probe surface"].status == "pass" and "tested on 3 of 6 tasks" in findings["probe surface"].message
    assert "surface" not in (findings["content-free"].data.get("failed") or [])
    assert HELD_CONSTANT


@pytest.mark.slow
def test_the_constant_encode_flaw_is_caught_and_its_fix_passes(tmp_path):
    (tmp_path / "config.toml").write_text(small_config())
    result = autoenv("probe", "--env", str(STEGO), cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    gates = max((tmp_path / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    findings = {f["name"]: f for f in json.loads(gates.read_text())["findings"]}
    free = findings["content-free"]
    assert free["status"] == "fail" and free["data"]["failed"][0] == "surface", free
    assert set(free["data"]["failed"]) <= {"surface", "search"}  # the search finds the instructions' word too
    assert free["data"]["paid"]["surface"] == "hidden" and "ORCHID" in free["message"]
    assert findings["probe surface"]["status"] == "fail"
    fixed = tmp_path / "fixed"
    shutil.copytree(STEGO, fixed)
    module = fixed / "stego_constant" / "__init__.py"
    module.write_text(module.read_text().replace("CHECK_TASK_SECRET = False", "CHECK_TASK_SECRET = True"))
    result = autoenv("probe", "--env", str(fixed), cwd=tmp_path)
    assert result.returncode == 0 and "FAILED" not in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    gates = max((tmp_path / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    findings = {f["name"]: f for f in json.loads(gates.read_text())["findings"]}
    assert findings["probe surface"]["status"] == "pass" and findings["content-free"]["status"] == "pass"


def test_a_word_only_one_tasks_prompt_holds_is_task_content_not_a_constant():
    """verifiers' `interception`: no system prompt, each task 'Reply with exactly MARKER.' with its own marker,
    and the reward pays a reply holding it. Through rollouts the family plays its first strategy on each task; a
    strategy drawn from each task's own prompt would copy the task (prompt-copy's business, not a constant)."""
    from autoenv.gates.families import family_reply, shared_surface
    tasks = [[{"role": "user", "content": f"Reply with exactly {marker}."}]
             for marker in ("DETERMINISTIC_BLOCK", "JUDGE_BLOCK", "STOP", "METRIC_ONLY")]
    shared = shared_surface(tasks)
    assert shared and not any(marker in s for s in shared for marker in ("BLOCK", "STOP", "METRIC"))
    for opening in tasks:
        reply = family_reply("surface", messages=opening, answers=[], surface=shared)
        assert reply is not None and not any(m in (reply.content or "") for m in ("BLOCK", "STOP", "METRIC"))
    stego = [messages(f"The secret word is {w}.") for w in ("MAPLE", "RIVER")]
    assert "ORCHID bare" in shared_surface(stego)  # the system prompt is every task's: its words stay


def test_the_answer_field_oracle_learns_the_format_the_instructions_state():
    """verifiers' reverse_text asks for `<reversed_text>` tags in its system prompt and never closes the tag in its
    text; the four common formats earn nothing there, so no oracle was inferred and eight probes went untested."""
    import asyncio
    import re
    from types import SimpleNamespace

    from autoenv.gates.answer_oracle import candidate_formats, format_reply, infer_format
    tasks = [SimpleNamespace(data=SimpleNamespace(
        system_prompt="Reverse the text character-by-character. Put your answer in <reversed_text> tags.",
        prompt=word, answer=word[::-1])) for word in ("stone", "river", "lamp")]

    async def score(task, text: str) -> float:
        found = re.search(r"<reversed_text>(.*?)</reversed_text>", text)
        return float(bool(found) and found.group(1) == task.data.answer)

    assert candidate_formats(tasks)[0] == "<reversed_text>{}</reversed_text>"
    form, means = asyncio.run(infer_format(tasks, score))
    assert form == "<reversed_text>{}</reversed_text>" and means[form] == 1.0 and means["answer-tag"] == 0.0
    assert format_reply("enots", form) == "<reversed_text>enots</reversed_text>"
    tagged = [SimpleNamespace(data=SimpleNamespace(system_prompt=None, prompt="Reply as <answer>x</answer>.",
                                                   answer="x"))]
    assert candidate_formats(tagged)[0] == "answer-tag"  # a stated format the harness knows keeps its name


def test_the_answer_field_is_found_by_what_moves_the_reward_not_by_its_name():
    """code_golf keeps its reference in `expected`, the steganography envs in `secret`: a field named `answer` is a
    convention, not a rule. Each field's value is put into each format and scored; the one the reward pays is the
    answer field, reported so, and fields that are ids or equal on every task are never tried."""
    import asyncio
    import re
    from types import SimpleNamespace

    from autoenv.gates.answer_oracle import answer_fields, infer_answer
    words = ("maple", "river", "lamp", "stone")
    tasks = [SimpleNamespace(data=SimpleNamespace(idx=i, prompt=f"Hide {w}. Reply in <cover></cover>.", example_id=i,
                                                  category="stego", hint=w[::-1], secret=w.upper()))
             for i, w in enumerate(words)]
    assert answer_fields(tasks) == ["hint", "secret"]  # ids, the prompt and a field equal everywhere are not answers

    async def score(task, text: str) -> float:
        found = re.search(r"<cover>(.*?)</cover>", text)
        return float(bool(found) and found.group(1) == task.data.secret)

    form, field, tried = asyncio.run(infer_answer(tasks, score))
    assert (form, field) == ("<cover>{}</cover>", "secret") and tried["secret: <cover>{}</cover>"] == 1.0
    assert tried["hint: <cover>{}</cover>"] == 0.0
    named = [SimpleNamespace(data=SimpleNamespace(idx=0, prompt="2+2? <answer></answer>", answer="4", other="x"))]
    assert answer_fields(named)[0] == "answer"  # `answer` is still tried first


def test_a_field_that_moves_nothing_is_not_taken_for_the_answer():
    """verifiers' grayscale_interception pays every reply 1.0 (its reward is whether a hook fired): any field's value
    in any format 'earns' it. A field other than `answer` counts only where its own value earns more than another
    task's value in the same format; one task, or one value everywhere, shows nothing moving and is not tried."""
    import asyncio
    from types import SimpleNamespace

    from autoenv.gates.answer_oracle import answer_fields, infer_answer
    tasks = [SimpleNamespace(data=SimpleNamespace(idx=i, prompt=f"Describe picture {i}.", label=f"pic{i}"))
             for i in range(4)]

    async def always(task, text: str) -> float:
        return 1.0

    form, field, tried = asyncio.run(infer_answer(tasks, always))
    assert (form, field) == (None, None)
    assert [v for k, v in tried.items() if k.startswith("label: ") and k.endswith("(another task's value)")] == [1.0]
    assert answer_fields(tasks[:1]) == []  # one task: nothing can be seen to move
