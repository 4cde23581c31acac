"""The reward-search probe: a bounded, seeded search for a reply that carries no task content and still earns reward.

The named families (autoenv.gates.families) try replies somebody thought of. This probe searches
instead, the way a fuzzer does:
- its material is a dictionary drawn from the env itself (`Material`): the reply formats the gates
  learnt (from the oracle, the reward's source, the instructions), the literals and comparison targets
  of the reward's source, the words of the instructions, the spread of the task data's values (never a
  task's own value: a constant that is a task's own data value earns nothing there), and values that
  trip careless parsers (NaN, inf, null, an empty list);
- its moves are structure-aware mutations of a reply template (`MUTATIONS`): the content replaced,
  repeated, enumerated over a range, widened to more items, narrowed, made constant, shape-matched,
  reordered, the format changed or combined with a second one;
- its guide is the reward itself: each generation's templates are scored on a few training tasks, and
  the best per objective (the total, and each component the reference never earns: the ceiling) breed
  the next generation, within a budget of reward calls and seconds, deterministic for a seed. Where the
  search is still climbing when its calls are spent (its best rose in the budget's second half, short of
  the ceiling), the budget grows by its first size, up to `grow_to` calls, while the seconds last: a
  reward that is cheap to call gets the longer search, one that is slow stops at its seconds.

Each finalist is then simplified (written once, one format, fewer items) as far as it still earns as much,
so the reply the agent is shown is the plainest one that pays. What it finds must transfer: the best
templates are replayed on held-out tasks, and only what the best of them earns there is judged, as a content-free family against the reward's range
(autoenv.gates.free). A template that fits its training tasks by chance earns nothing on the others.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autoenv.gates.families import quote

ODD_VALUES = ("NaN", "nan", "inf", "-inf", "Infinity", "1e308", "-1", "0", "1", "null", "None", "true", "false",
              "[]", "{}", "", " ", "*", ".*", "?")
"""Values that trip careless parsers and comparisons: a NaN compares false with everything, `inf` passes a `>`
check, `null`/`[]`/`{}` are JSON that parses, `*` and `.*` are wildcards a reward may match with."""
JOINERS = (", ", "\n", " ", "; ")
MAX_ITEMS = 100
MAX_REPLY = 4000
MAX_FORMATS = 10
TRAIN_TASKS = 4
HELD_TASKS = 16
BROOD = 8
"""Templates bred per generation (each scored on every training task in one batch per task)."""
ELITES = 4
"""Templates kept per objective as parents."""
CALLS = 800
"""Reward calls the search may spend on its training tasks (the transfer replay is extra)."""
SWEPT = 2
SWEEP_OWN = 8
"""The first generation sweeps the first SWEPT formats with every odd value and SWEEP_OWN entries of the env's own."""
SECONDS = 20.0
GROW_TO = 2 * CALLS
"""The most reward calls a climbing search grows to (the audit's stage passes it; `search` alone never grows)."""
FINALISTS = 3
NUMERIC = re.compile(r"-?\d+(?:\.\d+)?")


def fill(form: str, content: str) -> str:
    """`content` in the format `form`'s one `{}` slot. In a JSON format whose slot stands unquoted (`{"total": {}}`)
    a value that is not JSON on its own (a word) is written as a JSON string."""
    if form.lstrip().startswith("{") and re.search(r":\s*\{\}", form):
        try:
            json.loads(content)
        except ValueError:
            if content not in ("NaN", "Infinity", "-Infinity"):  # what json.loads accepts beyond the standard
                content = json.dumps(content)
    return form.replace("{}", content, 1)


@dataclass(frozen=True)
class Template:
    """A reply built from no task content: `items` joined by `joiner` in the format `form`, the block written
    `times` times, and again in the format `second` when combined."""

    form: str
    items: tuple[str, ...] = ("",)
    joiner: str = ", "
    times: int = 1
    second: str | None = None

    def content(self) -> str:
        return self.joiner.join(self.items)

    def reply(self) -> str:
        block = fill(self.form, self.content())
        text = "\n".join([block] * self.times)
        if self.second is not None:
            text += "\n" + fill(self.second, self.content())
        return text[:MAX_REPLY]

    def constant(self) -> str | None:
        """The one value the reply states, when it states one (a data value check); None for several."""
        distinct = set(self.items)
        return next(iter(distinct)) if len(distinct) == 1 else None

    def describe(self) -> str:
        """The template in words, short: `<primes>{}</primes> holding "2, 3, 4, ... 100" (99 items)`."""
        content = self.content()
        shown = quote(content) if len(self.items) <= 6 else (
            f'"{self.joiner.join(self.items[:3]).strip()} ... {self.items[-1]}" ({len(self.items)} items)')
        if len(self.items) <= 6:
            shown = f'"{shown}"' if content else "nothing"
        words = f"{quote(self.form)} holding {shown}"
        if self.times > 1:
            words += f", written {self.times} times"
        if self.second is not None:
            words += f", and again in {quote(self.second)}"
        return words


@dataclass
class Material:
    """What the search builds replies from, all of it the env's own surface, never a task's answer."""

    formats: list[str]
    words: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)
    """How many entries each source gave (`reward source`, `instructions`, `task data`, ...), for the trace."""

    def tokens(self) -> list[str]:
        """Every entry the mutations draw from: the env's own (words, numbers, data values, options, each source
        bounded so no one source crowds out the rest), then the odd values, always all of them."""
        own = [*self.words[:48], *self.numbers[:24], *self.values[:32], *self.options[:16]]
        return list(dict.fromkeys([*own, *ODD_VALUES]))

    def ranges(self) -> list[tuple[str, ...]]:
        """Enumerations: integers across the numbers' span (at most MAX_ITEMS), the options, the words."""
        out: list[tuple[str, ...]] = []
        ints = [int(float(n)) for n in self.numbers if NUMERIC.fullmatch(n) and abs(float(n)) < 1e6]
        if ints:
            low, high = min([0, *ints]), max(ints)
            if high - low + 1 > MAX_ITEMS:
                low = max(low, high - MAX_ITEMS + 1)
            out.append(tuple(str(i) for i in range(low, high + 1)))
        out.append(tuple(str(i) for i in range(21)))
        if self.options:
            out.append(tuple(self.options))
        if self.words:
            out.append(tuple(self.words[:40]))
        if self.values:
            out.append(tuple(self.values[:MAX_ITEMS]))
        return out


def data_material(datas: Sequence[dict[str, Any]], skip: set[str]) -> tuple[list[str], list[str]]:
    """(numbers, values) from the task data's fields, across tasks: each numeric field's minimum, median and
    maximum, each field's most common values (a label set, a list's common items). A constant drawn from them
    is the same on every task; where it is a task's own value, that task does not count."""
    numbers: list[str] = []
    counts: dict[str, int] = {}
    fields: dict[str, list[float]] = {}
    for data in datas:
        for name, value in data.items():
            if name in skip:
                continue
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                    continue
                text = str(item).strip()
                if not text or len(text) > 60:
                    continue
                counts[text] = counts.get(text, 0) + 1
                if isinstance(item, (int, float)) and math.isfinite(float(item)):
                    fields.setdefault(name, []).append(float(item))
    for values in fields.values():
        for number in (min(values), statistics.median(values), max(values)):
            numbers.append(str(int(number)) if float(number).is_integer() else f"{number:g}")
    common = sorted(counts, key=lambda v: (-counts[v], v))
    return list(dict.fromkeys(numbers)), common[:40]


Scorer = Callable[[Any, list[str]], Awaitable[list[tuple[float | None, dict[str, float]]]]]
"""`score(task, replies)` -> per reply (total reward or None on an error, {component: score})."""
Held = Callable[[Any, str], bool]
"""`held(task, constant)`: the constant is one of the task's own data values (right by the data there)."""


@dataclass
class Scored:
    template: Template
    total: float
    components: dict[str, float]
    typical: float = 0.0
    """The median task's total: what the template earns on most tasks, not what a chance hit added to the mean."""


@dataclass
class Outcome:
    """The search's result: the templates replayed on held-out tasks, the chosen one, and its trace."""

    chosen: Template
    finalists: list[dict[str, Any]]
    trace: dict[str, Any]


MUTATIONS = ("replace", "repeat", "enumerate", "widen", "narrow", "constant", "shape", "reorder", "reformat",
             "combine", "block", "join")


def mutate(parent: Template, other: Template, op: str, material: Material, rng: random.Random) -> Template:
    """One structure-aware change of `parent` (`other`: a second parent, for `combine`)."""
    tokens = material.tokens()
    items = list(parent.items)
    if op == "replace":
        items[rng.randrange(len(items))] = rng.choice(tokens)
    elif op == "repeat":
        items = (items * 2)[:MAX_ITEMS]
    elif op == "enumerate":
        items = list(rng.choice(material.ranges()))
    elif op == "widen":
        items += rng.sample(tokens, min(len(tokens), rng.choice((1, 2, 4))))
    elif op == "narrow":
        items = items[:-1] if len(items) > 1 else [""]
    elif op == "constant":
        items = [rng.choice(tokens)]
    elif op == "shape":
        pool = material.values or material.numbers or tokens
        items = [rng.choice(pool)]
    elif op == "reorder":
        rng.shuffle(items)
    elif op == "reformat":
        return replace(parent, form=rng.choice(material.formats))
    elif op == "combine":
        if other.form != parent.form and parent.second is None:
            return replace(parent, second=other.form)
        items = list(dict.fromkeys([*items, *other.items]))[:MAX_ITEMS]
    elif op == "block":
        return replace(parent, times=min(parent.times * 2, 8))
    elif op == "join":
        return replace(parent, joiner=rng.choice(JOINERS))
    return replace(parent, items=tuple(items[:MAX_ITEMS]) or ("",))


def seeds(material: Material) -> list[Template]:
    """The first generation, a sweep before any mutation: each format empty and enumerating the first range; the
    first SWEPT formats (the learnt ones) holding each odd value and the first of the env's own entries."""
    out = []
    ranges = material.ranges()
    for i, form in enumerate(material.formats):
        out.append(Template(form))
        if ranges:
            out.append(Template(form, ranges[0]))
        if i < SWEPT:
            own = [t for t in material.tokens() if t not in ODD_VALUES][:SWEEP_OWN]
            out += [Template(form, (token,)) for token in [*own, *ODD_VALUES] if token]
    return list(dict.fromkeys(out))


async def _evaluate(templates: list[Template], tasks: list[Any], score: Scorer, held: Held) -> list[Scored]:
    """Each template's mean total and per-component means over `tasks`; a task whose own data holds the
    template's one constant counts 0 for it (right by the data, not by the reward)."""
    replies = [t.reply() for t in templates]
    per_task: list[list[float]] = [[] for _ in templates]
    parts: list[dict[str, float]] = [{} for _ in templates]
    for task in tasks:
        scored = await score(task, replies)
        for i, (total, components) in enumerate(scored):
            constant = templates[i].constant()
            if total is None or (constant and held(task, constant)):
                per_task[i].append(0.0)
                continue
            per_task[i].append(total)
            for name, value in components.items():
                parts[i][name] = parts[i].get(name, 0.0) + value
    n = max(len(tasks), 1)
    return [Scored(t, sum(per_task[i]) / n, {k: v / n for k, v in parts[i].items()},
                   statistics.median(per_task[i]) if per_task[i] else 0.0) for i, t in enumerate(templates)]


def _key(objective: str) -> Callable[[Scored], float]:
    return (lambda s: s.total) if objective == "total" else (lambda s: s.components.get(objective, 0.0))


async def search(train: list[Any], held_out: list[Any], material: Material, score: Scorer, held: Held, *,
                 seed: int = 0, calls: int = CALLS, seconds: float = SECONDS, ceiling: float | None = None,
                 focus: Sequence[str] = (), grow_to: int | None = None) -> Outcome:
    """Search replies on `train`, then replay the finalists on `held_out` (see the module docstring).

    `ceiling`: the most a reply can earn (the reference's total, or the declared range's top): reaching it
    on the training tasks ends the search early. `focus`: components the reference never earns in full
    (autoenv.gates.ceiling): each is an objective of its own, so the search is pointed at it. `grow_to`: the most
    calls a search still climbing at the end of its budget may grow to (None: it never grows).
    """
    rng = random.Random(f"reward-search:{seed}")
    begun = time.monotonic()
    objectives = ["total", *focus]
    elites: dict[str, list[Scored]] = {o: [] for o in objectives}
    seen: set[str] = set()
    spent, generation, stopped = 0, 0, "calls"
    size, window, grown, swept = calls, 0, 0, 0
    steps: list[dict[str, Any]] = []
    best_total = -math.inf

    def admit(batch: list[Scored]) -> None:
        nonlocal best_total
        for s in batch:
            if s.total > best_total + 1e-9:
                best_total = s.total
                steps.append({"calls": spent, "mean": round(s.total, 4), "template": s.template.describe()})
        for o in objectives:  # the newest first among equals: on a plateau the search walks instead of circling
            pool = sorted([*batch, *elites[o]], key=_key(o), reverse=True)
            elites[o] = pool[:ELITES]

    brood = [t for t in seeds(material) if not (t.reply() in seen or seen.add(t.reply()))]  # type: ignore[func-returns-value]
    brood = brood[:max(1, calls // max(len(train), 1))]  # the sweep too stays within the budget
    while brood:
        batch = await _evaluate(brood, train, score, held)
        spent += len(brood) * len(train)
        admit(batch)
        generation += 1
        swept = swept or spent
        if ceiling is not None and best_total >= ceiling - 1e-9:
            stopped = "ceiling"
            break
        if spent >= calls:
            climbing = best_total > 0 and steps[-1]["calls"] > max(swept, window + (calls - window) / 2)  # the first
            # generation's best is where the search starts, not a climb
            if grow_to is None or calls + size > grow_to or not climbing:
                break
            window, calls, grown = calls, calls + size, grown + 1
        if time.monotonic() - begun > seconds:
            stopped = "seconds"
            break
        brood = []
        for attempt in range(BROOD * 6):
            if len(brood) >= min(BROOD, max(1, (calls - spent) // max(len(train), 1))):
                break
            objective = objectives[(generation + attempt) % len(objectives)]
            parents = elites[objective] or elites["total"]
            parent = rng.choice(parents).template
            other = rng.choice(elites[rng.choice(objectives)] or parents).template
            child = mutate(parent, other, rng.choice(MUTATIONS), material, rng)
            if child.reply() not in seen:
                seen.add(child.reply())
                brood.append(child)
        if not brood:
            stopped = "exhausted"
    finalists = _finalists(elites, objectives) if best_total > 0 else [Template(material.formats[0])]
    # (nothing earned anything: the plainest reply of the first learnt format stands for the search, replayed once)
    train_means = {s.template: s for o in objectives for s in elites[o]}
    train_means.setdefault(finalists[0], Scored(finalists[0], 0.0, {}))
    simpler = []
    for template in finalists:  # the simplest template that earns as much: the reply the agent is shown
        plain, spent_here = await simplify(template, train_means[template] if template in train_means else None,
                                           train, score, held)
        spent += spent_here
        if plain is not None and plain != template:
            train_means[plain] = Scored(plain, train_means[template].total, train_means[template].components)
        simpler.append(plain or template)
    finalists = list(dict.fromkeys(simpler))
    replayed = await _evaluate(finalists, held_out, score, held) if held_out else []
    # the best on held-out tasks; among equals the shortest reply (a 14-item list that also hit one training task's
    # answer by chance earns no more there than the one item that pays, and it is that item the agent should see)
    chosen = max(replayed, key=lambda s: (round(s.total, 9), -len(s.template.reply()))).template if replayed \
        else finalists[0]
    rows = [{"template": s.template.describe(), "train": round(train_means[s.template].total, 4),
             "held_out": round(s.total, 4), "components": {k: round(v, 4) for k, v in s.components.items()},
             "chosen": s.template == chosen} for s in replayed]
    trace = {"material": dict(material.sources), "formats": material.formats, "objectives": objectives,
             "train_tasks": len(train), "held_out_tasks": sum(all(t is not x for x in train) for t in held_out), "calls": spent, "generations": generation,
             "templates": len(seen), "seconds": round(time.monotonic() - begun, 3), "stopped": stopped,
             "budget": {"calls": calls, "seconds": seconds, "grown": grown}, "steps": steps[-20:], "finalists": rows}
    return Outcome(chosen=chosen, finalists=rows, trace=trace)


SIMPLER = 6
"""Simplification steps per finalist at most (each tries up to seven simpler templates: a halving per step finds
the one item that pays among 60)."""


def _simpler(t: Template) -> list[Template]:
    """One step simpler each, the most aggressive first: the first item alone, the last alone, the first half, the
    second half; written once, without its second format, the default joiner."""
    out = []
    if len(t.items) > 1:
        out += [replace(t, items=t.items[:1]), replace(t, items=t.items[-1:]),
                replace(t, items=t.items[:len(t.items) // 2]), replace(t, items=t.items[len(t.items) // 2:])]
    if t.times > 1:
        out.append(replace(t, times=1))
    if t.second is not None:
        out.append(replace(t, second=None))
    if t.joiner != ", ":
        out.append(replace(t, joiner=", "))
    return out


async def simplify(template: Template, scored: Scored | None, train: list[Any], score: Scorer, held: Held
                   ) -> tuple[Template | None, int]:
    """The simplest template reached by one-step simplifications that earns what `template` earns on `train`
    (greedy, at most SIMPLER steps); (None, 0) when it earns nothing to keep. Returns (template, reward calls)."""
    if scored is None or scored.total <= 0:
        return None, 0
    current, spent = template, 0
    for _ in range(SIMPLER):
        options = [t for t in _simpler(current) if t.reply()]
        if not options:
            break
        batch = await _evaluate(options, train, score, held)
        spent += len(options) * len(train)
        keep = next((s for s in batch if _as_good(s, scored)), None)
        if keep is None:
            break
        current = keep.template
    return current, spent


def _as_good(simpler: Scored, scored: Scored) -> bool:
    """`simpler` earns what `scored` earns: as much on average, or, where `scored` earns something on most tasks,
    as much on the median task and on average (the items it drops paid only by a chance hit, e.g. a number
    that was one training task's answer)."""
    if simpler.total >= scored.total - 1e-9:
        return True
    return scored.typical > 0 and simpler.typical >= scored.typical - 1e-9 and simpler.total >= scored.typical - 1e-9


def _finalists(elites: dict[str, list[Scored]], objectives: list[str]) -> list[Template]:
    """The best FINALISTS templates by total, then the best on each focused component; at least one."""
    picked: list[Template] = []
    for s in elites["total"][:FINALISTS]:
        if s.template not in picked:
            picked.append(s.template)
    for o in objectives[1:]:
        best = elites[o][0] if elites[o] else None
        if best is not None and best.components.get(o, 0.0) > 0 and best.template not in picked:
            picked.append(best.template)
    return picked or [Template("{}")]
