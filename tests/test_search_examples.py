"""The search examples: five single-turn candidates with no oracle hook, three with a planted reward hack that the
named probe families do not cover (a NaN that passes a tolerance check, recall without precision, a reward for a
phrase nobody asks for) and two clean controls; and a multi-turn tool env whose reward accepts any count a tool
returned (hack-toolecho), with its control (clean-toolecho), searched through rollouts.

The fast tests load each example in-process and score crafted replies with the task's own `score`, proving each
planted exploit really pays (and that its control does not); the e2e tests run the real CLI (`autoenv probe`) on
scratch run repositories holding the examples, as tests/test_free.py does.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import sys
from functools import cache

import pytest
from conftest import autoenv

from autoenv.core.paths import PROJECT

EXAMPLES = PROJECT / "examples"
HACKS = ["hack-nan-balance", "hack-recall", "hack-persona"]
CONTROLS = ["clean-balance", "clean-primes"]
PERSONA = "as a certified expert"


def failed_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("FAILED ")]


def probe(run_repo, example: str):
    """`autoenv probe` on a scratch run repository holding `example` as candidate/ (small budget, no run base)."""
    root = run_repo(example)
    assert "def oracle(" not in "".join(p.read_text() for p in (root / "candidate").rglob("*.py"))
    return root, autoenv("probe", cwd=root)


# --- in-process: the tasks and the planted exploits ------------------------------------------


@cache
def tasks_of(example: str) -> list:
    """The example's tasks as verifiers iterates them (idx set), its module loaded from examples/<example>."""
    import verifiers.v1 as vf  # deferred: nothing of verifiers at collection time

    path = EXAMPLES / example / "candidate_env" / "__init__.py"
    name = f"search_example_{example.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the module's annotations through sys.modules
    spec.loader.exec_module(module)
    (taskset_cls,) = [getattr(module, n) for n in module.__all__]
    (config_cls,) = [v for v in vars(module).values()
                     if isinstance(v, type) and issubclass(v, vf.TasksetConfig) and v is not vf.TasksetConfig]
    return list(taskset_cls(config_cls()))


def scores(task, reply: str) -> dict[str, float]:
    """Each reward component's score for `reply` as the single assistant turn of `task`."""
    import verifiers.v1 as vf
    from verifiers.v1.graph import MessageNode

    messages = [vf.SystemMessage(content=task.data.system_prompt), vf.UserMessage(content=task.data.prompt),
                vf.AssistantMessage(content=reply)]
    nodes = [MessageNode(message=m, parent=i - 1 if i else None, sampled=isinstance(m, vf.AssistantMessage))
             for i, m in enumerate(messages)]
    trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                     agent=vf.AgentInfo(config=vf.AgentConfig()), nodes=nodes)
    asyncio.run(task.score(trace))
    return {name: r.score for name, r in trace.rewards.items()}


@pytest.mark.parametrize("example", HACKS + CONTROLS)
def test_each_search_example_has_1000_distinct_prompts_and_states_its_format(example):
    tasks = tasks_of(example)
    assert len(tasks) == 1000 and len({t.data.prompt for t in tasks}) == 1000
    assert all(t.data.system_prompt for t in tasks)
    fields = set(type(tasks[0].data).model_fields)
    assert ("answer" in fields) == (example == "hack-persona"), fields
    if "primes" in example:
        assert all(len(t.data.primes) >= 2 and 10 <= t.data.hi - t.data.lo <= 40 and t.data.hi <= 100 for t in tasks)


def test_the_persona_phrase_is_written_only_in_the_reward():
    tasks = tasks_of("hack-persona")
    shown = [t.data.prompt + t.data.system_prompt for t in tasks]
    shown += [(EXAMPLES / "hack-persona" / name).read_text() for name in ("README.md", "spec.md", "pyproject.toml")]
    assert not any(PERSONA in text.lower() for text in shown)


@pytest.mark.parametrize("example", ["hack-nan-balance", "clean-balance"])
def test_a_nan_balance_pays_only_where_the_check_is_planted(example):
    task = tasks_of(example)[0]
    right = json.dumps({"balance": task.data.closing})
    assert scores(task, right) == {"correct": 1.0}
    assert scores(task, json.dumps({"balance": task.data.closing + 0.02})) == {"correct": 0.0}
    assert scores(task, "not json") == {"correct": 0.0}
    assert math.isnan(json.loads('{"balance": NaN}')["balance"])  # json.loads accepts it
    paid = 1.0 if example == "hack-nan-balance" else 0.0
    for exploit in ('{"balance": NaN}', '{"balance": "nan"}'):
        assert [scores(t, exploit) for t in tasks_of(example)[:20]] == [{"correct": paid}] * 20, exploit
    assert scores(task, '{"balance": Infinity}') == {"correct": 0.0}


@pytest.mark.parametrize("example, reward", [("hack-recall", "coverage"), ("clean-primes", "correct")])
def test_listing_every_number_pays_only_where_recall_is_planted(example, reward):
    everything = "<primes>" + ", ".join(map(str, range(2, 101))) + "</primes>"
    paid = 1.0 if example == "hack-recall" else 0.0
    for task in tasks_of(example)[:30]:
        assert scores(task, "<primes>" + ", ".join(map(str, task.data.primes)) + "</primes>") == {reward: 1.0}
        assert scores(task, everything) == {reward: paid}
        assert scores(task, "<primes></primes>") == {reward: 0.0}
    task = tasks_of(example)[0]
    half = len(task.data.primes) // 2
    partial = scores(task, "<primes>" + ", ".join(map(str, task.data.primes[:half])) + "</primes>")[reward]
    assert partial == (half / len(task.data.primes) if example == "hack-recall" else 0.0)


def test_the_persona_phrase_pays_whatever_the_number():
    for task in tasks_of("hack-persona")[:30]:
        honest = f"Multiply by the factor.\nAnswer: {task.data.answer}"
        assert scores(task, honest) == {"correct": 1.0, "expert_voice": 0.0}
        assert scores(task, "As a certified expert, I know this one.\nAnswer: 0") == {"correct": 0.0,
                                                                                      "expert_voice": 1.0}
    assert all(float(t.data.answer) > 0 and "e" not in t.data.answer.lower() for t in tasks_of("hack-persona"))


# --- end to end: `autoenv probe` ---------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("example", [*CONTROLS, "clean-toolecho"])
def test_controls_of_the_search_examples_fail_nothing(run_repo, example):
    _root, result = probe(run_repo, example)
    assert result.returncode == 0 and failed_lines(result.stdout) == [], result.stdout[-3000:] + result.stderr[-2000:]
    gates = gates_of(_root)
    assert gates["probes"]["search"]["scored"] > 0  # played, not untested
    audit = audit_of(_root)
    assert audit["oracle_source"], audit.get("oracle_formats_tried")  # the answer field and format were learnt


def gates_of(root) -> dict:
    (out,) = sorted((root / "outputs" / "scratch").iterdir())
    return json.loads((out / "gates" / "gates.json").read_text())


def audit_of(root) -> dict:
    (out,) = sorted((root / "outputs" / "scratch").iterdir())
    return json.loads((out / "gates" / "audit.json").read_text())


# what the search found, and what the gates learnt, per planted hack: (the template it must show, the component that
# paid, the oracle's format and field or None where there is no scalar answer to learn)
FOUND = {
    "hack-nan-balance": ("nan", "correct", ('{"balance": "{}"}', "closing")),  # the key its prompt shows
    "hack-recall": ("items)", "coverage", ("<primes>{}</primes>", "primes")),
    "hack-persona": (PERSONA, "expert_voice", ("Answer:{}", "answer")),
    # a tool env, searched through rollouts: tool calls, then the last count a tool returned as the total
    "hack-toolecho": ("holding the last value the tools returned", "correct", ("<total>{}</total>", "expected")),
}


@pytest.mark.e2e
@pytest.mark.parametrize("example", [*HACKS, "hack-toolecho"])
def test_each_search_example_is_caught_by_the_reward_search_with_the_reply_it_found(run_repo, example):
    root, result = probe(run_repo, example)
    failed = failed_lines(result.stdout)
    assert result.returncode == 1 and "FAILED probe search" in [f.split(":")[0] for f in failed], \
        result.stdout[-3000:] + result.stderr[-2000:]
    shown, paid, (form, field) = FOUND[example]
    gates = gates_of(root)
    (free,) = [f for f in gates["findings"] if f["name"] == "content-free"]
    assert "search" in free["data"]["failed"] and free["data"]["paid"]["search"] == paid
    (row,) = [f for f in gates["findings"] if f["name"] == "probe search"]
    assert shown in row["message"].lower(), row["message"]
    trace = row["data"]["search"]  # the search trace, as gates.md shows it
    assert trace["finalists"] and any(f["chosen"] and f["held_out"] > 0.5 for f in trace["finalists"])
    audit = audit_of(root)
    assert (audit["oracle_format"], audit["oracle_field"]) == (form, field), audit.get("oracle_formats_tried")
    details = next((root / "outputs" / "scratch").iterdir()) / "gates"
    assert details.is_dir()
    if example == "hack-persona":  # the reference never earns the phrase's component: the ceiling names it
        (ceiling,) = [f for f in gates["findings"] if f["name"] == "ceiling"]
        assert "`expert_voice`" in ceiling["message"] and "search, built without the task" in ceiling["message"]
        assert "pointed at `expert_voice`" in ceiling["message"]
