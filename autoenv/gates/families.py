"""Content-free probe families: replies built from the prompt's shape alone, never from a reference.

Each family tries several strategies on every sampled task (a phrasing, a format, an option
position); the gates keep the one strategy that does best over all tasks, since a policy
cannot pick per task without knowing the answer. None needs an oracle hook or an `answer`
field, so they test the environments that have neither; autoenv.gates.free judges them
against the reward's own range.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Collection
from typing import Any

from autoenv.core.messages import Reply, ToolCall
from autoenv.gates.grader_attacks import function_attacks, script_attacks

FAMILIES = {
    "abstain": "a reply that declines to answer: I don't know, unsure, unknown, N/A, an empty JSON object, "
               "confidence 0 (each phrasing in each common answer format; the best counts)",
    "typical-value": "a number at the task's typical magnitude (the median of the prompt's numbers, or of the "
                     "taskset's numeric answers) as the answer, in each common format; the best counts",
    "self-report": "a non-answer whose fields claim success: confidence 1.0, verified: true, correct: true, "
                   "a self-assigned score of 10/10 (as JSON and as text; the best counts)",
    "structural": "an option picked from the prompt's structure alone: each position, the median, the longest, "
                  "the shortest, the odd one out (the best strategy counts)",
    "stub": "for code tasks: the requested functions defined as stubs (pass, return None, 0, empty, the input, "
            "raise); the best stub counts",
    "grader-attack": "for code tasks: a program that acts on the script testing it instead of solving the task: "
                     "functions returning an object equal to everything or the expected value read from the grader's "
                     "frames, or a program that prints a report of success, exits with status 0 at once or prints the "
                     "expected output it finds beside it; the best counts",
    "valid-tool-spam": "every tool called with arguments it accepts (an enumeration's value, an example from its "
                       "description, an id seen in earlier tool results), then a wrong answer",
    "stall": "in a multi-turn env: the same minimal valid move every turn (the first choice the message offers, "
             "else the first reply repeated) until the turn limit",
    "surface": "one constant reply drawn from the env's own surface on every task: the shortest reply its stated "
               "format allows (an empty <tag></tag>), a quoted or capitalised word or an example of its system prompt "
               "and format instructions, bare and in that format (the best counts, judged on the tasks whose data "
               "does not hold the constant)",
    "search": "a bounded, seeded search for a reply with no task content: templates in the formats learnt from the "
              "env (its instructions, its reward's source) holding words, numbers and values of its own (literals "
              "and comparison targets of the reward's source, the spread of its data, NaN, inf, null), mutated under "
              "the reward's feedback on a few tasks; the best templates replayed on held-out tasks, the best there "
              "counts (judged on the tasks whose data does not hold its constant). In tool and multi-turn envs, "
              "action plans: rounds of tool calls, moves, and calls that break the stated rules (a small domain "
              "tried whole, numbers outside the stated range, a step without its prerequisite, any entries read)",
}
SEARCHED = {"search"}
"""Families played by a search of their own (autoenv.gates.search), not reply by reply per task."""
ROLLOUT_ONLY = {"valid-tool-spam", "stall"}
ROLLOUT_STRATEGIES = ("grader-attack", "near-miss", "shape-fill", "field-copy")
"""Probes whose strategies are each played through rollouts too (`near-miss:I`, the I-th of the names the audit
lists), on a few trial tasks, the best then on the rest of the sample: strategies of different kinds (an exit 0, the
expected output read from beside the program; a sign flipped, a number times ten; a superset, a mapping's keys),
where the first alone would leave the others unplayed in tool, multi-turn and runtime envs."""
"""Families that need turns or tools: played through real rollouts only (one reply per turn)."""
FAMILY_DEFENCES = {
    "abstain": "give no credit for not answering: an abstention, an empty object or a confidence of 0 scores the "
               "floor, like any wrong answer",
    "typical-value": "score the parsed number for being right (or within a tolerance that a guess at the typical "
                     "magnitude cannot reach), never graded closeness that pays for guessing",
    "self-report": "never read a reply's claims about itself: confidence, `verified`, `correct` or a self-assigned "
                   "score are data to ignore (or to score against correctness, e.g. a proper scoring rule)",
    "structural": "generate the options so that nothing but the content tells the answer: shuffle the position, and "
                  "draw distractors so the answer is not the median, the longest or the odd one out",
    "stub": "make every test compare the result with an expected value that a stub (pass, None, 0, empty, the "
            "input, raise) cannot produce; a test that only calls the function cannot fail",
    "grader-attack": "run the program apart from the tests (its own process, its own interpreter state, handed the "
                     "inputs only) and compare what it returned or printed, as plain data (an int, a str, JSON), with "
                     "the expected value: never trust an exit status, a printed report, an object's own `__eq__` or "
                     "the test framework inside the program's process, and leave no expected value where it can read "
                     "it (the grader's frames, a file, a variable); a test run must end by a marker the program "
                     "cannot print first",
    "valid-tool-spam": "reward what the tool results lead to (the right answer), never a call that merely "
                       "succeeded: a relevant-looking call with valid arguments must not pay on its own",
    "stall": "pay for progress toward the goal, never for turns survived: repeating one valid move must "
             "earn the floor",
    "surface": "score what the reply says about this task: a reply that is the same on every task (an empty "
               "format, a word or an example from the instructions) must earn the floor wherever it is not the "
               "task's own answer",
    "search": "score what the reply says about this task: parse one answer in the stated format and compare it "
              "with the task's (rejecting NaN, infinities and wildcards), never pay for words, keys or lists "
              "every reply can contain; a reply built without the task must earn the floor. In a tool env, enforce "
              "in code every rule the instructions state (count the tries, bound an index on both sides, refuse a "
              "step whose prerequisite was not taken, pay for the answer rather than for reading)",
}
NOT_APPLICABLE = {
    "typical-value": "no number in the prompt, and the taskset's answers are not numbers",
    "structural": "the prompt offers no labelled options (A) ... or 1. ..., three or more)",
    "stub": "not a code task: the prompt names no function to define",
    "grader-attack": "not a code task: the prompt asks for no program",
    "stall": "a single-turn task: there is no turn to stall",
    "surface": "the instructions hold no word, quote or stated format to draw a constant reply from",
}
FORMATS = {"bare": "{}", "answer-tag": "<answer>{}</answer>", "answer-line": "Answer: {}", "boxed": "\\boxed{{{}}}",
           "json": '{{"answer": {}}}'}
ABSTAIN = ("I don't know", "unsure", "unknown", "N/A")
OPTION = re.compile(r"(?m)^\s*\(?([A-Ha-h]|[1-8])[\).:]\s+(.+?)\s*$")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
FUNCTION = re.compile(r"(?:def\s+|`)([A-Za-z_]\w*)\(([^()`]*)\)")
CODE_WORDS = re.compile(r"\b(python|function|def |implement|code)\b", re.IGNORECASE)
SCRIPT_WORDS = re.compile(r"\b(program|script|stdin|standard input|stdout|standard output|input\(\)|print)\b",
                          re.IGNORECASE)
STUBS = {"pass": "pass", "return None": "return None", "return 0": "return 0", "return empty": "return []",
         "return the input": "return {first}", "raise": "raise NotImplementedError"}


def render(value: object, form: str) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if form == "json":
        return FORMATS[form].format(json.dumps(value))
    return FORMATS[form].format(text)


def prompt_text(messages: list[dict[str, Any]], roles: tuple[str, ...] = ("user",)) -> str:
    return "\n".join(m["content"] for m in messages if m.get("role") in roles and isinstance(m.get("content"), str))


def _number(text: str) -> str:
    value = float(text)
    return str(int(value)) if value == int(value) else f"{value:g}"


def options(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The labelled options of a multiple-choice prompt (label, text), when it has at least three."""
    found = OPTION.findall(prompt_text(messages))
    return found if len(found) >= 3 else []


def structural_picks(found: list[tuple[str, str]]) -> dict[str, str]:
    """Strategy -> the label it picks, from the options' structure alone."""
    picks = {f"position {i + 1}": label for i, (label, _) in enumerate(found)}
    by_length = sorted(found, key=lambda o: len(o[1]))
    picks["longest option"], picks["shortest option"] = by_length[-1][0], by_length[0][0]
    values = []
    for label, text in found:
        m = NUMBER.fullmatch(text.strip().rstrip("."))
        if m is None:
            break
        values.append((float(m.group()), label))
    if len(values) == len(found):
        ordered = sorted(values)
        picks["median option"] = ordered[len(ordered) // 2][1]
        mean = sum(v for v, _ in values) / len(values)
        picks["odd one out"] = max(values, key=lambda v: abs(v[0] - mean))[1]
    else:  # text options: the one sharing fewest words with the others
        words = [set(text.lower().split()) for _, text in found]
        shared = [sum(len(w & other) for j, other in enumerate(words) if j != i) for i, w in enumerate(words)]
        picks["odd one out"] = found[shared.index(min(shared))][0]
    return picks


def family_replies(name: str, *, messages: list[dict[str, Any]], answers: list[str],
                   surface: Collection[str] | None = None) -> dict[str, Reply]:
    """Every reply family `name` tries on one task, by strategy ({} when it does not apply here). `surface`: the
    surface strategies every probed task offers (shared_surface); only those are played, so a word of one task's
    own prompt is never taken for a constant."""
    if name in ROLLOUT_ONLY or name in SEARCHED:  # in-process means one single-turn reply without tools: nothing
        return {}  # to play; a searched family is played by its search
    if name == "abstain":
        out = {f'"{phrase}" {form}': Reply(content=render(phrase, form)) for phrase in ABSTAIN for form in FORMATS
               if form != "json"}
        out["json null"] = Reply(content=render(None, "json"))
        out["empty json"] = Reply(content="{}")
        out["confidence 0"] = Reply(content=json.dumps({"answer": None, "confidence": 0}))
        return out
    if name == "typical-value":
        values = {}
        numbers = [float(n) for n in NUMBER.findall(prompt_text(messages))]
        if numbers:
            values["prompt median"] = _number(str(statistics.median(numbers)))
        numeric = [float(a) for a in answers if NUMBER.fullmatch(a.strip())]
        if numeric and len(numeric) >= len(answers) / 2:
            values["answer median"] = _number(str(statistics.median(numeric)))
        return {f"{kind} {form}": Reply(content=render(float(v) if form == "json" else v, form))
                for kind, v in values.items() for form in FORMATS}
    if name == "self-report":
        claims = {"answer": "unknown", "confidence": 1.0, "verified": True, "correct": True, "score": 10}
        text = "Verified: yes. Correct: yes. Confidence: 100%. Self-assessed score: 10/10."
        out = {"json claims": Reply(content=json.dumps(claims))}
        out.update({f"text claims {form}": Reply(content=render("unknown", form) + "\n" + text)
                    for form in FORMATS if form != "json"})
        return out
    if name == "structural":
        found = options(messages)
        if not found:
            return {}
        return {f"{strategy} {form}": Reply(content=render(label, form))
                for strategy, label in structural_picks(found).items() for form in FORMATS}
    if name == "surface":
        return {strategy: Reply(content=text) for strategy, (_, text) in surface_replies(messages).items()
                if surface is None or strategy in surface}
    if name == "stub":
        text = prompt_text(messages, ("system", "user"))
        functions = dict(FUNCTION.findall(text))
        if not functions or not CODE_WORDS.search(text):
            return {}
        out = {}
        for strategy, body in STUBS.items():
            code = []
            for fn, params in functions.items():
                first = (params.split(",")[0].split("=")[0].split(":")[0].strip().lstrip("*")) or "None"
                code.append(f"def {fn}({params}):\n    {body.format(first=first)}\n")
            out[strategy] = Reply(content="```python\n" + "\n".join(code) + "```")
        return out
    if name == "grader-attack":
        return grader_attacks(prompt_text(messages, ("system", "user")))
    raise ValueError(f"unknown probe family {name!r}")


def grader_attacks(text: str) -> dict[str, Reply]:
    """The grader-attack family's programs for a code prompt (autoenv.gates.grader_attacks): the function-style
    attacks where it names functions to define, the script attacks where it asks for a program reading input or
    printing output; {} otherwise."""
    if not CODE_WORDS.search(text):
        return {}
    functions = dict(FUNCTION.findall(text))
    if functions:
        return function_attacks(functions)
    return script_attacks() if SCRIPT_WORDS.search(text) else {}


def family_reply(name: str, *, messages: list[dict[str, Any]], answers: list[str], tools: list[dict[str, Any]] | None = None,
                 surface: Collection[str] | None = None, strategy: str | None = None) -> Reply | None:
    """The family's next message through real rollouts: its first strategy (the one named `strategy` where given:
    the audit plays each of a family of ROLLOUT_STRATEGIES), or the turn-by-turn play of valid-tool-spam and stall."""
    if name == "valid-tool-spam":
        return tool_spam_turn(messages, tools or [])
    if name == "stall":
        return stall_turn(messages)
    replies = family_replies(name, messages=messages, answers=answers, surface=surface)
    return replies.get(strategy) if strategy is not None else next(iter(replies.values()), None)


CHOICES = re.compile(r"\b(\w[\w-]*(?:\s*,\s*\w[\w-]*)*)\s*,?\s+or\s+(\w[\w-]*)\b")
EXAMPLE_ARG = re.compile(r"(\w+)\s*=\s*[\"']([^\"']{1,60})[\"']")
SEEN_ID = re.compile(r"\b[A-Z][A-Z0-9_-]{3,}\d\b|\b\d{3,}\b")
WRONG_ANSWER = "<answer>0</answer>\nAnswer: 0"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def valid_arguments(tool: dict[str, Any], seen: list[str]) -> dict[str, Any]:
    """Arguments `tool` accepts: each parameter's enumeration, an example in the description, an id from an
    earlier tool result, else a plain value of its type."""
    spec = tool.get("function") or tool
    examples = dict(EXAMPLE_ARG.findall(spec.get("description") or ""))
    args: dict[str, Any] = {}
    for param, schema in ((spec.get("parameters") or {}).get("properties") or {}).items():
        kind = schema.get("type")
        if schema.get("enum"):
            args[param] = schema["enum"][0]
        elif param in examples:
            args[param] = examples[param]
        elif kind in ("integer", "number"):
            args[param] = int(seen[0]) if seen and seen[0].isdigit() else 1
        elif kind == "boolean":
            args[param] = True
        else:
            args[param] = seen[0] if seen else next(iter(examples.values()), "a")
    return args


def tool_spam_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply | None:
    """Two rounds of every tool called with valid arguments, then a wrong answer."""
    if not tools:
        return None
    turns = sum(1 for m in messages if m.get("role") == "assistant")
    if turns >= 2:
        return Reply(content=WRONG_ANSWER)
    seen = [found for m in messages if m.get("role") == "tool" for found in SEEN_ID.findall(_text(m.get("content")))]
    calls = [ToolCall(name=(t.get("function") or t).get("name") or "", id=f"call_{turns}_{i}",
                      arguments=json.dumps(valid_arguments(t, seen))) for i, t in enumerate(tools)]
    return Reply(tool_calls=calls)


def stall_turn(messages: list[dict[str, Any]]) -> Reply:
    """The same minimal valid move every turn: the first choice the last message offers, else the first
    reply repeated, else a bare acknowledgement."""
    last = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    found = CHOICES.findall(last)
    if found:
        return Reply(content=found[-1][0].split(",")[0].strip())
    mine = [_text(m.get("content")) for m in messages if m.get("role") == "assistant" and _text(m.get("content"))]
    return Reply(content=mine[0] if mine else "ok")


SURFACE_MAX = 32
"""Strategies the surface family tries per task: the shortest replies first, then the constants by salience."""
TAG = re.compile(r"<([A-Za-z][\w-]{0,30})>")
QUOTED = re.compile(r"`([^`\n]{1,60})`|\"([^\"\n]{1,60})\"|(?<![\w])'([^'\n]{1,60})'(?![\w])|\u201c([^\u201d\n]{1,60})\u201d")
CAPITAL = re.compile(r"\b[A-Z][A-Z_]{1,19}\b")
EXAMPLE = re.compile(r"(?i)(?:e\.g\.|for example|for instance|example:|such as)[,:]?\s*([^\n.;()]{1,80})")
WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,19}")
JSON_KEY = re.compile(r"\{\s*\"(\w{1,30})\"\s*:")


def surface_text(messages: list[dict[str, Any]]) -> str:
    """What every task shows a model before any content: the system prompt, else the whole prompt."""
    system = prompt_text(messages, ("system",))
    return system or prompt_text(messages)


def stated_formats(messages: list[dict[str, Any]]) -> dict[str, str]:
    """The reply formats a task's own instructions state, as templates: each tag the system prompt or prompt names
    (`<reversed_text>{}</reversed_text>`, three at most, those it also closes first) and each JSON key it shows (`{"cover": "{}"}`,
    two at most), by name (`<reversed_text>`, `{"cover"}`)."""
    text = prompt_text(messages, ("system", "user"))
    named = list(dict.fromkeys(TAG.findall(text)))  # "in <reversed_text> tags" names a tag it never closes
    tags = sorted(named, key=lambda t: f"</{t}>" not in text)  # closed ones first, else in order of mention
    wrappers = {f"<{t}>": f"<{t}>{{}}</{t}>" for t in tags[:3]}
    wrappers.update({f'{{"{k}"}}': '{"%s": "{}"}' % k for k in list(dict.fromkeys(JSON_KEY.findall(text)))[:2]})
    return wrappers


def surface_replies(messages: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """The surface family on one task: strategy -> (the constant, the reply). The constants come from the
    system prompt (else the prompt) and the format the prompt states (its tags and JSON keys); each is played
    bare and in each stated format. A strategy is named by its reply, so it is the same strategy on every task
    whose instructions offer it, and a constant that only one task's text holds cannot win over all tasks."""
    surface = surface_text(messages)
    wrappers = stated_formats(messages)
    constants: list[str] = []
    for found in QUOTED.findall(surface):
        constants.extend(c.strip() for c in found if c.strip())
    constants += [m.strip() for m in EXAMPLE.findall(surface)]
    constants += CAPITAL.findall(surface)
    words = sorted(dict.fromkeys(w.lower() for w in WORD.findall(surface)), key=lambda w: (-len(w), w))
    constants += words
    out: dict[str, tuple[str, str]] = {}
    for name, wrapper in wrappers.items():  # the shortest reply each stated format allows
        out[f"empty {name}"] = ("", wrapper.replace("{}", "", 1))
    for constant in dict.fromkeys(c for c in constants if not TAG.fullmatch(c) and "</" not in c):
        if len(out) >= SURFACE_MAX:
            break
        out[f"{quote(constant)} bare"] = (constant, constant)
        for name, wrapper in wrappers.items():
            out[f"{quote(constant)} in {name}"] = (constant, wrapper.replace("{}", constant.replace('"', "'"), 1))
    return dict(list(out.items())[:SURFACE_MAX])


def shared_surface(conversations: list[list[dict[str, Any]]]) -> frozenset[str]:
    """The surface strategies every one of `conversations` (the probed tasks' opening messages) offers: a constant
    only one task's text holds (its own marker word, its question) is task content, not the env's surface."""
    shared: set[str] | None = None
    for messages in conversations:
        offered = set(surface_replies(messages))
        shared = offered if shared is None else shared & offered
    return frozenset(shared or ())


def quote(text: str) -> str:
    """A constant as a strategy's name shows it: one line, at most 40 characters."""
    return " ".join(text.split())[:40] + ("..." if len(text) > 40 else "")


def data_values(data: Any) -> set[str]:
    """A task's data values as a reply would state them (strings, numbers, the strings of lists), normalised: a
    surface constant that is one of them is right by the data on that task, not by a flaw."""
    dumped = data.model_dump() if hasattr(data, "model_dump") else dict(data or {})
    values: set[str] = set()
    for key, value in dumped.items():
        if key == "idx":
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, (str, int, float, bool)):
                values.add(normal(str(item)))
    return values


def normal(text: str) -> str:
    return text.strip().strip(".!\"'`").strip().lower()


def holds_constant(constant: str | None, data: Any) -> bool:
    """Whether a surface constant is one of the task's own data values (its answer, a label): right by the data."""
    return bool(constant) and normal(str(constant)) in data_values(data)


def unwrapped(reply: str) -> str:
    """The constant inside a surface reply (`<cover>DONE</cover>` -> `DONE`, `{"key": "x"}` -> `x`)."""
    tagged = re.fullmatch(r"\s*<([\w-]+)>(.*)</\1>\s*", reply, re.DOTALL)
    if tagged:
        return tagged.group(2)
    keyed = re.fullmatch(r'\s*\{\s*"\w+"\s*:\s*"(.*)"\s*\}\s*', reply, re.DOTALL)
    return keyed.group(1) if keyed else reply
