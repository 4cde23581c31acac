"""Degenerate fillings of the right answer's own shape: the `shape-fill` probe's replies.

The content-free probes and the reward search build replies from nothing of the task; the near-miss
probe changes a numeric answer the way a careless comparison still accepts. What neither tries is the
answer's *shape* filled wrongly: a list answer given as a superset of itself, as the whole domain the
tasks draw from, as one item repeated to the right length, or as unknown items of the right count; a
number given by its leading digits, a tenth of itself, or a value far above or far below any answer; a
mapping with its keys and no values, or one value for every key. A reward that accepts one of those
checks the form of the answer and not its content (recall without precision, length without membership,
a prefix or a substring for equality, a one-sided bound for equality, keys without their values).

Every filling is one a correct reward refuses on any reading of the task: a set does not care for order
or repeated items, so neither a reordering nor the answer written twice is tried; a superset adds as many
items as the answer has (precision 1/2), so a reward with partial credit (F1) earns at most two thirds
of the reference, which the gate allows (autoenv.gates.rules: SHAPE_FULL of the reference).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

MAX_DOMAIN = 200
"""Items in the `whole domain` filling at most."""
ITEM = re.compile(r"[^\s,;\[\]{}()\"'<>|]+(?: [^\s,;\[\]{}()\"'<>|]+){0,3}")
INTEGER = re.compile(r"-?\d+")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
SEPARATORS = (", ", ",", "; ", ";", "\n", " > ", " | ", " ")
STRATEGIES = {
    "superset": "the answer's items and as many other items of the domain",
    "whole domain": "every item the tasks' answers and the prompt's range hold (up to 200)",
    "repeated item": "the answer's first item, repeated to the answer's length",
    "unknown items": "items of the answer's type that no task holds, as many as the answer has",
    "leading digits": "the number without its last digit (what a prefix or `in` comparison accepts)",
    "a tenth": "the number divided by ten (a scale slip a loose tolerance accepts)",
    "far above": "a number far above every answer (what a one-sided `>=` check or a clipped range accepts)",
    "far below": "a number far below every answer (what a one-sided `<=` check accepts)",
    "keys only": "the answer's keys, each with an empty value (what a check of the keys alone accepts)",
    "one value for every key": "the answer's keys, each holding its first value (what a check of the keys and "
                               "the values' type accepts)",
}
FAR = 10**9
"""The least distance of `far above` and `far below` from zero (a thousand times the answer where that is more)."""


def items_of(answer: str) -> tuple[list[str], str] | None:
    """A list-shaped answer's items and the separator it is written with, or None for a scalar: a JSON or Python
    list, or at least two short items joined by one of SEPARATORS (a space only between numbers)."""
    text = answer.strip()
    if text.startswith("[") and text.endswith("]"):
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                         for v in value):
                return [str(v) for v in value], "json"
        return None
    for sep in SEPARATORS:
        parts = [p.strip() for p in text.split(sep)]
        if len(parts) < 2 or not all(parts) or any(len(p) > 40 for p in parts):
            continue
        if sep == " " and not all(NUMBER.fullmatch(p) for p in parts):
            continue  # words joined by spaces are a phrase, not a list
        if all(ITEM.fullmatch(p) for p in parts):
            return parts, sep
    return None


def render(items: Sequence[str], style: str) -> str:
    """`items` written the way the answer was (`json`: a JSON list, numbers unquoted)."""
    if style == "json":
        return json.dumps([_number(i) if NUMBER.fullmatch(i) else i for i in items])
    return style.join(items)


def _number(text: str) -> int | float:
    return int(text) if INTEGER.fullmatch(text) else float(text)


def domain(answers: Sequence[str], prompt: str) -> list[str]:
    """The items the tasks draw their answers from: every item of every task's answer (in order of first sight),
    and where they are integers, every integer from the least to the greatest of them and of the prompt's numbers
    (a range the prompt states, "between 1 and 60"), all bounded by MAX_DOMAIN."""
    seen: dict[str, None] = {}
    for answer in answers:
        parsed = items_of(answer)
        for item in parsed[0] if parsed else [answer.strip()]:
            if item and len(seen) < 4 * MAX_DOMAIN:
                seen[item] = None
    items = list(seen)
    if items and all(INTEGER.fullmatch(i) for i in items):
        numbers = [int(i) for i in items] + [int(n) for n in INTEGER.findall(prompt) if len(n) < 7]
        low, high = min(numbers), max(numbers)
        if high - low < MAX_DOMAIN:
            return [str(i) for i in range(low, high + 1)]
    return items[:MAX_DOMAIN]


def fillings(answer: str, answers: Sequence[str], prompt: str) -> dict[str, str]:
    """The degenerate fillings of `answer`'s shape, by strategy (STRATEGIES); {} for an answer of no shape the probe
    knows (a word, a sentence)."""
    mapping = mapping_of(answer)
    if mapping is not None:
        return _mapping(*mapping)
    parsed = items_of(answer)
    if parsed is None:
        return _numeric(answer.strip())
    items, style = parsed
    wanted = set(items)
    drawn = domain(answers, prompt)
    pool = [i for i in drawn if i not in wanted]
    out: dict[str, str] = {}
    if pool:
        out["superset"] = render([*items, *pool[:len(items)]], style)
        whole = list(dict.fromkeys([*items, *pool]))[:MAX_DOMAIN]
        if len(whole) > len(items) + 1:
            whole = sorted(whole, key=lambda i: (float(i), i)) if all(NUMBER.fullmatch(i) for i in whole) else whole
            out["whole domain"] = render(whole, style)
    if len(wanted) > 1:
        out["repeated item"] = render([items[0]] * len(items), style)
    known = set(drawn) | wanted
    if all(INTEGER.fullmatch(i) for i in items):
        top = max(int(i) for i in known if INTEGER.fullmatch(i))
        out["unknown items"] = render([str(top + 1000 + k) for k in range(len(items))], style)
    else:
        out["unknown items"] = render([f"{_stem(items[k % len(items)])}-unknown-{k + 1}" for k in range(len(items))],
                                      style)
    return out


def _stem(item: str) -> str:
    return re.sub(r"\W+", "-", item)[:12].strip("-") or "item"


def mapping_of(answer: str) -> tuple[dict[str, Any], str] | None:
    """A mapping answer (a JSON object or a Python dict of two keys or more) and how it is written (`json`, `python`),
    or None."""
    text = answer.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    for parse, style in ((json.loads, "json"), (ast.literal_eval, "python")):
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict) and len(value) >= 2 and all(isinstance(k, str) for k in value):
            return value, style
    return None


def _mapping(value: dict[str, Any], style: str) -> dict[str, str]:
    """A mapping's fillings: its keys with empty values, and its first value under every key (where the values
    differ)."""
    write = json.dumps if style == "json" else repr
    out = {"keys only": write({k: "" if isinstance(v, str) else None for k, v in value.items()})}
    first = next(iter(value.values()))
    if any(v != first for v in value.values()):
        out["one value for every key"] = write(dict.fromkeys(value, first))
    return out


def _numeric(text: str) -> dict[str, str]:
    """A number's fillings: its leading digits (two or more digits), a tenth of it (never zero), and a value far above
    and far below it (FAR, or a thousand times the answer)."""
    if not NUMBER.fullmatch(text):
        return {}
    size = abs(float(text))
    far = max(FAR, int(size) * 1000) if size < 1e300 else 10 ** (len(text) + 3)  # a float past its range is inf
    extremes = {"far above": str(far), "far below": str(-far)}
    if float(text) == 0:
        return extremes
    out = {}
    digits = text.lstrip("-").replace(".", "")
    if len(digits.lstrip("0")) >= 2 and "." not in text:
        out["leading digits"] = text[:-1]
    value = float(text) / 10
    out["a tenth"] = f"{value:g}" if "e" not in f"{value:g}" else repr(value)
    return out | extremes


def located(answer: str, content: str) -> str | None:
    """How `answer` is written in the reply `content`: as itself, or, for a list answer (a data field's list), as its
    items written in one of the usual ways; None when the reply holds it in none of them."""
    if answer and answer in content:
        return answer
    mapping = mapping_of(answer)
    if mapping is not None:
        for written in (json.dumps(mapping[0]), json.dumps(mapping[0], separators=(",", ":")),
                        json.dumps(mapping[0], indent=2)):
            if written in content:
                return written
        return None
    parsed = items_of(answer)
    if parsed is None:
        return None
    items = parsed[0]
    for style in ("json", *SEPARATORS):
        written = render(items, style)
        if style != " " and written in content:
            return written
    bare = "[" + ", ".join(items) + "]"
    return bare if bare in content else None


ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
MAX_FIELDS = 8
"""Data fields the `field-copy` probe writes back at most (in the data's order): two strategies each, on every task."""
SKIPPED_FIELDS = {"idx", "prompt", "system_prompt"}
"""Task data fields the `field-copy` probe never writes back: the index, and the prompt (prompt-copy's)."""


def in_words(n: int) -> str | None:
    """An integer under a thousand in English words (`forty-two`), None beyond."""
    if n < 0:
        inner = in_words(-n)
        return None if inner is None else "minus " + inner
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10 - 2] + ("" if n % 10 == 0 else "-" + ONES[n % 10])
    if n < 1000:
        rest = in_words(n % 100) if n % 100 else None
        return ONES[n // 100] + " hundred" + (" and " + rest if rest else "")
    return None


def answer_forms(rows: Sequence[tuple[str, dict[str, Any]]]) -> set[str]:
    """The data fields that are another form of the answer across the tasks (`rows`: each task's answer and its other
    fields): each value goes with one answer and each answer with one value (`answer_text` beside a letter `answer`,
    a number in words). A reward may fairly accept those, so `field-copy` never writes them back; with every answer
    distinct, a field distinct on every task (an id) is among them too."""
    pairs: dict[str, set[tuple[str, str]]] = {}
    for answer, fields in rows:
        for name, value in fields.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                pairs.setdefault(name, set()).add((answer, str(value)))
    forms = set()
    for name, seen in pairs.items():
        answers, values = [a for a, _ in seen], [v for _, v in seen]
        if len(set(answers)) == len(seen) == len(set(values)):
            forms.add(name)
    return forms


def written_back(fields: dict[str, Any], answer: str) -> dict[str, str]:
    """The `field-copy` probe's replies' answers, by strategy: each task data field other than the answer, the
    prompt and the index, as the reply would state it (`` `difficulty` ``), and a whole number in words as well
    (`` `steps` in words ``); a field whose value is this task's answer is left out on this task."""
    out: dict[str, str] = {}
    wanted = answer.strip().lower()
    for name, value in fields.items():
        if name in SKIPPED_FIELDS or isinstance(value, bool) or not isinstance(value, (str, int, float)):
            continue
        text = str(value).strip()
        if not text or len(text) > 60 or "\n" in text or text.lower() == wanted:
            continue
        if len(out) >= 2 * MAX_FIELDS:
            break
        out[f"`{name}`"] = text
        if INTEGER.fullmatch(text) and (words := in_words(int(text))) and words != wanted:
            out[f"`{name}` in words"] = words
    return out
