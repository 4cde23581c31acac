"""autoenv/policies.py: Reply.coerce and advertised_names."""

from __future__ import annotations

import json

import pytest

from autoenv.core.messages import ChatRequest, Reply, ToolCall
from autoenv.endpoint.policies import Policies, PolicyError, advertised_names
from autoenv.gates.probes import EXPLOITS

# --- Reply.coerce ---------------------------------------------------------------------


def test_coerce_string():
    r = Reply.coerce("the answer is 4")
    assert r == Reply(content="the answer is 4", tool_calls=[])


def test_coerce_none_is_an_empty_message():
    r = Reply.coerce(None)
    assert r.content == "" and r.tool_calls == []


def test_coerce_reply_is_returned_as_is():
    original = Reply(content="x", tool_calls=[ToolCall("f", "{}", "id1")])
    assert Reply.coerce(original) is original


def test_coerce_dict_content_only():
    assert Reply.coerce({"content": "hi"}) == Reply(content="hi")
    assert Reply.coerce({"content": None}).content == ""
    assert Reply.coerce({}).content == ""


def test_coerce_bare_tool_call_with_dict_arguments():
    r = Reply.coerce({"content": "looking it up", "tool_calls": [{"name": "price", "arguments": {"item": "x", "n": 2}}]})
    assert r.content == "looking it up"
    assert len(r.tool_calls) == 1
    call = r.tool_calls[0]
    assert call.name == "price"
    assert isinstance(call.arguments, str)
    assert json.loads(call.arguments) == {"item": "x", "n": 2}
    assert call.id == "call_0"


def test_coerce_openai_shaped_tool_calls():
    r = Reply.coerce(
        {
            "tool_calls": [
                {"id": "abc", "type": "function", "function": {"name": "price", "arguments": '{"item": "x"}'}},
                {"type": "function", "function": {"name": "stock", "arguments": {"item": "y"}}},
            ]
        }
    )
    assert r.content == ""
    assert [c.name for c in r.tool_calls] == ["price", "stock"]
    assert r.tool_calls[0].arguments == '{"item": "x"}'  # a string is kept verbatim
    assert json.loads(r.tool_calls[1].arguments) == {"item": "y"}
    assert r.tool_calls[0].id == "abc"
    assert r.tool_calls[1].id == "call_1"  # position-based id when none is given


def test_coerce_missing_arguments_become_an_empty_object():
    r = Reply.coerce({"tool_calls": [{"name": "ping"}]})
    assert json.loads(r.tool_calls[0].arguments) == {}


def test_coerce_non_string_name_and_content_are_stringified():
    r = Reply.coerce({"content": 42, "tool_calls": [{"name": 7, "arguments": {}}]})
    assert r.content == "42"
    assert r.tool_calls[0].name == "7"


def test_coerce_tool_calls_none():
    assert Reply.coerce({"content": "a", "tool_calls": None}).tool_calls == []


@pytest.mark.parametrize("bad", [42, 1.5, ["a"], ("a",), b"bytes", object()])
def test_coerce_rejects_other_types(bad):
    with pytest.raises(TypeError, match="oracle hook must return") as info:
        Reply.coerce(bad)
    assert type(bad).__name__ in str(info.value)


# --- advertised_names -----------------------------------------------------------------


def tools(*names: str) -> list[dict]:
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]


def reply_calling(*names: str) -> Reply:
    return Reply(tool_calls=[ToolCall(name=n, arguments="{}") for n in names])


@pytest.mark.parametrize("advertised", ["catalog_price", "catalog-price", "catalog.price", "catalog__price"])
def test_bare_name_maps_to_unique_suffix_after_separator(advertised):
    r = advertised_names(reply_calling("price"), tools("catalog_stock", advertised))
    assert r.tool_calls[0].name == advertised


def test_exact_name_is_untouched_even_when_a_prefixed_one_exists():
    r = advertised_names(reply_calling("price"), tools("catalog_price", "price"))
    assert r.tool_calls[0].name == "price"


def test_ambiguous_suffix_is_left_alone():
    r = advertised_names(reply_calling("price"), tools("catalog_price", "shop_price"))
    assert r.tool_calls[0].name == "price"


def test_no_false_match_without_separator():
    r = advertised_names(reply_calling("price"), tools("xprice", "unitprice"))
    assert r.tool_calls[0].name == "price"


def test_false_match_does_not_make_a_real_match_ambiguous():
    r = advertised_names(reply_calling("price"), tools("xprice", "catalog_price"))
    assert r.tool_calls[0].name == "catalog_price"


def test_tools_in_flat_shape_are_understood():
    r = advertised_names(reply_calling("price"), [{"name": "catalog_price"}])
    assert r.tool_calls[0].name == "catalog_price"


def test_each_call_is_mapped_independently():
    r = advertised_names(reply_calling("price", "stock", "other"), tools("catalog_price", "catalog_stock"))
    assert [c.name for c in r.tool_calls] == ["catalog_price", "catalog_stock", "other"]


def test_no_tools_advertised_leaves_names():
    r = advertised_names(reply_calling("price"), [])
    assert r.tool_calls[0].name == "price"


# --- Policies registry (no oracle needed) ---------------------------------------------


def request(model: str, session: str = "s") -> ChatRequest:
    return ChatRequest(model=model, messages=[{"role": "user", "content": "q"}], tools=[], session=session)


def test_names_lists_the_policies():
    assert set(Policies().names()) == {"oracle", "noisy-oracle", "gullible-grader", "choice"} | set(EXPLOITS)


def test_empty_policy_replies_empty():
    assert Policies().reply(request("empty")) == Reply()


def test_unknown_policy_is_404_listing_served():
    with pytest.raises(PolicyError) as info:
        Policies().reply(request("gpt-5"))
    assert info.value.status == 404
    for name in ("oracle", "noisy-oracle", "empty"):
        assert name in str(info.value)


@pytest.mark.parametrize("param", ["abc", "1.5", "-0.1", "nan"])
def test_noisy_oracle_rejects_bad_probability(param):
    with pytest.raises(PolicyError) as info:
        Policies().reply(request(f"noisy-oracle:{param}"))
    assert info.value.status == 400
