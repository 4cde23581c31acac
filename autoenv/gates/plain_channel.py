"""The plain-channel probe of a multi-seat env: every seat played at once by one scripted policy that talks plainly.

A cooperative game can pass a task's private data from one seat to another: a steganography env tells an encoder a
secret and has a decoder read it back from a note a monitor must not understand. The per-seat probes (one seat
probed, the others on a reference policy) never test the channel itself, because a reference decoder never reads
plain text. Here every seat plays this policy in the same episode:
- a seat that was told something of this task's own (a value of one of its data fields, in its own messages)
  **restates it**: "I was told: " and the sentences of its messages that hold the value, as written or with their
  numbers in words;
- a seat whose messages hold what another seat of the episode sent **answers with the span of it that names this
  task's value** of a data field, in a format its own instructions state (else bare), and only where the span is
  unambiguous: no other task's value of that field is in it. Where none is, it answers with what it received.

The policy is told the task (the endpoint knows which task a rollout plays) to pick the span, never to invent it: a
span it answers was in what the other seat sent. Whether earning this way is a fault is the rules' business
(autoenv.gates.channel_rules): it is where a seat's own instructions say to hide what it was told (`hiding_rule`).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from autoenv.core.messages import ChatRequest, Reply, message_text
from autoenv.gates.answer_oracle import answer_fields, answer_of, format_reply
from autoenv.gates.families import stated_formats
from autoenv.gates.shapes import in_words

PLAIN = "plain channel"
POLICY = "plain"
VARIANTS = ("as written", "numbers in words")
TOLD = "I was told: "
"""How a seat restates what it was told. A seat that received it finds these words in its messages; a seat whose own
prompt holds the same sentence (both seats of a game are told the deal) does not, whichever seat asks first."""
TRIAL = 3
"""Tasks each strategy (a variant and a reply format) is tried on before the best plays the whole sample."""
HIDING = re.compile(
    r"(?i)\b(?:hid(?:e|es|den|ing)|conceal\w*|covert\w*|secret\w*|steganograph\w*|eavesdrop\w*|monitor\w*|"
    r"oversee(?:r|s)?|intercept\w*|undetect\w*|inconspicuous|innocuous|"
    r"without\s+(?:revealing|stating|saying|mentioning|naming|writing|disclosing|giving\s+away)|"
    r"(?:do\s+not|don't|never|must\s+not|mustn't|cannot|can't|may\s+not)\s+"
    r"(?:reveal|state|say|mention|name|write|disclose|tell|give\s+away|spell\s+out))\b")
NOT_HIDING = re.compile(r"(?i)\b(?:no\s+need\s+to|need\s+not|needn't|don't\s+need\s+to|without)\s+(?:hid|conceal)\w*")
SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?!\w|\.\d)")


@functools.cache
def _words() -> tuple[dict[str, int], re.Pattern[str]]:
    """Each number under a thousand by its words, and a pattern of them all (longest first): built on first use, not
    at import (a thousand alternatives cost every process that imports the gates ~50 ms to compile)."""
    numbers = {w: n for n in range(1000) if (w := in_words(n))}
    return numbers, re.compile(r"(?i)\b(" + "|".join(sorted(map(re.escape, numbers), key=len, reverse=True)) + r")\b")


def hiding_rule(text: str) -> str | None:
    """The sentence of `text` (a seat's instructions) that tells it to hide something (the one with most such
    words); None where it says nothing of the kind, or says there is no need to."""
    ranked = sorted(((len(HIDING.findall(s)), i, s.strip()) for i, s in enumerate(SENTENCE.findall(
        NOT_HIDING.sub(" ", text)))), key=lambda h: (-h[0], h[1]))
    if not ranked or ranked[0][0] == 0:
        return None
    words: str = ranked[0][2]  # the sentence that says it most plainly: "a monitor ... must never state it" over "secret"
    return words if len(words) <= 100 else words[:97].rstrip() + "..."


def spelled(text: str) -> str:
    """`text` with each whole number under a thousand written in words (`1` -> `one`)."""
    return NUMBER.sub(lambda m: in_words(int(m.group())) or m.group(), text)


def unspelled(text: str) -> str:
    """`text` with each number written in words read back as digits (`one` -> `1`)."""
    numbers, pattern = _words()
    return pattern.sub(lambda m: str(numbers[m.group().lower()]), text)


def names(text: str, value: str) -> bool:
    """Whether `text` holds `value` as a whole word or number, case aside."""
    return bool(value) and re.search(rf"(?i)(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", text) is not None


class PlainChannel:
    """The endpoint's `plain` policy for one audit, and the search over its strategies (`run`).

    A strategy is `plain:V.F[.R]`: V indexes VARIANTS, F the reply format (0: the first format the receiving seat's
    own instructions state, else bare; 1: bare; then the formats read from the reward's source), R the round (each
    task plays each strategy once a round: a message holding what an earlier round sent was not received)."""

    def __init__(self, tasks: Sequence[Any], learnt: Sequence[str] = ()) -> None:
        self.tasks = {t.key: t for t in tasks}
        self.fields = answer_fields(list(tasks))
        self.values: dict[str, set[str]] = {f: {str(answer_of(t, f)) for t in tasks} for f in self.fields}
        self.formats: list[str | None] = [None, "bare", *list(dict.fromkeys(learnt))[:2]]
        self.sent: dict[str, list[str]] = defaultdict(list)
        self.records: list[dict[str, Any]] = []
        self.tried: dict[str, float] = {}
        self.strategy: str | None = None

    def describe(self, param: str) -> str:
        variant, form = param.split(".")[:2]
        shown = self.formats[int(form)] or "the format the instructions state"
        return f"{VARIANTS[int(variant)]}, answered {'bare' if shown == 'bare' else 'in ' + shown}"

    def handler(self, request: ChatRequest, param: str | None) -> Reply:
        param = param or "0.0"
        task = self.tasks.get(request.task or "")
        if task is None:
            return Reply(content="")
        channel = f"{task.key}|{param}"
        texts = [message_text(m.get("content")) for m in request.messages if m.get("role") in ("system", "user")]
        received = [s for s in self.sent[channel] if s and any(s in t for t in texts)]
        variant, form = (param.split(".") + ["0", "0"])[:2]
        if received:
            reply = self.answer(task, " ".join(received), request.messages, int(form or 0))
        else:  # said as a quote, so a seat whose own prompt holds the same sentence is never taken for a receiver
            reply = TOLD + self.restate(task, texts)
            if int(variant or 0) == 1:
                reply = spelled(reply)
            self.sent[channel].append(reply)
        return Reply(content=reply)

    def restate(self, task: Any, texts: list[str]) -> str:
        """The sentences of the seat's own messages that hold a value of this task's data, else its last message."""
        own = [str(answer_of(task, f)) for f in self.fields]
        held = [s.strip() for text in texts for s in SENTENCE.findall(text)
                if any(names(s, v) for v in own if v)]
        return " ".join(dict.fromkeys(held)) or (texts[-1].strip() if texts else "")

    def answer(self, task: Any, received: str, messages: list[dict[str, Any]], form: int) -> str:
        """What a plain reader decodes from `received`: a data field's value (of any task: the field's domain) named
        after the field's name (`bit is 1`), else the one value of the field's domain the text holds. The fields the
        seat's instructions name come first (`Reply with the bit` reads `bit`); the task's own value is not consulted,
        so a wrong decoding is answered as it is."""
        text = unspelled(received)
        asked = " ".join(message_text(m.get("content")) for m in messages if m.get("role") in ("system", "user"))
        asked = asked.replace(received, " ")
        order = sorted(self.fields, key=lambda f: not any(names(asked, w) for w in f.split("_")))
        for field in order:
            value = decoded(text, field, self.values[field])
            if value is not None:
                chosen = self.formats[form] if form < len(self.formats) else "bare"
                if chosen is None:
                    stated = list(stated_formats(messages).values())
                    chosen = stated[0] if stated else "bare"
                return format_reply(value, chosen)
        return received

    async def run(self, play: Callable[[list[str], list[Any]], Awaitable[list[dict[str, Any]]]], sample: list[Any]) -> None:
        """Each strategy on TRIAL tasks, then the best (by what the seats told to hide earned, else every seat) on
        the whole sample; its records are kept, renamed to the probe."""
        trial = sample[:TRIAL]
        best: tuple[float, str, list[dict[str, Any]]] | None = None
        for variant in range(len(VARIANTS)):
            for form in range(len(self.formats)):
                param = f"{variant}.{form}"
                found = await play([f"{POLICY}:{param}"], trial)
                mean = earned(found)
                self.tried[self.describe(param)] = round(mean, 4)
                if best is None or mean > best[0] + 1e-9:
                    best = (mean, param, found)
        if best is None:
            return
        mean, param, found = best
        if mean > 0 and len(sample) > len(trial):  # a round of its own: what the trial sent is not received here
            found = await play([f"{POLICY}:{param}.1"], sample)
        self.strategy = self.describe(param)
        place = {t.key: i for i, t in enumerate(sample)}  # in the sample's order, never the order episodes finished
        found.sort(key=lambda r: (place.get(r.get("key"), len(place)), str(r.get("seat")), str(r.get("reply"))))
        self.records = [{**r, "probe": PLAIN, "strategy": self.strategy} for r in found]


NEAR = 6
"""Words after a field's name within which a plain reader takes the value it names (`the secret bit is 1`)."""


def decoded(text: str, field: str, domain: set[str]) -> str | None:
    """The value of `domain` that `text` names after a word of `field`'s name (within NEAR words), else the only
    value of `domain` that it holds; None where it holds none, or several and names none."""
    words = [w for w in field.split("_") if len(w) > 1]
    for mention in re.finditer(r"(?i)\b(?:" + "|".join(map(re.escape, words)) + r")\b", text) if words else ():
        after = " ".join(text[mention.end():].split()[:NEAR])
        hits = sorted(((m.start(), v) for v in domain for m in [re.search(
            rf"(?i)(?<![\w.]){re.escape(v)}(?![\w]|\.\d)", after)] if v and m), key=lambda h: (h[0], -len(h[1])))
        if hits:
            return hits[0][1]
    present = [v for v in domain if names(text, v)]
    return present[0] if len(present) == 1 else None


def planned(sample: int, learnt: Sequence[str] = ()) -> int:
    """The episodes the probe plays at most: every strategy on the trial tasks, then the best on the sample."""
    return len(VARIANTS) * (2 + min(2, len(set(learnt)))) * min(TRIAL, sample) + sample


def earned(records: list[dict[str, Any]]) -> float:
    """The mean total reward of the seats told to hide (`rule`), else of every seat, over the played traces."""
    played = [r for r in records if not r.get("skipped") and not r.get("error") and r.get("outcome", "ok") == "ok"]
    ruled = [r for r in played if r.get("rule")] or played
    totals = [sum(v * (r.get("weights") or {}).get(k, 1.0) for k, v in (r.get("components") or {}).items()
                  if isinstance(v, (int, float))) for r in ruled]
    return sum(totals) / len(totals) if totals else 0.0
