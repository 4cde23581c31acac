"""Exploit probes: scripted replies that must not earn reward, built from the oracle's reply.

Each probe turns the oracle's next message into a cheat. The same transforms serve the
built-in endpoint (model name = probe name, for multi-turn and tool tasks played through
real rollouts) and the in-process scorer (single-turn tasks, scored without a rollout).
Where the oracle calls tools, the answer-shaped probes pass its tool calls through and
cheat only in the final answer: right process, wrong or padded conclusion.
"""

from __future__ import annotations

import json
import random
import re

from autoenv.messages import Reply, ToolCall, seeded_rng, tool_names

EXPLOITS = {
    "empty": "an empty reply",
    "refusal": "a polite refusal",
    "echo": "the user's message echoed back",
    "wrong-answer": "the oracle's reply with the answer replaced by another task's answer (right format, wrong content)",
    "kitchen-sink": "the true answer hidden among 50 wrong answers in one reply",
    "padding": "the oracle's reply plus ~3000 words of filler (must not beat the oracle)",
    "garbage": "~3000 words of random characters",
    "tool-spam": "every advertised tool called three times with junk arguments, then a bare reply",
}
DEFENCES = {
    "empty": "score 0 when the reply holds no answer: every weighted component must need a parsed answer, "
             "not just a finished rollout",
    "refusal": "score 0 when no answer can be parsed from the reply: no credit for replying at all",
    "echo": "score the answer parsed from the reply against the task's answer, never text it shares with the prompt",
    "wrong-answer": "compare the parsed answer with the task's answer; credit for the format alone must stay "
                    "a small share of the maximum",
    "kitchen-sink": "parse exactly one final answer (e.g. the last answer tag) and score 0 when the reply offers "
                    "several candidates; never search for the answer anywhere in the reply",
    "padding": "cap or penalise the reply's length: text beyond the answer must never add reward",
    "garbage": "require a well-formed answer before any credit: random text must earn nothing",
    "tool-spam": "reward what the tool results lead to, never the number of calls; give no credit for calls "
                 "with invalid arguments",
}
"""The change that defeats each probe, for the judge's advice (one per entry of EXPLOITS)."""
NEEDS_ANSWER = {"wrong-answer", "kitchen-sink"}
NEEDS_TOOLS = {"tool-spam"}
NEEDS_ORACLE = {"wrong-answer", "kitchen-sink", "padding"}
REFUSAL = "I'm sorry, but I can't help with that request."
FILLER = ("Furthermore, it is worth carefully considering every relevant aspect of the question "
          "in thorough detail before concluding anything definitive about the matter at hand. ")


def wrong_answers(answer: str, pool: list[str], count: int, rng: random.Random) -> list[str]:
    """Plausible wrong answers of the same shape: other tasks' answers, else mutations."""
    shape = _shape(answer)
    same = sorted({a for a in pool if _shape(a) == shape and not _same_value(a, answer)})
    rng.shuffle(same)
    picks = same[:count]
    while len(picks) < count:
        candidate = _mutate(answer, rng)
        if not _same_value(candidate, answer) and candidate not in picks:
            picks.append(candidate)
    return picks


def _same_value(a: str, b: str) -> bool:
    """"042" and "42" are the same answer to a numeric reward."""
    if a == b:
        return True
    try:
        return _shape(a) != "text" and float(a) == float(b)
    except ValueError:
        return False


def _shape(text: str) -> str:
    if re.fullmatch(r"-?\d+", text):
        return "int"
    if m := re.fullmatch(r"-?\d+\.(\d+)", text):
        return f"dec{len(m.group(1))}"
    return "text"


def _mutate(answer: str, rng: random.Random) -> str:
    if _shape(answer) == "int":
        return str(int(answer) + rng.choice([-1, 1]) * rng.randint(1, 97))
    if _shape(answer).startswith("dec"):
        places = len(answer.split(".")[1])
        return f"{float(answer) + rng.choice([-1, 1]) * rng.randint(1, 97) / 10**places:.{places}f}"
    letters = list(answer) or ["x"]
    rng.shuffle(letters)
    return "".join(letters) + rng.choice("abcdefghijklmnopqrstuvwxyz")


def _with_answer(text: str, answer: str, replacement: str) -> str:
    """`text` with the final occurrence of `answer` replaced (as a whole token)."""
    matches = list(re.finditer(rf"(?<![\w.]){re.escape(answer)}(?![\w]|\.\d)", text))
    if not matches:
        return ""
    m = matches[-1]
    return text[: m.start()] + replacement + text[m.end():]


def probe_reply(name: str, *, oracle: Reply | None, answer: str | None, answers: list[str],
                messages: list[dict], tools: list[dict], key: str, seed: int = 0) -> Reply | None:
    """The probe's next assistant message, or None when the probe does not apply here."""
    rng = seeded_rng(seed, name, key, len(messages))
    if name == "empty":
        return Reply()
    if name == "refusal":
        return Reply(content=REFUSAL)
    if name == "echo":
        user = [m for m in messages if m.get("role") == "user"]
        content = user[-1].get("content") if user else ""
        return Reply(content=content if isinstance(content, str) else json.dumps(content))
    if name == "garbage":
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789<>/=+-*"
        words = ("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 9))) for _ in range(3000))
        return Reply(content=" ".join(words))
    if name == "tool-spam":
        names = tool_names(tools)
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        if not names:
            return None
        if turns >= 3:
            return Reply(content="Done.")
        junk = [{}, {"q": ""}, {"x": "' OR 1=1 --"}]
        return Reply(tool_calls=[ToolCall(name=n, arguments=json.dumps(junk[(turns + i) % 3]), id=f"call_{i}")
                                 for i, n in enumerate(names)])
    if oracle is None:
        return None
    if oracle.tool_calls:  # the oracle is still gathering facts: follow it faithfully
        return oracle
    if name == "padding":
        return Reply(content=oracle.content + "\n\n" + FILLER * 120)
    if name in NEEDS_ANSWER:
        if not answer or answer not in oracle.content:
            return None
        if name == "wrong-answer":
            wrong = wrong_answers(answer, answers, 1, rng)[0]
            replaced = _with_answer(oracle.content, answer, wrong)
            return Reply(content=replaced) if replaced else None
        options = wrong_answers(answer, answers, 50, rng) + [answer]
        rng.shuffle(options)
        lines = [_with_answer(oracle.content, answer, option) or option for option in options]
        return Reply(content="\n".join(lines))
    raise ValueError(f"unknown probe {name!r}")
