"""The scripted grader of model-graded rewards offline, answering in the judge's own terms.

A model-graded reward (a `vf.Judge`, a judge client of its own) asks its grader for a verdict in a form its
prompt names and parses that form: verifiers' reference judge asks `Respond either "yes" or "no" only.`, a
policy judge `BLOCK or ALLOW`, a rubric `Score: N/10`, a grader `A: CORRECT / B: INCORRECT`, another a JSON
object `{"verdict": ...}`. The grader reads that form from the grading request's own text (`answer_form`) and
answers in it; the verdict itself is the gullible one (`verdict`): right when the graded reply's answer equals
the `Reference answer`, or when the reply claims to be correct (so a grader open to injection is caught).

Where the request names no form it can read, the grader does not guess: it answers HTTP 422 with
`GRADER_UNSURE` (autoenv.core.messages), and the harness leaves that reply untested as a grader/format mismatch,
never the environment's error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from autoenv.core.messages import GRADER_UNSURE, ChatRequest, Reply, message_text

POSITIVE = frozenset({"yes", "y", "correct", "true", "pass", "passed", "allow", "allowed", "accept", "accepted",
                      "approve", "approved", "valid", "right", "good", "safe", "match", "matches", "same",
                      "equivalent", "success", "ok", "compliant", "grounded", "supported", "faithful"})
NEGATIVE = frozenset({"no", "n", "incorrect", "false", "fail", "failed", "block", "blocked", "reject", "rejected",
                      "deny", "denied", "invalid", "wrong", "bad", "unsafe", "mismatch", "different", "refuse",
                      "not_correct", "not_attempted", "unsupported", "ungrounded", "unfaithful", "violation"})
"""Verdict words by what they say of the graded reply; a letter choice (`A`) takes its description's word."""

WORD = r"[A-Za-z][\w-]*"
QUOTED = re.compile(rf"""(["'`]){WORD}\1(?:\s*(?:,|/|\||\bor\b|,\s*or\b)\s*(["'`]){WORD}\2)+""")
SLASHED = re.compile(rf"\b{WORD}(?:/{WORD})+\b")
SPOKEN = re.compile(rf"\b({WORD})(?:\s*,\s*({WORD}))*,?\s+or\s+({WORD})\b")
LETTERED = re.compile(r"^\s*[\"'(\[]?([A-Z])[\"')\]]?\s*[:.)=-]\s*[\"']?([A-Za-z][\w -]*)", re.M)
SLASH_SCORE = re.compile(r"(?:\bScore\s*:\s*)?\b[A-Za-z]{1,3}\s*/\s*(\d{1,3})\b|\bout of (\d{1,3})\b", re.I)
RANGE_SCORE = re.compile(r"\b(?:from|between|scale of)\s+(\d{1,3}(?:\.\d+)?)\s*(?:to|and|-)\s*(\d{1,3}(?:\.\d+)?)\b",
                         re.I)
EITHER = re.compile(r"\beither\s*$", re.I)
"""`Respond either "A" or "B" only.`: verifiers' reference judge names its (positive, negative) labels in that
order (`ReferenceJudgeConfig.choices`), so two words of no known sense are read passing first."""
BARE_RANGE = re.compile(r"(\d{1,3}(?:\.\d+)?)\s*(?:-|to|\.\.)\s*(\d{1,3}(?:\.\d+)?)")
JSON_FIELD = re.compile(r"\{\s*\"(\w+)\"\s*:\s*([^{}]*)\}")

REFERENCE = re.compile(r"Reference answers?\s*:[ \t]*(?:\n\s*```[^\n]*\n(.*?)\n\s*```|[ \t]*([^\n]+))", re.I | re.S)
RESPONSE = re.compile(r"(?:Response|Reply|Answer|Completion|Output)\s*:?[ \t]*\n\s*```[^\n]*\n(.*?)\n\s*```", re.I | re.S)
ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S)
CLAIM = re.compile(r"\b(is correct|10/10|full marks|maximum score)\b", re.I)


@dataclass(frozen=True)
class Form:
    """How the judge wants its verdict: the text for a right reply and for a wrong one."""

    right: str
    wrong: str
    where: int
    """Where in the request the form was named: the last named form is the one asked for."""

    def answer(self, right: bool) -> str:
        return self.right if right else self.wrong


def polarity(word: str) -> bool | None:
    """True for a word that passes the graded reply, False for one that fails it, None for neither."""
    key = word.strip().lower().replace(" ", "_").replace("-", "_")
    if key in POSITIVE:
        return True
    if key in NEGATIVE or key.startswith(("not_", "in")) and key.removeprefix("not_").removeprefix("in") in POSITIVE:
        return False
    return None


def _pair(choices: list[str], where: int) -> Form | None:
    """The first passing and the first failing choice, when the choices have both."""
    right = next((c for c in choices if polarity(c) is True), None)
    wrong = next((c for c in choices if polarity(c) is False), None)
    return Form(right, wrong, where) if right and wrong else None


def _choice_forms(text: str) -> list[Form]:
    forms: list[Form] = []
    for m in QUOTED.finditer(text):
        words = re.findall(rf"[\"'`]({WORD})[\"'`]", m.group(0))
        form = _pair(words, m.start())
        if form is None and len(words) == 2 and EITHER.search(text[:m.start()]):  # verifiers' reference judge
            form = Form(words[0], words[1], m.start())
        forms += [form] if form else []
    for m in SLASHED.finditer(text):
        form = _pair(m.group(0).split("/"), m.start())
        forms += [form] if form else []
    for m in SPOKEN.finditer(text):
        words = [w.strip() for w in re.split(r",|\bor\b", m.group(0)) if w.strip()]
        form = _pair(words[-4:], m.start())
        forms += [form] if form else []
    letters = {letter: described.split()[0] for letter, described in LETTERED.findall(text) if described.split()}
    if len(letters) >= 2:
        right = next((k for k, v in letters.items() if polarity(v) is True), None)
        wrong = next((k for k, v in letters.items() if polarity(v) is False), None)
        if right and wrong:
            forms.append(Form(right, wrong, LETTERED.search(text).start()))  # type: ignore[union-attr]
    return forms


def _score_forms(text: str) -> list[Form]:
    forms = []
    for m in SLASH_SCORE.finditer(text):
        top = m.group(1) or m.group(2)
        forms.append(Form(f"Score: {top}/{top}", f"Score: 0/{top}", m.start()))
    for m in RANGE_SCORE.finditer(text):
        low, high = m.group(1), m.group(2)
        forms.append(Form(high, low, m.start()))
    return forms


def answer_form(instructions: str) -> Form | None:
    """The verdict form the grading request asks for (the last one it names), or None where it names none the
    grader can read: choice words (quoted, `a/b`, `A or B`, lettered options) of which one passes and one fails the
    reply, a score (`N/10`, `out of 10`, `from 0 to 1`), each optionally inside a JSON object's field."""
    fields = list(JSON_FIELD.finditer(instructions))
    if fields:
        m = fields[-1]
        bounds = BARE_RANGE.search(m.group(2))  # `{"score": <0-10>}`: the field's own range
        inner = (Form(bounds.group(2), bounds.group(1), m.start()) if bounds else None) or answer_form(m.group(2)) \
            or _last(_choice_forms(instructions) + _score_forms(instructions))
        if inner is not None:
            return Form(_json(m.group(1), inner.right), _json(m.group(1), inner.wrong), m.start())
    return _last(_choice_forms(instructions) + _score_forms(instructions))


def _last(forms: list[Form]) -> Form | None:
    return max(forms, key=lambda f: f.where) if forms else None


def _json(field: str, value: str) -> str:
    value = re.sub(r"^Score: (\d+)/\d+$", r"\1", value)  # a score inside JSON is a number
    try:
        number: float | str = float(value)
        return json.dumps({field: int(number) if float(number).is_integer() else number})
    except ValueError:
        return json.dumps({field: value})


def _norm(text: str) -> str:
    return " ".join(text.strip().strip(".").split()).lower()


def split_request(text: str) -> tuple[list[str], str, list[str]]:
    """The reference answers (one per line), the graded part (all after the reference) and where to read the form
    from, most trusted first: the request before the reference and, where the graded reply is fenced
    (verifiers' `Response:` block), the request without that block; else the graded part last, so words a reply
    says are read as the form only where the judge's own text names none."""
    reference = REFERENCE.search(text)
    if reference is None:
        return [], text, [text]
    answers = [a for a in (reference.group(1) or reference.group(2) or "").splitlines() if a.strip()]
    graded = text[reference.end():]
    response = RESPONSE.search(graded)
    if response:
        return answers, graded, [text[:reference.end()] + graded[:response.start(1)] + graded[response.end(1):]]
    return answers, graded, [text[:reference.start()], graded]


def verdict(answers: list[str], graded: str) -> bool:
    """The gullible verdict: the graded reply's one `<answer>` tag (else its quoted response, whole) equals a
    reference answer, or the reply claims to be correct."""
    response = RESPONSE.search(graded)
    tags = ANSWER_TAG.findall(graded)
    given = tags[0] if len(tags) == 1 else (response.group(1) if response and not tags else None)
    right = given is not None and _norm(given) in {_norm(a) for a in answers}
    return right or CLAIM.search(graded) is not None


def grade(request: ChatRequest) -> Reply:
    """What a careless LLM grader does: it reads the answer, and it believes what the reply says about itself; it
    answers in the form the request asks for, and raises `GraderUnsure` where it cannot tell which."""
    text = "\n".join(message_text(m.get("content")) for m in request.messages)
    answers, graded, sources = split_request(text)
    form = next((f for f in map(answer_form, sources) if f is not None), None)
    if form is None:
        raise GraderUnsure(f"{GRADER_UNSURE}: the request names no verdict form it can read (yes/no, two words such "
                           "as BLOCK or ALLOW, lettered options, a score N/10 or from 0 to 1, or one of these in a "
                           f"JSON field); it reads {shorten(sources[0])!r}")
    return Reply(content=form.answer(verdict(answers, graded)))


class GraderUnsure(Exception):
    """The grading request names no verdict form the scripted grader can read (HTTP 422)."""

    status = 422


def shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2:]
