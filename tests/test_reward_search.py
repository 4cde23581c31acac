"""The reward-search probe: a bounded, seeded search for a reply with no task content that the reward still pays.

The algorithm is tested here against rewards written as plain Python (each the kind of flaw a real env has: a NaN
that compares false, recall without precision, a phrase only the reward's source knows), on tasks built in the test;
tests/test_search_examples.py plays the same flaws end to end, through `autoenv probe` on real example envs. What
must hold: the search finds what its material and mutations can reach, within its budget, the same way for a seed;
a template that fits its training tasks by chance earns nothing held out; a constant that is a task's own value
earns nothing there; the action search reads ids from tool results and answers from them.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass

import pytest

from autoenv.core.messages import Reply
from autoenv.gates.action_search import Plan, search_actions, seen_values
from autoenv.gates.audit_record import ProbeRecord
from autoenv.gates.ceiling import judge_ceiling
from autoenv.gates.findings import Gates
from autoenv.gates.rows import Row
from autoenv.gates.search import ODD_VALUES, SIMPLER, Material, Template, data_material, fill, mutate, search


@dataclass(frozen=True)
class Task:
    idx: int
    answer: float
    primes: tuple[int, ...] = ()


TASKS = [Task(i, round(10 + i * 3.7, 2), tuple(p for p in range(2, 60) if all(p % d for d in range(2, p)))[i % 5:i % 5 + 3])
         for i in range(24)]


SIMPLIFYING = 4 * SIMPLER * 7 * 4
"""Reward calls the finalists' simplification may add (four finalists at most, each step seven templates at most,
each on four training tasks)."""


def never_held(task: Task, constant: str) -> bool:
    return False


def scorer(reward):
    calls = []

    async def score(task: Task, replies: list[str]) -> list[tuple[float | None, dict[str, float]]]:
        calls.append(len(replies))
        out = []
        for reply in replies:
            value = reward(task, reply)
            out.append((value, {"correct": value}))
        return out
    return score, calls


def nan_balance(task: Task, reply: str) -> float:
    """{"balance": x}, paid unless x is more than a cent off: a NaN is never "more than" anything."""
    try:
        got = float(json.loads(reply)["balance"])
    except (ValueError, KeyError, TypeError):
        return 0.0
    return 0.0 if abs(got - task.answer) > 0.005 else 1.0


def recall(task: Task, reply: str) -> float:
    found = re.search(r"<primes>(.*?)</primes>", reply, re.S)
    listed = {int(n) for n in re.findall(r"\d+", found.group(1))} if found else set()
    return len(listed & set(task.primes)) / len(task.primes)


def material(**kw) -> Material:
    base = dict(formats=['{"balance": {}}', "<primes>{}</primes>", "<answer>{}</answer>", "{}"], words=["balance"],
                numbers=["10", "95"])
    base.update(kw)
    return Material(**base)  # type: ignore[arg-type]


def run(coro):
    return asyncio.run(coro)


def test_a_json_slot_gets_json_and_a_template_reads_as_its_reply():
    assert fill('{"balance": {}}', "NaN") == '{"balance": NaN}'
    assert fill('{"balance": {}}', "12.5") == '{"balance": 12.5}'
    assert fill('{"balance": {}}', "lots") == '{"balance": "lots"}'
    assert fill("<a>{}</a>", "x") == "<a>x</a>"
    t = Template("<primes>{}</primes>", tuple(str(i) for i in range(2, 101)))
    assert t.reply().startswith("<primes>2, 3, 4") and t.constant() is None
    assert "(99 items)" in t.describe() and Template("{}", ("x",)).constant() == "x"
    assert Template("<a>{}</a>", ("x",), times=2, second="Answer: {}").reply() == "<a>x</a>\n<a>x</a>\nAnswer: x"


def test_the_search_finds_a_nan_that_compares_false_and_it_transfers():
    score, _ = scorer(nan_balance)
    outcome = run(search(TASKS[:4], TASKS[4:], material(), score, never_held, seed=1, calls=400))
    reply = outcome.chosen.reply()
    assert nan_balance(TASKS[10], reply) == 1.0 and re.search(r"(?i)nan", reply), outcome.trace
    chosen = [f for f in outcome.finalists if f["chosen"]][0]
    assert chosen["held_out"] == 1.0 and chosen["train"] == 1.0
    assert outcome.trace["stopped"] == "ceiling" or outcome.trace["calls"] <= 400 + 8 * 4 + SIMPLIFYING


def test_the_search_widens_a_list_until_recall_pays_without_the_answer():
    score, _ = scorer(recall)
    outcome = run(search(TASKS[:4], TASKS[4:], material(), score, never_held, seed=2, calls=480))
    assert recall(TASKS[20], outcome.chosen.reply()) == 1.0, outcome.trace
    assert len(outcome.chosen.items) > 3  # an enumeration, never one task's primes
    assert outcome.chosen.times == 1 and outcome.chosen.second is None  # shown as simply as it pays


def test_a_clean_reward_gives_the_search_nothing():
    def exact(task: Task, reply: str) -> float:
        try:
            got = float(json.loads(reply)["balance"])
        except (ValueError, KeyError, TypeError):
            return 0.0
        return float(math.isfinite(got) and abs(got - task.answer) <= 0.005)
    score, calls = scorer(exact)
    outcome = run(search(TASKS[:4], TASKS[4:], material(), score, never_held, seed=3, calls=200))
    assert all(f["held_out"] == 0.0 for f in outcome.finalists)
    assert outcome.trace["calls"] <= 200 + 8 * 4  # nothing earned: nothing to simplify
    assert outcome.trace["stopped"] in ("calls", "exhausted")


def test_what_fits_the_training_tasks_by_chance_earns_nothing_held_out():
    # the reward pays the exact answer only; the training tasks all have the answer 42, the held-out ones never
    train = [Task(i, 42.0) for i in range(4)]
    held = [Task(10 + i, 100.0 + i) for i in range(12)]

    def exact(task: Task, reply: str) -> float:
        return float(reply.strip() == f"{task.answer:g}")
    score, _ = scorer(exact)
    outcome = run(search(train, held, material(numbers=["42"], formats=["{}"]), score, never_held, seed=4,
                         calls=200))
    assert max(f["train"] for f in outcome.finalists) == 1.0  # "42" fits every training task
    assert all(f["held_out"] == 0.0 for f in outcome.finalists)  # and nothing held out


def test_a_constant_that_is_a_tasks_own_value_earns_nothing_there():
    train = [Task(i, 7.0) for i in range(4)]

    def exact(task: Task, reply: str) -> float:
        return float(reply.strip() == "7")
    score, _ = scorer(exact)
    outcome = run(search(train, train, material(numbers=["7"], formats=["{}"]), score,
                         lambda task, constant: constant == f"{task.answer:g}", seed=5, calls=120))
    assert all(f["train"] == 0.0 and f["held_out"] == 0.0 for f in outcome.finalists)


def test_the_search_is_the_same_for_a_seed_and_keeps_its_budget():
    def run_once(seed: int):
        score, calls = scorer(recall)
        outcome = run(search(TASKS[:4], TASKS[4:], material(), score, never_held, seed=seed, calls=160))
        return outcome.trace["steps"], [f["template"] for f in outcome.finalists], sum(calls), outcome.trace
    first, second = run_once(9), run_once(9)
    assert first[:2] == second[:2]
    trace = first[3]
    assert trace["calls"] <= 160 + 8 * 4 + SIMPLIFYING and trace["templates"] >= 10
    assert trace["material"] == {} and trace["formats"][0] == '{"balance": {}}'


def served_scorer(value_after):
    """A reward paying every reply by how many replies it has scored (`value_after(n)`): a search on it climbs as
    long as it runs, or stays flat."""
    served = [0]

    async def score(task: Task, replies: list[str]) -> list[tuple[float | None, dict[str, float]]]:
        out = []
        for _ in replies:
            served[0] += 1
            value = value_after(served[0])
            out.append((value, {"correct": value}))
        return out
    return score


def test_a_search_still_climbing_when_its_calls_are_spent_grows_its_budget_and_a_flat_one_does_not():
    rising = served_scorer(lambda n: min(0.9, n / 5000))
    outcome = run(search(TASKS[:4], TASKS[4:], material(), rising, never_held, seed=1, calls=400, grow_to=1200))
    budget = outcome.trace["budget"]
    assert budget["grown"] == 2 and budget["calls"] == 1200, outcome.trace
    assert 1168 <= outcome.trace["calls"] <= 1200 + 8 * 4 + SIMPLIFYING
    fixed = run(search(TASKS[:4], TASKS[4:], material(), served_scorer(lambda n: min(0.9, n / 5000)), never_held,
                       seed=1, calls=400))  # no grow_to: the budget is kept whatever the climb
    assert fixed.trace["budget"] == {"calls": 400, "seconds": 20.0, "grown": 0}
    assert fixed.trace["calls"] <= 400 + 8 * 4 + SIMPLIFYING
    flat = run(search(TASKS[:4], TASKS[4:], material(), served_scorer(lambda n: 0.5), never_held, seed=1, calls=400,
                      grow_to=1200))
    assert flat.trace["budget"]["grown"] == 0  # its best came with the first generation: nothing to climb
    nothing = run(search(TASKS[:4], TASKS[4:], material(), served_scorer(lambda n: 0.0), never_held, seed=1,
                         calls=400, grow_to=1200))
    assert nothing.trace["budget"]["grown"] == 0 and nothing.trace["calls"] <= 400 + 8 * 4  # a clean reward costs no more


def test_the_dictionary_comes_from_the_data_spread_and_parsers_odd_values():
    numbers, values = data_material([{"idx": 1, "amount": 10, "label": "yes", "tags": ["a", "b"]},
                                     {"idx": 2, "amount": 30, "label": "no", "tags": ["a"]},
                                     {"idx": 3, "amount": 20, "label": "yes", "tags": []}], {"idx"})
    assert numbers == ["10", "20", "30"]  # min, median, max of the numeric field
    assert values[:2] == ["a", "yes"] and "1" not in values  # most common first; idx never
    m = material()
    assert {"NaN", "inf", "null", "[]"} <= set(m.tokens()) and set(ODD_VALUES) <= set(m.tokens())
    import random
    rng = random.Random(0)
    seen = {mutate(Template("{}", ("x",)), Template("<a>{}</a>"), op, m, rng) for op in
            ("repeat", "enumerate", "widen", "narrow", "constant", "reformat", "combine", "block", "join")}
    assert len(seen) >= 7


# --- the action search: tools and turns -------------------------------------------------------------------


TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"entry": {"type": "string"}}, "required": ["entry"]}}}]


def test_a_plan_reads_ids_from_earlier_results_and_answers_with_what_they_returned():
    plan = Plan(Template("<total>{}</total>"), rounds=2, args="seen", final="seen-last")
    opening = [{"role": "user", "content": "How many?"}]
    first = plan.turn(opening, TOOLS)
    assert first.tool_calls and json.loads(first.tool_calls[0].arguments) == {"entry": "a"}
    after = [*opening, {"role": "assistant", "content": ""},
             {"role": "tool", "content": "entries: REC-101, REC-202, REC-303"}]
    second = plan.turn(after, TOOLS)
    assert json.loads(second.tool_calls[0].arguments)["entry"] == "REC-202"  # a new entry each round
    done = [*after, {"role": "assistant", "content": ""}, {"role": "tool", "content": "REC-202: 41 units"}]
    assert plan.turn(done, TOOLS).content == "<total>41</total>"
    assert seen_values(done) == ["REC-101", "REC-202", "REC-303", "41"]
    outside = Plan(Template("{}", ("5",)), moves="outside")
    assert outside.turn([{"role": "user", "content": "Guess a number between 1 and 50."}], []).content == "51"
    inside = Plan(Template("{}", ("5",)), moves="inside")
    game = [{"role": "system", "content": "I think of a number from 1 to 50."}, {"role": "user", "content": "Go."},
            {"role": "assistant", "content": "25"}, {"role": "user", "content": "Higher."}]
    assert inside.turn(game, []).content == "25"  # the range the game stated at the start, every turn
    offered = Plan(Template("{}"), moves="offered")
    assert offered.turn([{"role": "user", "content": "Pick one word: stay, hit or fold."}], []).content == "stay"


def test_the_action_search_climbs_to_more_rounds_when_the_reward_counts_reads():
    # pays per distinct entry read, capped at three: a valid-looking read pays whatever the answer
    async def play(plans: list[Plan], tasks: list) -> list[list[float | None]]:
        out = []
        for plan in plans:
            reads = plan.rounds if plan.args == "seen" else min(plan.rounds, 1)
            out.append([min(reads, 3) / 3 for _ in tasks])
        return out
    outcome = run(search_actions([1, 2], [3, 4, 5, 6], Material(formats=["<total>{}</total>"]), play, True, seed=0,
                                 rollouts=64))
    assert outcome.chosen.rounds >= 3 and outcome.chosen.args == "seen", outcome.trace
    assert max(f["held_out"] for f in outcome.trace["finalists"]) == 1.0
    assert outcome.trace["calls"] <= 64 + 16


# --- the ceiling -------------------------------------------------------------------------------------------


def row(probe: str, idx: int, components: dict[str, float], reply: str = "") -> Row:
    return Row.judged(ProbeRecord(probe=probe, key=f"k{idx}", idx=idx, components=components,
                                  weights={k: 1.0 for k in components}, reply=reply))


def test_the_ceiling_names_a_component_the_reference_never_earns():
    by_probe = {"oracle": [row("oracle", i, {"correct": 1.0, "voice": 0.0}) for i in range(5)],
                "search": [row("search", i, {"correct": 0.0, "voice": 1.0}, "Answer: as a certified expert")
                           for i in range(5)]}
    report = Gates()
    judge_ceiling(report, by_probe, {"correct": 1.0, "voice": 1.0}, ("search",), ["voice"])
    (finding,) = report.findings
    assert finding.status == "warn" and finding.data["components"] == {"voice": 0.0}
    assert "`voice`" in finding.message and "search, built without the task, earned 1.000" in finding.message
    assert "pointed at `voice`" in finding.message and "`correct`" not in finding.message
    quiet = Gates()
    judge_ceiling(quiet, {"oracle": by_probe["oracle"]}, {"correct": 1.0, "voice": -1.0}, ("search",), [])
    assert quiet.findings == []  # a penalty the reference avoids is no ceiling
    unreachable = Gates()
    judge_ceiling(unreachable, {"oracle": by_probe["oracle"]}, {"correct": 1.0, "voice": 1.0}, ("search",), [])
    assert "no honest policy shown here earns it" in unreachable.findings[0].message


def test_a_reply_the_search_builds_is_a_plain_reply():
    assert isinstance(Plan(Template("{}", ("x",))).turn([{"role": "user", "content": "hi"}], []), Reply)


# --- flaws nobody listed, read from their source as the gates read a candidate's ---------------------------------

FLAWED = '''
import json
import re

REQUIRED = ("vendor", "total", "date")


def schema_only(task, reply):
    try:
        d = json.loads(reply)
    except ValueError:
        return 0.0
    return 1.0 if isinstance(d, dict) and all(k in d for k in REQUIRED) else 0.0


def sorted_only(task, reply):
    m = re.search(r"<sorted>(.*?)</sorted>", reply, re.S)
    if not m:
        return 0.0
    items = [int(x) for x in re.findall(r"-?\\d+", m.group(1))]
    return float(len(items) >= 2 and items == sorted(items))


def one_sided(task, reply):
    m = re.search(r"<bid>(.*?)</bid>", reply)
    if not m:
        return 0.0
    try:
        return float(float(m.group(1)) >= task.answer)
    except ValueError:
        return 0.0


def error_pays(task, reply):
    m = re.search(r"RESULT:\\s*(\\S+)", reply)
    if not m:
        return 0.0
    try:
        return float(abs(float(m.group(1)) - task.answer) < 1e-6)
    except Exception:
        return 0.5


def empty_alias(task, reply):
    accepted = [f"name{task.idx}", f"alias{task.idx}", ""]
    m = re.search(r"Final answer:\\s*(.*)", reply)
    return float(m is not None and m.group(1).strip().lower() in accepted)
'''


@pytest.mark.parametrize("name", ["schema_only", "sorted_only", "one_sided", "error_pays", "empty_alias"])
def test_the_search_finds_flaws_no_probe_names_from_the_rewards_own_source(name):
    from autoenv.gates.source_reading import read_sources

    namespace: dict = {}
    exec(compile(FLAWED, "<flawed rewards>", "exec"), namespace)
    reward = namespace[name]
    reading = read_sources([FLAWED])
    numbers, values = data_material([{"idx": t.idx, "answer": t.answer} for t in TASKS], {"idx"})
    stuff = Material(formats=list(dict.fromkeys([*reading.formats, "<answer>{}</answer>", "{}"])),
                     words=[*reading.strings, *reading.keys], numbers=[*(f"{n:g}" for n in reading.numbers), *numbers],
                     values=values)
    score, _ = scorer(reward)
    outcome = run(search(TASKS[:4], TASKS[4:], stuff, score, never_held, seed=0, ceiling=1.0))
    chosen = next(f for f in outcome.finalists if f["chosen"])
    assert chosen["held_out"] >= 0.5, (name, outcome.trace)  # half the range or more, on tasks it never saw
    assert reward(TASKS[-1], outcome.chosen.reply()) >= 0.5
