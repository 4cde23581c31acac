"""Tool calls that test a tool env's rules instead of following them: the action search's rule-breaking plans.

A rule an env states but does not enforce is a reward hack waiting for a policy to find it. Each builder here
writes one assistant turn's tool calls from what the conversation shows (the tools' schemas and descriptions,
the ids the prompt names, what earlier results revealed), never from a task's answer:
- `enumeration`: every value of a small argument domain (an enumeration, a boolean, an integer range the
  schema, the tool's description or the prompt states, at most ENUMERATE values) tried in one turn; the
  final reply then answers with the value whose result stood apart from the rest (`odd_value`). An env that
  limits the tries in words but not in code pays it.
- `outside`: every tool with a number argument called with a value just outside the range the rules state
  (below it, or above it; -1 or a million where none is stated). An index the env forgot to bound below
  reads what it hides; an amount it forgot to bound above buys what the rules forbid.
- `reverse`: the tools called one a turn in the reverse of the order the instructions name them in, with the
  ids the prompt names: a step the rules order after another, taken without its prerequisite. Played only where the rules
  state an order (ORDER), so an env whose task is one call is never asked to refuse it.
- `entries`: the tools called with the prompt's ids and words, then with ENTRIES new entries the results
  revealed each round: any entries, read without regard to the task (a reward for reading N entries pays it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from autoenv.core.messages import ToolCall
from autoenv.gates.families import EXAMPLE_ARG, _text

ENUMERATE = 30
"""The largest argument domain tried whole (calls in one turn)."""
ENTRIES = 3
"""New entries read per round by the `entries` plan."""
FAR = 1_000_000
ID = re.compile(r"\b[A-Za-z]{1,8}[-_]?\d{2,}\b")
WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
RANGE = re.compile(r"(?i)\b(?:between|from)\s+(-?\d+)\s+(?:and|to|through)\s+(-?\d+)")
ORDER = re.compile(r"(?i)\b(?:before|after|first|prerequisites?|requires?|required|only once|must have|until)\b")
DIGITS = re.compile(r"\d+(?:\.\d+)?")
KINDS = ("enumerate", "below", "above", "reverse", "entries")


def _spec(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function") or tool


def _params(tool: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return (_spec(tool).get("parameters") or {}).get("properties") or {}


def instructions(messages: list[dict[str, Any]]) -> str:
    return "\n".join(_text(m.get("content")) for m in messages if m.get("role") in ("system", "user"))


def prompt_ids(messages: list[dict[str, Any]]) -> list[str]:
    """The ids the instructions name (`V-1042`, `CH_77`), in order, each once."""
    return list(dict.fromkeys(ID.findall(instructions(messages))))


def _numeric(schema: dict[str, Any]) -> bool:
    return schema.get("type") in ("integer", "number")


def stated_range(tool: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The integer range the tool's number arguments take: the schema's bounds, else a range its description
    states (`from 0 to 8`), else one the instructions state."""
    for schema in _params(tool).values():
        if _numeric(schema) and "minimum" in schema and "maximum" in schema:
            return int(schema["minimum"]), int(schema["maximum"])
    for text in (_spec(tool).get("description") or "", instructions(messages)):
        found = RANGE.findall(text)
        if found:
            low, high = sorted(int(v) for v in found[0])
            return low, high
    return None


def _plain(param: str, schema: dict[str, Any], tool: dict[str, Any], ids: list[str], pick: int) -> Any:
    """A value `param` accepts: an id the prompt names (a new one for each `pick`), else the description's
    example, else a plain value of its type."""
    if schema.get("enum"):
        return schema["enum"][0]
    if _numeric(schema):
        return int(schema.get("minimum", 1))
    if schema.get("type") == "boolean":
        return True
    if ids:
        return ids[pick % len(ids)]
    examples = dict(EXAMPLE_ARG.findall(_spec(tool).get("description") or ""))
    return examples.get(param) or next(iter(examples.values()), "a")


def _call(tool: dict[str, Any], args: dict[str, Any], ident: str) -> ToolCall:
    return ToolCall(name=_spec(tool).get("name") or "", id=ident, arguments=json.dumps(args))


def domain(tool: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[str, list[Any]] | None:
    """The tool's first argument whose every value can be tried (at most ENUMERATE), with those values."""
    for param, schema in _params(tool).items():
        if schema.get("enum") and len(schema["enum"]) <= ENUMERATE:
            return param, list(schema["enum"])
        if schema.get("type") == "boolean":
            return param, [False, True]
        if schema.get("type") == "integer":
            stated = stated_range(tool, messages)
            if stated and stated[1] - stated[0] + 1 <= ENUMERATE:
                return param, list(range(stated[0], stated[1] + 1))
    return None


def enumeration(tools: list[dict[str, Any]], messages: list[dict[str, Any]], played: int) -> list[ToolCall]:
    """Every value of each tool's small domain, the other arguments plain (see the module docstring)."""
    ids, calls = prompt_ids(messages), []
    for t, tool in enumerate(tools):
        found = domain(tool, messages)
        if found is None:
            continue
        param, values = found
        for i, value in enumerate(values):
            args = {p: _plain(p, s, tool, ids, 0) for p, s in _params(tool).items()}
            args[param] = value
            calls.append(_call(tool, args, f"call_{played}_{t}_{i}"))
    return calls[:2 * ENUMERATE]


def outside(tools: list[dict[str, Any]], messages: list[dict[str, Any]], played: int, side: str) -> list[ToolCall]:
    """Each tool with a number argument, that argument just `side` ("below"/"above") the stated range."""
    ids, calls = prompt_ids(messages), []
    for t, tool in enumerate(tools):
        params = _params(tool)
        if not any(_numeric(s) for s in params.values()):
            continue
        stated = stated_range(tool, messages)
        value = (stated[0] - 1 if stated else -1) if side == "below" else (stated[1] + 1 if stated else FAR)
        args = {p: value if _numeric(s) else _plain(p, s, tool, ids, 0) for p, s in params.items()}
        calls.append(_call(tool, args, f"call_{played}_{t}"))
    return calls


def states_an_order(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> bool:
    return bool(ORDER.search(instructions(messages) + "\n" + "\n".join(_spec(t).get("description") or ""
                                                                        for t in tools)))


def stated_order(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools in the order the instructions name them (by the last word of each tool's name: `release_deploy`
    is named by "deploy"), the ones they never name first, in their listed order: a listing's order (often
    alphabetical) says nothing of a workflow's."""
    text = instructions(messages).lower()

    def named_at(tool: dict[str, Any]) -> int:
        word = re.split(r"[_\W]+", (_spec(tool).get("name") or "").lower().strip("_"))[-1]
        found = re.search(rf"\b{re.escape(word)}", text) if len(word) >= 3 else None
        return found.start() if found else -1

    return sorted(tools, key=named_at)


def reverse(tools: list[dict[str, Any]], messages: list[dict[str, Any]], played: int) -> list[ToolCall]:
    """The `played`-th tool from the end of the stated order, with the prompt's ids; none where the rules state no
    order."""
    if played >= len(tools) or not states_an_order(tools, messages):
        return []
    tool, ids = stated_order(tools, messages)[len(tools) - 1 - played], prompt_ids(messages)
    return [_call(tool, {p: _plain(p, s, tool, ids, i) for i, (p, s) in enumerate(_params(tool).items())},
                  f"call_{played}_0")]


def passed_strings(messages: list[dict[str, Any]]) -> set[str]:
    """Every string argument an earlier call passed."""
    out: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or []:
            try:
                args = json.loads((call.get("function") or {}).get("arguments") or "{}")
            except ValueError:
                continue
            out |= {v for v in args.values() if isinstance(v, str)} if isinstance(args, dict) else set()
    return out


def entries(tools: list[dict[str, Any]], messages: list[dict[str, Any]], played: int) -> list[ToolCall]:
    """Round 0: each tool with a string argument called with the prompt's ids or words; later rounds: ENTRIES
    calls of each such tool, each with an id the results revealed that no call passed yet."""
    texts = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
    passed = passed_strings(messages)
    revealed = [v for v in dict.fromkeys(ID.findall("\n".join(texts))) if v not in passed]
    calls = []
    for t, tool in enumerate(tools):
        strings = [p for p, s in _params(tool).items() if s.get("type", "string") == "string" and not s.get("enum")]
        if not strings:
            continue
        if played == 0:
            words = prompt_ids(messages) or sorted(WORD.findall(instructions(messages)), key=len)[-3:]
            args = {p: _plain(p, s, tool, [], 0) for p, s in _params(tool).items()}
            args[strings[0]] = " ".join(words) if words else "a"
            calls.append(_call(tool, args, f"call_{played}_{t}"))
            continue
        for i, value in enumerate(revealed[:ENTRIES]):
            args = {p: _plain(p, s, tool, [], 0) for p, s in _params(tool).items()}
            args[strings[0]] = value
            calls.append(_call(tool, args, f"call_{played}_{t}_{i}"))
    return calls


def calls_for(kind: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]], played: int) -> list[ToolCall]:
    """The rule-breaking plan `kind`'s calls on its `played`-th turn (empty: it is done calling)."""
    if kind == "enumerate":
        return enumeration(tools, messages, played) if played == 0 else []
    if kind in ("below", "above"):
        return outside(tools, messages, played, kind) if played == 0 else []
    if kind == "reverse":
        return reverse(tools, messages, played)
    return entries(tools, messages, played)


def odd_value(messages: list[dict[str, Any]]) -> str | None:
    """The argument value of the one call (among three or more) whose result, its numbers aside, reads unlike all
    the others', where the others share a reading: the value an enumeration found. None when no result stands apart."""
    args: dict[str, dict[str, Any]] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            try:
                parsed = json.loads((call.get("function") or {}).get("arguments") or "{}")
            except ValueError:
                parsed = {}
            args[str(call.get("id"))] = parsed if isinstance(parsed, dict) else {}
    results = [(args.get(str(m.get("tool_call_id")), {}), DIGITS.sub("#", _text(m.get("content"))))
               for m in messages if m.get("role") == "tool"]
    readings = Counter(reading for _, reading in results)
    odd = [called for called, reading in results if readings[reading] == 1]
    if len(results) < 3 or len(odd) != 1 or max(readings.values()) < 2:
        return None
    varied = [p for p in odd[0] if len({json.dumps(a.get(p)) for a, _ in results}) > 1]
    return str(odd[0][varied[0]]) if varied else None
