"""The reward search in tool and multi-turn envs: a search over action plans, played through real rollouts.

Where a reply alone cannot be scored (tools, turns, a custom Env), the reward-search probe searches
policies instead of replies. A `Plan` is a content-free policy: so many rounds of tool calls (every
tool, with arguments taken from its schema or from what earlier tool results revealed, a new entry
each round), then a final reply taken from what the tools returned or from a template of the env's own
material (autoenv.gates.search); in a multi-turn env without tools, a move every turn: the template,
the first move the message offers, the middle of the range it states (a valid move that learns nothing), or
a move just outside that range. Rule-breaking plans test what the rules state but the env may not enforce
(autoenv.gates.action_calls): a small argument domain tried whole and answered from the result that stood apart,
numbers just outside a stated range, the tools called in the reverse of their order, any entries read. Plans
are scored by real
rollouts on a few training tasks; the best breed neighbours (more rounds, the other argument source,
another final reply, a mutated template) within a budget of rollouts and seconds, deterministic for a
seed; the best plans are then replayed on held-out tasks, and only what they earn there is judged. Where
the first generation earns nothing there is no score to climb: the search stops and replays its first plan.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from autoenv.core.messages import Reply, ToolCall
from autoenv.gates.action_calls import ENTRIES, ENUMERATE, KINDS, calls_for, odd_value, passed_strings
from autoenv.gates.families import CHOICES, EXAMPLE_ARG, _text, quote
from autoenv.gates.search import Material, Template, mutate

ROLLOUTS = 48
"""Training rollouts the action search may spend (the held-out replay is extra)."""
SECONDS = 90.0
TRAIN_TASKS = 2
MAX_ROUNDS = 8
FINALISTS = 2
SEEN = re.compile(r"\b[A-Za-z]{1,8}[-_]?\d{2,}\b|\b\d+(?:\.\d+)?\b|\"([^\"\n]{1,40})\"")
RANGE = re.compile(r"(?i)\b(?:between|from)\s+(-?\d+)\s+(?:and|to)\s+(-?\d+)")
FINALS = ("seen-last", "seen-first", "template", "odd")
MOVES = ("same", "offered", "inside", "outside")


def seen_values(messages: list[dict[str, Any]]) -> list[str]:
    """What earlier tool results revealed, in order, each once: ids (`SKU-1234`), numbers and quoted strings."""
    out: list[str] = []
    for message in messages:
        if message.get("role") != "tool":
            continue
        for match in SEEN.finditer(_text(message.get("content"))):
            value = match.group(1) or match.group(0)
            if value not in out:
                out.append(value)
    return out


def _arguments(tool: dict[str, Any], seen: list[str], pick: int) -> dict[str, Any]:
    """Arguments `tool` accepts; with `seen` values, the `pick`-th of them (cycling), so each round reads a new
    entry; else the schema's enumeration, an example of its description, or a plain value of its type."""
    spec = tool.get("function") or tool
    examples = dict(EXAMPLE_ARG.findall(spec.get("description") or ""))
    args: dict[str, Any] = {}
    for param, schema in ((spec.get("parameters") or {}).get("properties") or {}).items():
        kind = schema.get("type")
        numeric = [v for v in seen if re.fullmatch(r"-?\d+", v)]
        if schema.get("enum"):
            args[param] = schema["enum"][pick % len(schema["enum"])]
        elif kind in ("integer", "number"):
            args[param] = int(numeric[pick % len(numeric)]) if numeric else 1 + pick
        elif kind == "boolean":
            args[param] = True
        elif seen:
            args[param] = seen[pick % len(seen)]
        else:
            args[param] = examples.get(param) or next(iter(examples.values()), "a")
    return args


@dataclass(frozen=True)
class Plan:
    """A content-free policy (see the module docstring)."""

    template: Template
    rounds: int = 0
    args: str = "schema"
    final: str = "template"
    moves: str = "same"

    def describe(self, tools: bool) -> str:
        if not tools:
            what = {"same": f"the reply {self.template.describe()} every turn",
                    "offered": "the first move each message offers, every turn",
                    "inside": "the middle of the range each message states, every turn (a valid move that "
                              "learns nothing)",
                    "outside": "a move just outside the range each message states, every turn"}[self.moves]
            return what
        calls = (LAST_ALONE if self.args == "reverse" and self.rounds == 1 else RULE_BREAKING.get(self.args)) or (
            f"{self.rounds} round(s) of every tool called with arguments from "
            + ("what earlier results revealed (a new entry each round)" if self.args == "seen" else "its schema"))
        if self.final == "template":
            return f"{calls}, then {self.template.describe()}"
        if self.final == "odd":
            return f"{calls}, then {quote(self.template.form)} holding the value whose result stood apart"
        which = "last" if self.final == "seen-last" else "first"
        return f"{calls}, then {quote(self.template.form)} holding the {which} value the tools returned"

    def says_template(self) -> bool:
        """Its replies are its template as written (not a value a tool returned, not a move read off the message)."""
        return self.final == "template" and self.moves == "same"

    def turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        """The plan's next assistant message in this conversation."""
        played = sum(1 for m in messages if m.get("role") == "assistant")
        seen = seen_values(messages)
        if tools and played < self.rounds and self.args in KINDS:
            breaking = calls_for(self.args, tools, messages, played)
            if breaking:
                return Reply(tool_calls=breaking)
        elif tools and played < self.rounds:
            calls = [ToolCall(name=(t.get("function") or t).get("name") or "", id=f"call_{played}_{i}",
                              arguments=json.dumps(_arguments(t, seen if self.args == "seen" else [],
                                                              played * len(tools) + i)))
                     for i, t in enumerate(tools)]
            return Reply(tool_calls=calls)
        if tools and self.final == "odd":
            found = odd_value(messages)
            return Reply(content=(replace(self.template, items=(found,)) if found else self.template).reply())
        passed = passed_strings(messages)
        news = [v for v in seen if v not in passed] or seen  # what a call passed is no news
        if tools and self.final != "template" and news:
            value = news[-1] if self.final == "seen-last" else news[0]
            return Reply(content=replace(self.template, items=(value,)).reply())
        if not tools and self.moves != "same":
            return Reply(content=_move(messages, self.moves) or self.template.reply())
        return Reply(content=self.template.reply())


RULE_BREAKING = {
    "enumerate": f"every value of each tool's small argument domain (an enumeration, a stated range of at most "
                 f"{ENUMERATE}) tried in one turn",
    "below": "every tool with a number argument called with a value just below the range the rules state (or -1), "
             "with the ids the prompt names",
    "above": "every tool with a number argument called with a value just above the range the rules state (or a "
             "million), with the ids the prompt names",
    "reverse": "the tools called one a turn in the reverse of the order the rules name them in, with the ids the "
               "prompt names (a step the rules order after another, taken first)",
    "entries": f"the tools called with the prompt's ids or words, then each with {ENTRIES} new entries the results "
               f"revealed a round (any entries, read without regard to the task)",
}
LAST_ALONE = ("the tool the rules name last called alone, with the ids the prompt names (the steps the rules order before "
              "it skipped)")
"""What each rule-breaking plan (autoenv.gates.action_calls) does, as its strategy names it; the reverse plan of
one round is LAST_ALONE."""


def _move(messages: list[dict[str, Any]], kind: str) -> str | None:
    last = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    if kind == "offered":
        found = CHOICES.findall(last)
        return found[-1][0].split(",")[0].strip() if found else None
    stated = RANGE.findall(last) or RANGE.findall(" ".join(_text(m.get("content")) for m in messages
                                                             if m.get("role") in ("system", "user")))
    if stated:
        low, high = sorted(int(v) for v in stated[-1])
        return str((low + high) // 2) if kind == "inside" else str(high + 1)
    found = CHOICES.findall(last)
    return "none of these" if found else None


Player = Callable[[list[Plan], list[Any]], Awaitable[list[list[float | None]]]]
"""`play(plans, tasks)` -> per plan, each task's total reward (None when the rollout failed)."""


@dataclass
class ActionOutcome:
    chosen: Plan
    trace: dict[str, Any]


def first_plans(material: Material, tools: bool) -> list[Plan]:
    base = Template(material.formats[0], (material.tokens()[0],))
    if not tools:
        return [Plan(base, moves=m) for m in MOVES] + [Plan(Template(material.formats[0]))]
    return [*(Plan(base, rounds=r, args="schema" if r == 1 else "seen", final=f) for r in (1, 3, 6)
              for f in ("seen-last", "template")),
            Plan(base, rounds=1, args="enumerate", final="odd"), Plan(base, rounds=1, args="below", final="seen-last"),
            Plan(base, rounds=1, args="above", final="seen-last"), Plan(base, rounds=1, args="reverse", final="seen-last"),
            Plan(base, rounds=MAX_ROUNDS, args="reverse", final="seen-first"),
            Plan(base, rounds=3, args="entries")]


def neighbours(plan: Plan, material: Material, tools: bool, rng: random.Random) -> list[Plan]:
    """Plans one change away: more or fewer rounds, the other argument source, another final reply or move, a
    mutated template."""
    out = [replace(plan, template=mutate(plan.template, plan.template, rng.choice(("replace", "reformat", "constant",
                                                                                   "widen", "enumerate")),
                                         material, rng))]
    if tools and plan.args in KINDS:  # a rule-breaking plan keeps its calls: another final reply
        out.append(replace(plan, final=FINALS[(FINALS.index(plan.final) + 1) % len(FINALS)]))
    elif tools:
        out += [replace(plan, rounds=min(plan.rounds * 2 or 1, MAX_ROUNDS)), replace(plan, rounds=max(plan.rounds - 1, 0)),
                replace(plan, args="seen" if plan.args == "schema" else "schema"),
                replace(plan, final=FINALS[(FINALS.index(plan.final) + 1) % len(FINALS)])]
    else:
        out.append(replace(plan, moves=MOVES[(MOVES.index(plan.moves) + 1) % len(MOVES)]))
    return out


def _mean(values: list[float | None]) -> float:
    scored = [v for v in values if v is not None]
    return sum(scored) / len(values) if values else 0.0


async def search_actions(train: list[Any], held_out: list[Any], material: Material, play: Player, tools: bool, *,
                         seed: int = 0, rollouts: int = ROLLOUTS, seconds: float = SECONDS,
                         ceiling: float | None = None) -> ActionOutcome:
    """Hill-climb over plans on `train`, then replay the best FINALISTS on `held_out` (see the module docstring)."""
    rng = random.Random(f"action-search:{seed}")
    begun = time.monotonic()
    scores: dict[Plan, float] = {}
    steps: list[dict[str, Any]] = []
    spent, stopped, best, generations = 0, "calls", -1.0, 0
    brood = first_plans(material, tools)
    while brood:
        generations += 1
        results = await play(brood, train)
        spent += len(brood) * len(train)
        for plan, values in zip(brood, results):
            scores[plan] = _mean(values)
            if scores[plan] > best + 1e-9:
                best = scores[plan]
                steps.append({"calls": spent, "mean": round(best, 4), "template": plan.describe(tools)})
        if ceiling is not None and best >= ceiling - 1e-9:
            stopped = "ceiling"
            break
        if best <= 0:  # no plan earned anything: no score to climb (each further plan costs real rollouts)
            stopped = "nothing paid"
            break
        if time.monotonic() - begun > seconds:
            stopped = "seconds"
            break
        room = (rollouts - spent) // max(len(train), 1)
        if room <= 0:
            break
        ranked = sorted(scores, key=lambda p: -scores[p])
        brood = []
        for parent in ranked[:3]:
            for plan in neighbours(parent, material, tools, rng):
                if plan not in scores and plan not in brood and len(brood) < room:
                    brood.append(plan)
        if not brood:
            stopped = "exhausted"
    ranked = sorted(scores, key=lambda p: -scores[p])[:FINALISTS if best > 0 else 1]
    replayed = await play(ranked, held_out) if held_out else [[] for _ in ranked]
    held = [_mean(values) for values in replayed]
    chosen = ranked[max(range(len(ranked)), key=lambda i: held[i])] if ranked else Plan(Template("{}"))
    trace = {"material": dict(material.sources), "formats": material.formats, "objectives": ["total"],
             "train_tasks": len(train), "held_out_tasks": sum(all(t is not x for x in train) for t in held_out), "calls": spent,
             "generations": generations, "templates": len(scores), "seconds": round(time.monotonic() - begun, 3),
             "stopped": stopped, "budget": {"calls": rollouts, "seconds": seconds}, "steps": steps[-20:],
             "finalists": [{"template": p.describe(tools), "train": round(scores[p], 4), "held_out": round(h, 4),
                            "chosen": p == chosen} for p, h in zip(ranked, held)]}
    return ActionOutcome(chosen=chosen, trace=trace)
