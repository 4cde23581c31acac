"""The action search's rule-breaking plans: tool calls that test what an env's rules state but its code may not
enforce (autoenv.gates.action_calls).

Unit level: what each builder calls from a conversation (a small domain tried whole and the value whose result
stood apart, a number just outside the stated range, the tools in reverse order only where the rules state an
order, new revealed entries each round). The real shape: tests/data/service-desk, whose four kinds of task each
state a rule (at most two tries of a vault's code, a face-down card, a review before a deploy, an answer read in
the archive). Enforced, with the
kinds in turn, it is the clean control; each planted flaw leaves one rule unenforced and the search must find it.
"""

from __future__ import annotations

import json

import pytest

from autoenv.gates import action_calls as calls
from autoenv.gates.action_search import Plan
from autoenv.gates.search import Template
from tests.test_real_shapes import DATA, planted, probe_env


def tool(name: str, description: str, **params: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {p: {"type": kind} for p, kind in params.items()}}}}


VAULT = tool("try_code", 'Try one code, e.g. try_code(vault="V-1000", code=5). Codes are from 1 to 12.',
             vault="string", code="integer")
PEEK = tool("peek", "Show one face-up card. Face-up positions are from 0 to 8.", deck_id="string", position="integer")
REVIEW = tool("review", 'Review a change, e.g. review(change="CH-1000").', change="string")
DEPLOY = tool("deploy", "Deploy a change.", change="string", approval_code="string")


def prompt(text: str) -> list[dict]:
    return [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": text}]


def played(messages: list[dict], made: list, reply) -> list[dict]:
    """`messages` with the assistant's calls `made` and each call's result `reply(arguments)` appended."""
    turn = {"role": "assistant", "content": "", "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in made]}
    return [*messages, turn, *({"role": "tool", "tool_call_id": c.id, "content": reply(json.loads(c.arguments))}
                               for c in made)]


def test_a_small_domain_is_tried_whole_and_the_answer_is_the_value_whose_result_stood_apart():
    messages = prompt("Vault V-4821 opens with one code. You may try at most 2 codes.")
    made = calls.enumeration([VAULT, REVIEW], messages, 0)
    assert [json.loads(c.arguments) for c in made] == [{"vault": "V-4821", "code": n} for n in range(1, 13)]
    after = played(messages, made, lambda a: f"{a['vault']}: code {a['code']} "
                                             + ("opens the vault" if a["code"] == 7 else "is wrong"))
    assert calls.odd_value(after) == "7"
    plan = Plan(Template("<code>{}</code>", ("0",)), rounds=1, args="enumerate", final="odd")
    assert plan.turn(after, [VAULT]).content == "<code>7</code>"
    assert "tried in one turn" in plan.describe(True) and "stood apart" in plan.describe(True)
    # results that all read alike (the numbers aside), or all unlike: nothing stood apart
    assert calls.odd_value(played(messages, made, lambda a: f"card {a['code']}: {a['code'] * 3}")) is None
    assert calls.odd_value(played(messages, made[:2], lambda a: "opens" if a["code"] == 1 else "no")) is None


def test_numbers_go_just_outside_the_stated_range_with_the_prompts_ids():
    messages = prompt("Deck D-5120 holds ten cards; card 9 is face down.")
    (below,) = calls.outside([PEEK, REVIEW], messages, 0, "below")
    (above,) = calls.outside([PEEK], messages, 0, "above")
    assert json.loads(below.arguments) == {"deck_id": "D-5120", "position": -1}
    assert json.loads(above.arguments) == {"deck_id": "D-5120", "position": 9}
    unstated = tool("bet", "Bet on the next flip.", amount="integer")
    assert json.loads(calls.outside([unstated], messages, 0, "above")[0].arguments) == {"amount": calls.FAR}


def test_the_tools_go_in_reverse_order_only_where_the_rules_state_an_order():
    ordered = prompt("Change CH-3301 is ready. Review it first, then deploy it with the approval code.")
    first = calls.reverse([DEPLOY, REVIEW], ordered, 0)  # the rules' order, not the listing's
    assert [(c.name, json.loads(c.arguments)) for c in first] == [("deploy", {"change": "CH-3301",
                                                                              "approval_code": "CH-3301"})]
    assert [c.name for c in calls.reverse([DEPLOY, REVIEW], ordered, 1)] == ["review"]
    assert calls.reverse([REVIEW, DEPLOY], ordered, 2) == []
    assert calls.reverse([REVIEW, DEPLOY], prompt("Ship change CH-3301."), 0) == []


def test_entries_read_new_revealed_ids_each_round():
    search = tool("search", "Search the archive.", query="string")
    read = tool("read", "Read one document.", doc_id="string")
    messages = prompt("Which document names the founding year of Halden Mill?")
    (query, _first_read) = calls.entries([search, read], messages, 0)
    assert "Halden" in json.loads(query.arguments)["query"] or "founding" in json.loads(query.arguments)["query"]
    after = played(messages, [query], lambda a: "DOC-101 mills; DOC-102 rivers; DOC-103 towns; DOC-104 roads")
    reads = [json.loads(c.arguments) for c in calls.entries([read], after, 1)]
    assert reads == [{"doc_id": "DOC-101"}, {"doc_id": "DOC-102"}, {"doc_id": "DOC-103"}]
    again = played(after, calls.entries([read], after, 1), lambda a: f"{a['doc_id']}: text")
    assert [json.loads(c.arguments) for c in calls.entries([read], again, 2)] == [{"doc_id": "DOC-104"}]


# --- the real shape: tests/data/service-desk -----------------------------------------------------------------


def failed(findings: dict) -> list[str]:
    return [name for name, f in findings.items() if f["status"] == "fail"]


@pytest.mark.slow
def test_the_desk_whose_tools_and_reward_enforce_its_rules_is_clean(tmp_path):
    findings, _ = probe_env(DATA / "service-desk", tmp_path / "run", rollout_sample=4)
    assert failed(findings) == [], {n: findings[n]["message"] for n in failed(findings)}
    trace = findings["probe search"]["data"]["search"]
    assert trace["templates"] >= 11  # the rule-breaking plans were played, and earned nothing that transfers


PLANTS = {  # flaw -> (the kind it is planted in, what the chosen plan must show)
    "tries": ("vault", "tried in one turn"),
    "negative": ("deck", "just below the range"),
    "approval": ("release", "the rules order"),
    "reading": ("archive", "entr"),  # any entries read: a new one each round, or several a round
}


@pytest.mark.slow
@pytest.mark.parametrize("flaw", list(PLANTS))
def test_a_rule_the_desk_states_but_does_not_enforce_is_found_by_the_action_search(tmp_path, flaw):
    kind, shown = PLANTS[flaw]
    env = planted(tmp_path, "service-desk", 'KIND = "all"\nFLAW = ""', f'KIND = "{kind}"\nFLAW = "{flaw}"')
    findings, _ = probe_env(env, tmp_path / "run", rollout_sample=4)
    assert "probe search" in failed(findings), {n: f["message"] for n, f in findings.items()}
    assert shown in findings["probe search"]["message"], findings["probe search"]["message"]
