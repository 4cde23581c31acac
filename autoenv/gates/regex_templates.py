"""Regex templates: the simplest text a regular expression matches, with its answer group as the slot `{}`.

Used by autoenv.gates.source_reading on the patterns of a reward's source: `<refund>(.*?)</refund>` gives
`<refund>{}</refund>`, `FINAL:\\s*(-?\\d+)` gives `FINAL:{}`. Only the regex parser reads the pattern (the
pattern is compiled, never run on anything but the candidate template it produced); every failure is None,
never an exception. No verifiers import.
"""

from __future__ import annotations

import importlib
import re
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

MAX_REPEAT = 100
ANSWER_GROUPS = ("answer", "value", "result")
SLOT_FILLS = ("42", "abc")
REPRESENTATIVES = "a0 x-_."
"""Characters tried, in order, as the example of a character class."""
SAFE_CHARS = "xa0 -_."
"""Characters tried, in order, as a character outside a negated class."""
CATEGORY_ESCAPES = {"DIGIT": r"\d", "NOT_DIGIT": r"\D", "SPACE": r"\s", "NOT_SPACE": r"\S", "WORD": r"\w",
                    "NOT_WORD": r"\W"}


def _load_parser() -> ModuleType:
    """The regex parser: `re._parser` from Python 3.11, the deprecated `sre_parse` before."""
    try:
        return importlib.import_module("re._parser")
    except ImportError:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module("sre_parse")


_PARSER = _load_parser()


@dataclass
class _Walk:
    """The state of one walk over a parsed pattern: the answer group and the text each group emitted."""

    slot: int | None
    groups: dict[int, str] = field(default_factory=dict)
    slot_example: str = ""


def parse_pattern(pattern: str, flags: int) -> Any:
    """The parsed pattern, or None when it does not compile."""
    flags &= ~re.DEBUG  # the debug flag makes the regex engine print the pattern
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            re.compile(pattern, flags)
            return _PARSER.parse(pattern, flags)
    except (re.error, RecursionError, OverflowError, TypeError, ValueError):
        return None


def _matches(pattern: str, text: str, flags: int) -> bool:
    """Whether the pattern finds a match in the text."""
    try:
        return re.search(pattern, text, flags & ~re.DEBUG) is not None
    except (re.error, RecursionError, OverflowError, TypeError, ValueError):
        return False


def _children(op: str, av: Any) -> list[Any]:
    """The sub-patterns an opcode holds, to search them for groups and literal runs."""
    if op == "BRANCH":
        return list(av[1])
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [av[2]]
    if op == "SUBPATTERN":
        return [av[3]]
    if op in ("ASSERT", "ASSERT_NOT"):
        return [av[1]]
    if op == "GROUPREF_EXISTS":
        return [branch for branch in av[1:] if branch is not None]
    return [av] if op == "ATOMIC_GROUP" else []


def _holds_group(items: Any, gid: int | None) -> bool:
    """Whether a (sub)pattern holds the capturing group `gid`."""
    for op, av in items:
        if str(op) == "SUBPATTERN" and av[0] == gid:
            return True
        if any(_holds_group(child, gid) for child in _children(str(op), av)):
            return True
    return False


def _in_class(char: str, items: Any) -> bool:
    """Whether a character belongs to the (non-negated) items of a character class."""
    for op, av in items:
        name = str(op)
        if name == "LITERAL" and char == chr(av):
            return True
        if name == "RANGE" and av[0] <= ord(char) <= av[1]:
            return True
        if name == "CATEGORY" and _matches(_category_escape(str(av)) or "(?!)", char, 0):
            return True
    return False


def _category_escape(category: str) -> str | None:
    """The escape (\\d, \\S, ...) of a parser category such as CATEGORY_DIGIT."""
    name = category.removeprefix("CATEGORY_").removeprefix("UNI_").removeprefix("LOC_")
    return CATEGORY_ESCAPES.get(name)


def _class_char(items: Any) -> str | None:
    """A representative character of a class: its first member, or a safe character outside a negated class."""
    if items and str(items[0][0]) == "NEGATE":
        return next((char for char in SAFE_CHARS if not _in_class(char, items[1:])), None)
    if not items:
        return None
    op, av = str(items[0][0]), items[0][1]
    if op == "LITERAL":
        return chr(av)
    if op == "RANGE":
        return chr(av[0])
    return next((char for char in REPRESENTATIVES if _in_class(char, items[:1])), None)


def _emit(items: Any, walk: _Walk) -> str | None:
    """The simplest text a (sub)pattern matches, the answer group as "{}"; None where an opcode is not understood."""
    parts = []
    for op, av in items:
        text = _emit_one(str(op), av, walk)
        if text is None:
            return None
        parts.append(text)
    return "".join(parts)


def _emit_one(op: str, av: Any, walk: _Walk) -> str | None:
    """The simplest text one opcode matches."""
    if op == "LITERAL":
        return chr(av)
    if op == "ANY":
        return SAFE_CHARS[0]
    if op == "NOT_LITERAL":
        return next(char for char in SAFE_CHARS if char != chr(av))
    if op == "IN":
        return _class_char(av)
    if op in ("AT", "ASSERT", "ASSERT_NOT"):
        return ""
    if op == "BRANCH":
        # The first alternative, unless a later one holds the answer's slot.
        chosen = next((branch for branch in av[1] if _holds_group(branch, walk.slot)), av[1][0])
        return _emit(chosen, walk)
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        # An optional part that holds the slot is played once, so the slot stays in the reply.
        count = max(av[0], 1) if _holds_group(av[2], walk.slot) else av[0]
        if count == 0 or count > MAX_REPEAT:
            return "" if count == 0 else None
        body = _emit(av[2], walk)
        return None if body is None else body * count
    if op == "SUBPATTERN":
        return _emit_group(av[0], av[3], walk)
    if op == "ATOMIC_GROUP":
        return _emit(av, walk)
    if op == "GROUPREF":
        return walk.groups.get(av)
    if op == "GROUPREF_EXISTS":
        branch = av[1] if av[0] in walk.groups else av[2]
        return "" if branch is None else _emit(branch, walk)
    return None


def _emit_group(gid: int | None, body: Any, walk: _Walk) -> str | None:
    """A group's text: "{}" for the answer's slot, else its body's; remembered for back-references."""
    if gid is not None and gid == walk.slot:
        walk.slot_example = _emit(body, walk) or ""
        text: str | None = "{}"
    else:
        text = _emit(body, walk)
    if gid is not None and text is not None:
        walk.groups[gid] = text
    return text


def _answer_group(parsed: Any) -> int | None:
    """The answer's group: a group named answer, value or result, else the first capturing group."""
    named: dict[str, int] = parsed.state.groupdict
    for name in ANSWER_GROUPS:
        if name in named:
            return named[name]
    return 1 if parsed.state.groups > 1 else None


def regex_template(pattern: str, flags: int = 0) -> str | None:
    """The simplest reply the pattern matches with its answer group as "{}" (`<a>(.*?)</a>` gives `<a>{}</a>`);
    None without a capturing group, for a pattern that does not compile, or a template that fails to match."""
    parsed = parse_pattern(pattern, flags)
    slot = None if parsed is None else _answer_group(parsed)
    if slot is None:
        return None
    walk = _Walk(slot)
    try:
        template = _emit(parsed, walk)
    except RecursionError:
        return None
    if template is None or template.count("{}") != 1:
        return None
    fills = SLOT_FILLS + ((walk.slot_example,) if walk.slot_example else ())
    if any(_matches(pattern, template.replace("{}", fill), flags) for fill in fills):
        return template
    return None


def literal_runs(items: Any) -> list[str]:
    """The runs of two or more literal characters in a (sub)pattern, each alternative's too (`yes|no`)."""
    runs: list[str] = [""]
    for op, av in items:
        if str(op) == "LITERAL":
            runs[-1] += chr(av)
            continue
        for child in _children(str(op), av):
            runs += literal_runs(child)
        runs.append("")  # the run in progress ends at any other opcode
    return [run for run in runs if len(run) >= 2]


def regex_example(pattern: str, flags: int = 0) -> str | None:
    """The simplest text the pattern matches (`yes|no` gives `yes`), or None."""
    parsed = parse_pattern(pattern, flags)
    if parsed is None:
        return None
    try:
        example = _emit(parsed, _Walk(None))
    except RecursionError:
        return None
    return example if example is not None and _matches(pattern, example, flags) else None
