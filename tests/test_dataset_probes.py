"""autoenv/dataset.py (measure, near-duplicates) and autoenv/probes.py (probe_reply): fast unit tests."""

from __future__ import annotations

import json
import re

import pytest

from autoenv.core.messages import Reply, ToolCall, seeded_rng
from autoenv.gates import dataset
from autoenv.gates.probes import EXPLOITS, FILLER, REFUSAL, probe_reply, wrong_answers

THRESHOLD = 0.9
# A long prompt body: one word changed in ~120 leaves a word-shingle Jaccard of about 0.95.
BODY = ("You are given a warehouse ledger. " + " ".join(f"item{i} weighs {i % 17 + 1} kilograms;" for i in range(30))
        + " Report the heaviest item and its weight, then explain which shelves must be moved first.")


def row(idx: int, prompt: str, system: str = "", **extra) -> dict:
    return {"key": f"k{idx}", "idx": idx, "prompt": prompt, "system": system, **extra}


def long_prompt(word: str) -> str:
    return BODY.replace("warehouse", word, 1)


# --- dataset.shingles / near_duplicate_pairs ---------------------------------------------


def test_shingles_are_word_trigrams_of_the_normalised_text():
    assert dataset.shingles("A  b C d") == {"a b c", "b c d"}
    assert dataset.shingles("Hi there") == {"hi there"}  # shorter than a shingle: one shingle
    assert dataset.shingles("   ") == set()
    assert dataset.shingles("x+y") == {"x + y"}  # punctuation is its own token


def test_near_duplicate_pairs_report_the_exact_jaccard():
    a, b = long_prompt("warehouse"), long_prompt("depot")
    sa, sb = dataset.shingles(a), dataset.shingles(b)
    exact = len(sa & sb) / len(sa | sb)
    assert THRESHOLD <= exact < 1
    pairs = dataset.near_duplicate_pairs([a, "something else entirely, about cats and their habits", b], THRESHOLD)
    assert pairs == [(0, 2, round(exact, 3))]


def test_near_duplicate_pairs_respect_the_threshold():
    a, b = long_prompt("warehouse"), long_prompt("depot")
    sa, sb = dataset.shingles(a), dataset.shingles(b)
    exact = len(sa & sb) / len(sa | sb)
    assert dataset.near_duplicate_pairs([a, b], exact) == [(0, 1, round(exact, 3))]  # >= threshold counts
    assert dataset.near_duplicate_pairs([a, b], exact + 1e-9) == []


def test_exact_duplicates_are_not_near_duplicate_pairs():
    a = long_prompt("warehouse")
    assert dataset.near_duplicate_pairs([a, a.upper(), "  " + a], THRESHOLD) == []


def test_short_templated_prompts_are_not_near_duplicates():
    texts = ["Compute: 14 + 9", "Compute: 14 + 8", "Compute: 14 + 7", "Compute: 15 + 9"]
    assert dataset.near_duplicate_pairs(texts, THRESHOLD) == []
    m = dataset.measure([row(i, t) for i, t in enumerate(texts)], THRESHOLD)
    assert m["near_duplicate_pairs"] == 0 and m["near_duplicate_share"] == 0.0


def test_near_duplicates_found_among_a_larger_dataset():
    """A near-duplicate pair hidden among 200 distinct prompts is found (LSH does not miss it)."""
    rows = [row(i, f"Question {i}: " + " ".join(f"w{i * 31 + j}" for j in range(25))) for i in range(200)]
    rows.append(row(200, long_prompt("warehouse")))
    rows.append(row(201, long_prompt("depot")))
    m = dataset.measure(rows, THRESHOLD)
    assert m["near_duplicate_pairs"] == 1
    assert m["near_duplicate_examples"][0][:2] == [200, 201]
    assert m["near_duplicate_share"] == round(2 / 202, 4)


def test_templated_long_prompts_are_near_duplicates():
    rows = [row(i, long_prompt(f"store{i}")) for i in range(60)]
    m = dataset.measure(rows, THRESHOLD)
    assert m["near_duplicate_share"] == 1.0
    assert m["near_duplicate_pairs"] == 60 * 59 // 2


def test_massive_templated_duplication_is_still_found():
    rows = [row(i, long_prompt(f"store{i}")) for i in range(300)]
    m = dataset.measure(rows, THRESHOLD)
    assert m["near_duplicate_share"] > 0.9


# --- dataset.measure ----------------------------------------------------------------------


def test_exact_duplicates_compare_system_prompt_and_prompt():
    rows = [
        row(10, "Compute: 1 + 1", "sys A"),
        row(11, "Compute: 1 + 1", "sys A"),       # duplicate of 10
        row(12, "compute:   1 + 1 ", "SYS a"),    # duplicate after normalisation
        row(13, "Compute: 1 + 1", "sys B"),       # different system prompt: not a duplicate
        row(14, "Compute: 2 + 2", "sys A"),
        row(15, "Compute: 2 + 2", "sys A"),       # duplicate of 14
    ]
    m = dataset.measure(rows, THRESHOLD)
    assert m["size"] == 6
    assert m["exact_duplicates"] == 3  # (3 - 1) + (2 - 1)
    assert m["exact_duplicate_share"] == 0.5
    assert m["duplicate_examples"] == [[10, 11, 12], [14, 15]]  # idx, largest group first


def test_duplicate_examples_are_idx_not_positions_and_capped():
    rows = [row(100 + i, "same prompt") for i in range(5)] + [row(200 + i, f"other {i}") for i in range(3)]
    m = dataset.measure(rows, THRESHOLD)
    assert m["exact_duplicates"] == 4
    assert m["duplicate_examples"] == [[100, 101, 102]]


def test_near_duplicate_share_counts_tasks_in_pairs():
    rows = [row(0, long_prompt("warehouse")), row(1, long_prompt("depot")), row(2, long_prompt("barn")),
            row(3, "A completely unrelated question about the history of the printing press in Europe."),
            row(4, "Compute: 3 * 4")]
    m = dataset.measure(rows, THRESHOLD)
    assert m["near_duplicate_pairs"] == 3  # 0-1, 0-2, 1-2
    assert m["near_duplicate_share"] == 0.6  # 3 of 5 tasks
    assert all(s >= THRESHOLD for *_, s in m["near_duplicate_examples"])


def test_near_duplicates_ignore_the_shared_system_prompt():
    system = " ".join(f"rule{i}" for i in range(200))  # a long shared system prompt
    rows = [row(i, f"Compute: {i} + {i * 7 % 13}", system) for i in range(20)]
    m = dataset.measure(rows, THRESHOLD)
    assert m["near_duplicate_pairs"] == 0 and m["exact_duplicates"] == 0


def test_answer_balance():
    rows = [row(i, f"q{i}", answer=a) for i, a in enumerate(["4", "4", "4", "7", "9", "4"])]
    rows.append(row(6, "no answer here"))
    m = dataset.measure(rows, THRESHOLD)
    assert m["top_answer"] == "4"
    assert m["top_answer_share"] == round(4 / 6, 4)  # share of tasks that carry an answer
    assert m["distinct_answers"] == 3
    assert m["with_answer"] == 6


def test_answers_are_compared_as_text():
    m = dataset.measure([row(0, "a", answer=4), row(1, "b", answer="4"), row(2, "c", answer=4.0)], THRESHOLD)
    assert m["top_answer"] == "4" and m["distinct_answers"] == 2


def test_no_answers_gives_no_balance():
    m = dataset.measure([row(0, "a"), row(1, "b")], THRESHOLD)
    assert m["top_answer"] is None and m["top_answer_share"] is None and m["distinct_answers"] == 0


def test_difficulty_and_category_histograms():
    rows = [row(i, f"q{i}", difficulty=d, category=c)
            for i, (d, c) in enumerate([("hard", "x"), ("easy", "x"), ("easy", "y"), ("medium", "x")])]
    rows.append(row(9, "q9"))
    m = dataset.measure(rows, THRESHOLD)
    assert m["difficulty"] == {"easy": 2, "hard": 1, "medium": 1}
    assert list(m["difficulty"]) == ["easy", "medium", "hard"]  # natural order, not alphabetical
    assert m["category"] == {"x": 3, "y": 1}
    assert dataset.measure([row(0, "a")], THRESHOLD)["difficulty"] == {}


def test_duplicate_keys():
    rows = [row(0, "a"), row(1, "b"), row(2, "c")]
    rows[1]["key"] = rows[2]["key"] = "same"
    rows.append({**row(3, "d"), "key": "same"})
    assert dataset.measure(rows, THRESHOLD)["duplicate_keys"] == 2
    assert dataset.measure([row(0, "a"), row(1, "b")], THRESHOLD)["duplicate_keys"] == 0


def test_empty_dataset_does_not_crash():
    m = dataset.measure([], THRESHOLD)
    assert m["size"] == 0 and m["exact_duplicates"] == 0 and m["exact_duplicate_share"] == 0.0
    assert m["near_duplicate_share"] == 0.0 and m["top_answer_share"] is None
    assert m["duplicate_examples"] == [] and m["near_duplicate_examples"] == []
    json.dumps(m)


def test_empty_prompts_do_not_crash():
    m = dataset.measure([row(0, ""), row(1, ""), row(2, "x")], THRESHOLD)
    assert m["exact_duplicates"] == 1 and m["near_duplicate_pairs"] == 0


def test_measure_of_a_thousand_rows_is_json():
    rows = [row(i, f"Compute: {i} * {i % 9 + 2} - {i % 5}", "sys", answer=str(i * (i % 9 + 2) - i % 5),
                difficulty=("easy", "medium", "hard")[i % 3]) for i in range(1000)]
    m = dataset.measure(rows, THRESHOLD)
    assert m["size"] == 1000 and m["exact_duplicates"] == 0 and m["near_duplicate_pairs"] == 0
    assert m["difficulty"] == {"easy": 334, "hard": 333, "medium": 333}
    assert json.loads(json.dumps(m)) == m


# --- probes.probe_reply --------------------------------------------------------------------

SYSTEM = {"role": "system", "content": "Answer in one <answer></answer> tag."}
MESSAGES = [SYSTEM, {"role": "user", "content": "Compute: 20 + 22"}]
POOL = ["17", "42", "99", "-3", "12.34", "5.60", "7.1", "apple"]
TOOLS = [{"type": "function", "function": {"name": "price", "parameters": {}}},
         {"type": "function", "function": {"name": "coupon", "parameters": {}}}]


def probe(name: str, oracle: str | Reply | None = "<answer>42</answer>", answer: str | None = "42",
          answers: list[str] = POOL, messages: list[dict] = MESSAGES, tools: list[dict] = (), key: str = "task-1",
          seed: int = 0) -> Reply | None:
    if isinstance(oracle, str):
        oracle = Reply(content=oracle)
    return probe_reply(name, oracle=oracle, answer=answer, answers=list(answers), messages=messages,
                       tools=list(tools), key=key, seed=seed)


def test_every_exploit_has_a_description():
    assert set(EXPLOITS) == {"empty", "refusal", "echo", "wrong-answer", "kitchen-sink", "padding", "garbage",
                             "tool-spam", "first-number", "last-line", "injection", "constant", "prompt-copy",
                             "abstain", "typical-value", "self-report", "structural", "stub", "valid-tool-spam", "stall",
                             "surface", "near-miss", "search", "shape-fill", "field-copy", "grader-attack"}
    assert all(isinstance(v, str) and v for v in EXPLOITS.values())


def test_unknown_probe_is_an_error():
    with pytest.raises(ValueError, match="unknown probe"):
        probe("nonsense")


def test_empty():
    assert probe("empty") == Reply(content="", tool_calls=[])


def test_refusal():
    r = probe("refusal")
    assert r.content == REFUSAL and r.content.strip() and "42" not in r.content and not r.tool_calls


def test_echo_returns_the_last_user_message():
    messages = [SYSTEM, {"role": "user", "content": "first question"}, {"role": "assistant", "content": "hm"},
                {"role": "user", "content": "second question"}]
    assert probe("echo", messages=messages).content == "second question"
    assert probe("echo", messages=[SYSTEM]).content == ""


def test_echo_of_structured_content_is_json():
    parts = [{"type": "text", "text": "look at this"}]
    assert json.loads(probe("echo", messages=[{"role": "user", "content": parts}]).content) == parts


def test_garbage_is_long():
    r = probe("garbage")
    assert len(r.content.split()) >= 2000
    assert "42" not in r.content.split()


def test_padding_is_the_oracle_plus_filler():
    oracle = "Twenty plus twenty-two. <answer>42</answer>"
    r = probe("padding", oracle=oracle)
    assert r.content.startswith(oracle) and len(r.content) > len(oracle) + 1000
    assert FILLER.strip() in r.content
    assert len(r.content.split()) >= 2000


def test_wrong_answer_replaces_the_answer_with_another_int():
    r = probe("wrong-answer", oracle="20 + 22 = 42, so <answer>42</answer>")
    m = re.fullmatch(r"20 \+ 22 = 42, so <answer>(-?\d+)</answer>", r.content)
    assert m, r.content  # only the final occurrence replaced, the rest of the text untouched
    assert m.group(1) != "42" and m.group(1) in {"17", "99", "-3"}  # same shape, from the pool


def test_wrong_answer_keeps_two_decimals():
    r = probe("wrong-answer", oracle="<answer>12.34</answer>", answer="12.34")
    assert r.content == "<answer>5.60</answer>"  # the only other two-decimal answer in the pool


def test_wrong_answer_mutates_when_the_pool_has_no_same_shape():
    for seed in range(20):
        r = probe("wrong-answer", oracle="<answer>3.125</answer>", answer="3.125", seed=seed)
        got = re.fullmatch(r"<answer>(-?\d+\.\d{3})</answer>", r.content).group(1)
        assert got != "3.125"
        r = probe("wrong-answer", oracle="<answer>8</answer>", answer="8", answers=["8", "1.5"], seed=seed)
        got = re.fullmatch(r"<answer>(-?\d+)</answer>", r.content).group(1)
        assert got != "8"


def test_wrong_answers_helper():
    rng = seeded_rng("x")
    picks = wrong_answers("42", ["42", "17", "99", "12.5", "pear"], 5, rng)
    assert len(picks) == 5 and len(set(picks)) == 5 and "42" not in picks
    assert {"17", "99"} <= set(picks) and all(re.fullmatch(r"-?\d+", p) for p in picks)
    text = wrong_answers("pear", ["pear"], 3, seeded_rng("y"))
    assert len(set(text)) == 3 and "pear" not in text


@pytest.mark.parametrize("oracle, answer", [
    ("The value is <answer>41</answer>", "42"),   # the answer is not in the oracle reply
    ("<answer>42</answer>", None),                # the task has no answer
    ("<answer>42</answer>", ""),
])
def test_wrong_answer_needs_the_answer_in_the_oracle_reply(oracle, answer):
    assert probe("wrong-answer", oracle=oracle, answer=answer) is None
    assert probe("kitchen-sink", oracle=oracle, answer=answer) is None


def test_answer_probes_need_an_oracle():
    for name in ("wrong-answer", "kitchen-sink", "padding"):
        assert probe(name, oracle=None) is None


def test_answer_inside_a_longer_number_is_not_the_answer():
    """'3' appears in '<answer>13</answer>' only as part of another number: nothing to replace."""
    assert probe("wrong-answer", oracle="<answer>13</answer>", answer="3") is None
    r = probe("kitchen-sink", oracle="<answer>13</answer>", answer="3")
    lines = r.content.split("\n")
    assert "<answer>13</answer>" not in lines and not any(line.startswith("<answer>1") for line in lines)
    assert lines.count("3") == 1  # the bare options, the true one once
    # and a decimal's digits are not the integer answer either
    assert probe("wrong-answer", oracle="<answer>3.5</answer>", answer="3") is None
    assert probe("wrong-answer", oracle="<answer>2.3</answer>", answer="3") is None


def test_kitchen_sink_hides_the_true_answer_once_among_51():
    r = probe("kitchen-sink")
    lines = r.content.split("\n")
    assert len(lines) >= 51
    options = [re.fullmatch(r"<answer>(.*)</answer>", line).group(1) for line in lines]
    assert options.count("42") == 1
    assert len(set(options)) == len(options)
    assert all(re.fullmatch(r"-?\d+", o) for o in options)  # every option has the answer's shape
    assert {"17", "99", "-3"} <= set(options)  # the pool's same-shape answers are used


def test_tool_spam_calls_every_tool_for_three_turns_then_stops():
    history = [SYSTEM, {"role": "user", "content": "total?"}]
    seen_args = set()
    for turn in range(3):
        r = probe("tool-spam", tools=TOOLS, messages=history)
        assert [c.name for c in r.tool_calls] == ["price", "coupon"], turn
        assert len({c.id for c in r.tool_calls}) == 2
        for call in r.tool_calls:
            assert isinstance(json.loads(call.arguments), dict)
            seen_args.add(call.arguments)
        history = history + [{"role": "assistant", "content": "", "tool_calls": []},
                             {"role": "tool", "content": "unknown item"}]
    assert len(seen_args) >= 2  # junk arguments vary
    final = probe("tool-spam", tools=TOOLS, messages=history)
    assert final.content == "Done." and not final.tool_calls


def test_tool_spam_accepts_bare_tool_schemas():
    r = probe("tool-spam", tools=[{"name": "lookup"}])
    assert [c.name for c in r.tool_calls] == ["lookup"]


def test_tool_spam_without_tools_does_not_apply():
    assert probe("tool-spam", tools=[]) is None


def test_answer_shaped_probes_follow_an_oracle_that_calls_tools():
    oracle = Reply(content="looking up prices", tool_calls=[ToolCall("price", '{"item": "milk"}', "call_0")])
    for name in ("padding", "wrong-answer", "kitchen-sink"):
        r = probe(name, oracle=oracle, answer="12.34", tools=TOOLS)
        assert r is not None and r.tool_calls == oracle.tool_calls and r.content == oracle.content, name
    # the others still cheat
    assert probe("empty", oracle=oracle, tools=TOOLS).tool_calls == []
    assert probe("garbage", oracle=oracle, tools=TOOLS).tool_calls == []


@pytest.mark.parametrize("name", sorted(EXPLOITS))
def test_probes_are_deterministic_per_key_and_seed(name):
    a = probe(name, tools=TOOLS, key="k", seed=7)
    b = probe(name, tools=TOOLS, key="k", seed=7)
    assert a == b


def test_random_probes_vary_with_key_and_seed():
    base = probe("garbage", key="k", seed=1).content
    assert probe("garbage", key="k", seed=2).content != base
    assert probe("garbage", key="other", seed=1).content != base
    sinks = {probe("kitchen-sink", key=f"k{i}", answers=[str(n) for n in range(100)]).content for i in range(5)}
    assert len(sinks) > 1
