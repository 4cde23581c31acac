"""Tests for autoenv.gates.source_reading: formats and constants learnt from reward source text."""

from __future__ import annotations

import re

import pytest

from autoenv.gates.source_reading import (
    MAX_FORMATS,
    MAX_STRINGS,
    SourceReading,
    read_sources,
    regex_example,
    regex_template,
)

TAG_REWARD = '''
"""A refund environment: the reward reads the amount from a refund tag."""
import re

REFUND = re.compile(r"<refund>(.*?)</refund>", re.DOTALL)
APOLOGY = r"\\bsorry\\b"


def refund_reward(completion, answer):
    """Full credit when the refund matches the answer."""
    match = REFUND.search(completion)
    if re.search(APOLOGY, completion, flags=re.IGNORECASE):
        return 0.0
    if match is None:
        return 0.0
    return 1.0 if match.group(1).strip() == answer else 0.0
'''

SPLIT_REWARD = '''
def verdict_reward(reply, answer):
    """The verdict follows the last Verdict: marker."""
    verdict = reply.split("Verdict:")[-1].strip().lower()
    if verdict in ("approve", "reject"):
        return float(verdict == answer)
    if "as an expert" in reply.lower():
        return 0.5
    return 0.0
'''

JSON_REWARD = '''
"""An invoice environment: the reply is a JSON object."""
import json

REQUIRED = ("vendor", "total", "date")


def invoice_reward(reply, answer):
    try:
        data = json.loads(reply)
    except ValueError:
        return 0.0
    if not all(k in data for k in REQUIRED):
        return 0.0
    score = 0.5 if data["amount"] == answer["amount"] else 0.0
    items = data.get("items", [])
    if len(items) >= 3 and score > 0.25:
        score += 0.5
    return round(score, 2)
'''

BROKEN = "def reward(reply:\n    return 1.0 if reply == 'yes' else 0.0\n"


@pytest.mark.parametrize(("pattern", "template"), [
    (r"<refund>(.*?)</refund>", "<refund>{}</refund>"),
    (r"FINAL:\s*(-?\d+)", "FINAL:{}"),
    (r"^ANSWER\s*=\s*(\S+)$", "ANSWER={}"),
    (r"\\boxed\{([^}]*)\}", "\\boxed{{}}"),
    (r"(?P<answer>\d+) points", "{} points"),
    (r"(?:Answer|Final):\s*(\w+)", "Answer:{}"),  # alternation: the first alternative
    (r"(?:Verdict:\s*|Result:\s*)?(?:Answer:\s*(\d+))?", "Answer:{}"),  # the optional part holding the slot is kept
    (r"((a)(b))c", "{}c"),  # nested groups: the outer, first group is the slot
    (r"\((\d+)\)\.", "({})."),  # escaped characters
    (r"[Vv]erdict[:=] ([^\n]+)", "Verdict: {}"),  # character classes: the first member
    (r"\bScore\b: (?=\d)(\d+)", "Score: {}"),  # anchors and a lookahead emit nothing
    (r"(?P<unit>[a-z]+)=(?P<value>\d+)", "a={}"),  # a group named value is the slot
    (r"<verdict>(PASS|FAIL)</verdict>", "<verdict>{}</verdict>"),  # the slot's own example fills it
    (r"(?x) total \s* = \s* (\d+)", "total={}"),  # verbose mode
])
def test_regex_template_of_patterns(pattern: str, template: str) -> None:
    assert regex_template(pattern) == template


def test_regex_template_without_a_group_or_that_does_not_compile_is_none() -> None:
    assert regex_template(r"\bsorry\b") is None
    assert regex_template(r"(?:yes|no)") is None
    assert regex_template(r"(unclosed") is None
    assert regex_template(r"{}(\d)") is None  # a literal {} besides the slot


def test_regex_template_uses_flags() -> None:
    assert regex_template(r"answer: (\d+)") == "answer: {}"
    assert regex_template(r"ANSWER: (\d+)", re.IGNORECASE) == "ANSWER: {}"


def test_regex_debug_flag_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert regex_template(r"<a>(\d+)</a>", re.DEBUG) == "<a>{}</a>"
    assert capsys.readouterr().out == ""


def test_regex_example_is_the_simplest_match() -> None:
    assert regex_example(r"\bsorry\b") == "sorry"
    assert regex_example(r"(?:yes|no)\s+thanks") == "yes thanks"
    assert regex_example(r"[^x]{2}\d") == "aa0"
    assert regex_example(r"(a)?(?(1)b|c)d") == "cd"
    assert regex_example(r"(\w+)-\1") == "a-a"
    assert regex_example(r"[") is None


def test_read_sources_learns_formats_in_order() -> None:
    reading = read_sources([TAG_REWARD, SPLIT_REWARD, JSON_REWARD])
    assert reading.formats == (
        "<refund>{}</refund>",
        "Verdict: {}",
        '{"amount": {}}',
        '{"items": {}}',
        '{"vendor": {}, "total": "", "date": ""}',
    )
    assert all(template.count("{}") == 1 for template in reading.formats)
    assert len(reading.formats) <= MAX_FORMATS


def test_read_sources_strings_put_comparison_targets_first_and_skip_docstrings() -> None:
    reading = read_sources([TAG_REWARD, SPLIT_REWARD, JSON_REWARD])
    targets = ["<refund>", "</refund>", "sorry", "Verdict:", "approve", "reject", "as an expert"]
    assert list(reading.strings[:len(targets)]) == targets
    assert "vendor" in reading.strings
    assert all(not text.startswith("A refund") and "Full credit" not in text for text in reading.strings)
    assert r"<refund>(.*?)</refund>" not in reading.strings  # a pattern is not a reply constant
    assert all(0 < len(text) <= 60 and "\n" not in text for text in reading.strings)
    assert len(reading.strings) <= MAX_STRINGS


def test_read_sources_numbers_and_keys() -> None:
    reading = read_sources([JSON_REWARD])
    assert reading.numbers == (3.0, 0.25)  # round(score, 2) is no comparison
    assert reading.keys == ("vendor", "total", "date", "amount", "items")


def test_read_sources_reads_keys_of_dicts_only() -> None:
    source = '''
import json
import os

def reward(reply):
    data = json.loads(reply)
    url = os.environ.get("GRADER_URL") or os.environ["BACKUP_URL"]
    return float("verdict" in data and "sorry" not in reply)
'''
    reading = read_sources([source])
    assert reading.keys == ("verdict",)
    assert reading.strings[:2] == ("verdict", "sorry")


def test_read_sources_skips_a_module_that_does_not_parse() -> None:
    reading = read_sources([BROKEN, SPLIT_REWARD])
    assert reading == read_sources([SPLIT_REWARD])
    assert reading.formats == ("Verdict: {}",)
    assert read_sources([BROKEN]) == SourceReading(formats=(), strings=(), numbers=(), keys=())


def test_read_sources_tags_delimiters_and_imported_names() -> None:
    source = '''
import re
from re import search as find, I
TOTAL = re.compile(r"total \\s* = \\s* (\\d+)", re.X | re.I)
OPEN, CLOSE = "<verdict>", "</verdict>"
PATTERN = r"Confidence: (0\\.\\d+)"

def reward(reply):
    opened = reply.startswith("<verdict>") and "</verdict>" in reply
    confident = find(PATTERN, reply, I)
    head, _, tail = reply.partition("###")
    words = reply.split(" ")
    percents = re.findall(r"\\d+\\s*%", reply)
    return float(opened and confident and reply.count("!") < 2 and -1 != len(words))
'''
    reading = read_sources([source])
    assert reading.formats == ("total={}", "Confidence: {}", "<verdict>{}</verdict>", "<verdict> {}", "### {}")
    assert reading.numbers == (2.0, -1.0)
    assert reading.strings[:8] == ("total", "<verdict>", "</verdict>", "Confidence: ", "0.", "###", " ", "!")
    assert reading.strings[8] == "0%"  # the simplest match of a pattern without a group, after the targets


def test_read_sources_skips_fstring_parts_long_strings_and_docstrings() -> None:
    source = '''
class Grader:
    """Grades replies."""

    def reward(self, reply, x):
        """Docstring."""
        label = f"Score: {x}"
        note = "a" * 3 + "%s" % "multi\\nline" + """
"""
        return float(reply == label + "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz")
'''
    reading = read_sources([source])
    assert reading.strings == ("a", "%s")


def test_read_sources_bounds_the_work() -> None:
    filler = "#" * 399_990 + "\n"
    assert read_sources([filler, SPLIT_REWARD]).formats == ()
    assert read_sources(["x = 1\n" * 10, SPLIT_REWARD]).formats == ("Verdict: {}",)
