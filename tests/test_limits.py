"""Per-call time limits: a reward, load() or oracle hook that never returns is stopped and named, not waited for."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from cpu_hog import slack

from autoenv.child.limits import TimeLimitExceeded, run_limited
from autoenv.core.job import AuditPlan, CallLimits, Job
from autoenv.core.paths import EXAMPLES
from autoenv.sandbox.rollouts import Worker


def hostile_module(tmp_path: Path, name: str):
    """A module `name` in its own folder under tmp_path (the candidate's source), and that folder."""
    source = tmp_path / "hostile"
    source.mkdir()
    (source / f"{name}.py").write_text(
        "import asyncio, time\n"
        "def blocks():\n"
        "    time.sleep(3600)\n"
        "async def awaits():\n"
        "    await asyncio.sleep(3600)\n")
    sys.path.insert(0, str(source))
    return importlib.import_module(name), source


def test_a_blocking_call_is_stopped_at_its_limit_and_named(tmp_path):
    hostile_rewards, source = hostile_module(tmp_path, "hostile_blocks")

    started = time.time()
    with pytest.raises(TimeLimitExceeded) as caught:
        run_limited(hostile_rewards.blocks, 0.5, "reward 'blocks' on task idx 7", str(source))
    assert time.time() - started < 3
    assert str(caught.value).startswith("reward 'blocks' on task idx 7 did not return within 0.5 s")
    assert "stuck at hostile_blocks.py:3 in blocks" in str(caught.value)


def test_an_await_that_never_returns_is_stopped_and_named(tmp_path):
    hostile_rewards, source = hostile_module(tmp_path, "hostile_awaits")

    with pytest.raises(TimeLimitExceeded) as caught:
        run_limited(hostile_rewards.awaits, 0.5, "reward 'awaits'", str(source))
    assert "stuck at hostile_awaits.py:5 in awaits" in str(caught.value)


def test_results_and_errors_pass_through():
    assert run_limited(lambda: 41 + 1, 5, "sum") == 42

    async def twice(x):
        return 2 * x

    assert run_limited(lambda: twice(4), 5, "twice") == 8
    with pytest.raises(ZeroDivisionError):
        run_limited(lambda: 1 / 0, 5, "divide")


def limited_task(tmp_path: Path, name: str, seconds: float):
    """A task class of the candidate's (its module under tmp_path) whose reward blocks for an hour on reply
    "hang" and whose metric echoes the reply, both limited as the audit limits them; and that source folder."""
    from autoenv.child.limits import limit_hooks

    source = tmp_path / "hostile"
    source.mkdir()
    (source / f"{name}.py").write_text(
        "import time\n"
        "class Data:\n"
        "    idx = 7\n"
        "class Task:\n"
        "    data = Data()\n"
        "    async def score(self, reply):\n"
        "        if reply == 'hang':\n"
        "            time.sleep(3600)\n"
        "        return 1.0\n"
        "    score.reward = True\n"
        "    async def echo(self, reply):\n"
        "        return reply\n"
        "    echo.metric = True\n")
    sys.path.insert(0, str(source))
    task_cls = importlib.import_module(name).Task
    limit_hooks(task_cls, seconds, "audit", str(source))
    return task_cls(), source


def test_a_watched_batch_runs_its_calls_in_one_hop_and_passes_values_through(tmp_path):
    from autoenv.child.limits import batchable, run_watched

    task, source = limited_task(tmp_path, "hostile_watched_ok", 5)
    assert batchable([task.score, task.echo])

    async def batch():
        return [(await task.score(str(i)), await task.echo(str(i))) for i in range(3)]

    assert asyncio.run(run_watched(batch, str(source))) == [(1.0, "0"), (1.0, "1"), (1.0, "2")]
    assert not batchable([lambda: None])  # not limited: never run inside a batch


@pytest.mark.slow
def test_a_call_stuck_inside_a_watched_batch_is_named_as_a_lone_call_is(tmp_path):
    from autoenv.child.limits import Breached, breaches, fresh_breaches, run_watched, watch_stopped, watch_unit

    task, source = limited_task(tmp_path, "hostile_watched_hang", 0.5)
    done = []

    async def batch():
        for i, reply in enumerate(("a", "hang", "b")):
            if watch_stopped():
                return
            watch_unit(i)
            done.append(await task.score(reply))

    started = time.time()
    with pytest.raises(Breached) as caught:
        asyncio.run(run_watched(batch, str(source)))
    assert time.time() - started < slack(3, cap=3)  # one limit, not the batch's
    assert done == [1.0] and caught.value.unit == 1
    (message,) = caught.value.fresh.values()
    assert message.startswith("reward 'score' on task idx 7 in the audit stage did not return within 0.5 s")
    assert "stuck at hostile_watched_hang.py:8 in score" in message
    assert message not in breaches()  # not yet: the replies beside the stuck one are scored first, as lone calls
    assert asyncio.run(task.score("b")) == 1.0
    with fresh_breaches(caught.value.fresh):  # the stuck reply scored again reads as the breach itself
        with pytest.raises(TimeLimitExceeded) as again:
            asyncio.run(task.score("hang"))
    assert str(again.value) == message and message in breaches()
    with pytest.raises(TimeLimitExceeded, match="; not called again$"):  # every later call: at once
        asyncio.run(task.score("b"))


def test_a_reward_that_waits_is_not_batched_again(tmp_path):
    """A batch runs its replies one after another: a reward that awaits (a grader's HTTP round trip) or blocks
    keeps lone calls, whose waits overlap; one that only computes stays batched."""
    from autoenv.child.limits import batchable, limit_hooks, run_watched

    class Waits:
        data = None

        async def computes(self):
            return sum(range(100))
        computes.reward = True  # type: ignore[attr-defined]

        async def awaits(self):
            await asyncio.sleep(0)
            return 1.0
        awaits.reward = True  # type: ignore[attr-defined]

        async def blocks(self):
            time.sleep(0.3)
            return 1.0
        blocks.reward = True  # type: ignore[attr-defined]

        async def naps(self):
            time.sleep(0.1)
            return 1.0
        naps.reward = True  # type: ignore[attr-defined]

        async def in_runtime(self, runtime=None):
            return 1.0
        in_runtime.reward = True  # type: ignore[attr-defined]

    limit_hooks(Waits, 5, "audit", str(tmp_path))
    task = Waits()
    assert not batchable([task.in_runtime])  # verifiers' runtime: limited in the caller's loop, never batched
    hooks = [task.computes, task.awaits, task.blocks, task.naps]
    assert all(batchable([hook]) for hook in hooks)

    async def batch():
        return [await hook() for hook in hooks[:3]] + [await task.naps() for _ in range(4)]

    assert asyncio.run(run_watched(batch)) == [4950, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    # blocks: 0.3 s in one call; naps: 0.1 s a call, 0.4 s over the batch
    assert [batchable([hook]) for hook in hooks] == [True, False, False, False]


@pytest.mark.slow
def test_a_reward_slow_only_beside_its_own_calls_runs_one_at_a_time_and_passes(tmp_path):
    """A verifier that holds the machine while it runs (gsm8k's `uv run verify.py` on two loaded cores): six calls
    at once would each wait for the ones before it, the last six times one call, past a limit one call is well
    within. Its first call runs alone and is measured, over half its limit: its calls run one at a time."""
    import threading

    from autoenv.child.limits import breaches, limit_hooks

    machine = threading.Lock()

    def verify() -> float:
        with machine:
            time.sleep(0.3)
        return 1.0

    class Verified:
        data = None

        async def lone(self):
            return verify()
        lone.reward = True  # type: ignore[attr-defined]

        async def in_runtime(self, runtime=None):
            return await asyncio.to_thread(verify)
        in_runtime.reward = True  # type: ignore[attr-defined]

    limit_hooks(Verified, 0.5, "audit", str(tmp_path))
    task = Verified()

    async def at_once():
        return await asyncio.gather(*(task.lone() for _ in range(6)), *(task.in_runtime() for _ in range(6)))

    assert asyncio.run(at_once()) == [1.0] * 12
    assert not [b for b in breaches() if "Verified" in b or "'lone'" in b or "'in_runtime'" in b]


def test_a_reward_slow_even_alone_is_named_slow_and_one_that_never_returns_a_hang(tmp_path):
    from autoenv.child.limits import HANG_FACTOR, limit_hooks

    class Slow:
        data = None

        async def slow(self):
            time.sleep(0.4)
            return 1.0
        slow.reward = True  # type: ignore[attr-defined]

        async def hangs(self, runtime=None):
            await asyncio.sleep(3600)
        hangs.reward = True  # type: ignore[attr-defined]

    limit_hooks(Slow, 0.2, "audit", str(tmp_path))
    task = Slow()
    with pytest.raises(TimeLimitExceeded) as slow:  # returned both times, past its limit: retried once, given up
        asyncio.run(task.slow())
    assert re.fullmatch(r"reward 'slow' on task idx None in the audit stage was slow \(0\.\d s, then 0\.\d s alone\): "
                        r"past its limit of 0\.2 s, not a hang \(it returned\); make it faster or raise "
                        r"checks\.max_reward_seconds", str(slow.value)), str(slow.value)
    with pytest.raises(TimeLimitExceeded, match="; not called again$"):
        asyncio.run(task.slow())

    async def both():
        return await asyncio.gather(task.hangs(), task.hangs(), return_exceptions=True)

    started = time.time()
    first, second = asyncio.run(both())
    assert str(first) == (f"reward 'hangs' on task idx None in the audit stage did not return within 0.2 s nor within "
                          f"{0.2 * HANG_FACTOR:g} s (a hang)")
    assert str(second) == f"{first}; not called again"  # it waited its turn behind the hang, and was not made
    assert time.time() - started < slack(2 * 0.2 * HANG_FACTOR, cap=3)


def hostile_candidate(tmp_path: Path, where: str) -> Path:
    """examples/arithmetic whose `where` (a line of its taskset.py) is followed by a sleep of an hour."""
    target = tmp_path / "candidate"
    shutil.copytree(EXAMPLES / "arithmetic", target, ignore=shutil.ignore_patterns("__pycache__"))
    taskset = target / "candidate_env" / "taskset.py"
    text = taskset.read_text()
    assert where in text
    taskset.write_text(text.replace(where, where + "        import time; time.sleep(3600)\n"))
    return target


def audit_of(candidate: Path, out: Path, **limits: float) -> dict:
    plan = AuditPlan(probe_sample=4, rollout_sample=1, near_threshold=0.9, exploits=8)
    job = Job(candidate_dir=str(candidate), out_dir=str(out), audit=plan, limits=CallLimits(**limits))
    with Worker(job) as worker:
        worker.run("audit")
    return json.loads((out / "gates" / "audit.json").read_text())


@pytest.mark.slow
@pytest.mark.attack
def test_a_reward_sleeping_forever_is_a_named_environment_error_not_a_deadline(tmp_path, attack_row):
    candidate = hostile_candidate(tmp_path, "    async def correct(self, trace: vf.Trace) -> float:\n")
    started = time.time()
    audit = audit_of(candidate, tmp_path / "out", reward_seconds=1)
    assert time.time() - started < slack(60, cap=3)  # one limit, not one per reply, and never the stage deadline
    (hung,) = audit["time_limits"]
    assert hung.startswith("reward 'correct' on task idx ") and "in the audit stage did not return within 1 s" in hung
    assert "stuck at candidate_env/taskset.py:" in hung and "in correct" in hung
    errors = [r["error"] for r in audit["probes"] if r.get("error")]
    assert errors and all("reward 'correct'" in e for e in errors)
    attack_row("reward sleeping forever (reward limit 1 s)",
               f"stopped after {time.time() - started:.0f} s: {hung}; {len(errors)} probe(s) env_error")


@pytest.mark.slow
@pytest.mark.attack
def test_a_load_sleeping_forever_is_stopped_at_its_limit_and_named(tmp_path, attack_row):
    candidate = hostile_candidate(tmp_path, "    def load(self) -> list[ArithmeticTask]:\n")
    started = time.time()
    # 10 s, not less: the limit covers the taskset module's first import too, slow on a loaded machine
    audit = audit_of(candidate, tmp_path / "out", load_seconds=10)
    assert time.time() - started < slack(60, cap=3)
    (hung,) = audit["time_limits"]
    assert hung.startswith("the taskset's load() in the audit stage (checks.max_load_seconds) did not return within 10 s")
    assert "candidate_env/taskset.py:" in hung and "in load" in hung
    assert "load_seconds" not in audit and "probes" not in audit
    attack_row("load() sleeping forever (load limit 10 s)", f"stopped after {time.time() - started:.0f} s: {hung}")


@pytest.mark.slow
@pytest.mark.attack
def test_a_tool_sleeping_forever_is_a_named_environment_error(tmp_path, attack_row):
    target = tmp_path / "candidate"
    shutil.copytree(EXAMPLES / "shopping", target, ignore=shutil.ignore_patterns("__pycache__"))
    tools = target / "candidate_env" / "tools.py"
    where = '        """Unit price of a catalog item, e.g. price(item="blue ceramic mug")."""\n'
    assert where in tools.read_text()
    tools.write_text(tools.read_text().replace(where, where + "        import time; time.sleep(3600)\n"))
    plan = AuditPlan(probe_sample=2, rollout_sample=1, near_threshold=0.9, exploits=8)
    job = Job(candidate_dir=str(target), out_dir=str(tmp_path / "out"), audit=plan, rollout_timeout=60,
              max_concurrent=4, limits=CallLimits(tool_seconds=3))
    with Worker(job) as worker:
        worker.run("audit")
    audit = json.loads((tmp_path / "out" / "gates" / "audit.json").read_text())
    oracle = next(r for r in audit["probes"] if r["probe"] == "oracle")
    assert oracle["outcome"] == "env_error"
    assert oracle["error"] == (f"tool 'catalog_price' on task idx {oracle['idx']} in the audit stage did not return "
                               "within 3 s (checks.max_tool_seconds)")
    assert oracle["error"] in audit["time_limits"]
    attack_row("tool sleeping forever (tool limit 3 s)", f"oracle probe {oracle['outcome']}: {oracle['error']}")


@pytest.mark.slow
def test_a_reward_returning_a_string_is_a_named_environment_error(tmp_path):
    """A real candidate whose reward returns "1.0": never coerced, an environment error naming the reward."""
    target = tmp_path / "candidate"
    shutil.copytree(EXAMPLES / "arithmetic", target, ignore=shutil.ignore_patterns("__pycache__"))
    taskset = target / "candidate_env" / "taskset.py"
    text = taskset.read_text()
    line = "        return float(_as_int(tags[0]) == int(self.data.answer))\n"
    assert line in text
    taskset.write_text(text.replace(line, "        return str(float(_as_int(tags[0]) == int(self.data.answer)))\n"))
    audit = audit_of(target, tmp_path / "out")
    errors = [r["error"] for r in audit["probes"] if r.get("error")]
    assert errors, audit["probes"][:3]
    assert any("reward 'correct' on task idx" in e and "returned str '1.0'" in e
               and "a reward must return a real number (bool, int or float)" in e for e in errors), errors[:3]


def test_real_numbers_pass_and_others_are_named():
    from autoenv.child.limits import RewardValueError, real_number
    assert real_number(True, "r") is True and real_number(3, "r") == 3 and real_number(0.5, "r") == 0.5
    for value in ("0.5", None, [1.0], {"score": 1}):
        with pytest.raises(RewardValueError, match="reward 'x' returned"):
            real_number(value, "reward 'x'")


def test_cpythons_false_ast_depth_error_is_retried_and_one_raised_on_purpose_is_not_hidden(tmp_path):
    """CPython 3.11's AST constructor shares its depth counter between threads (gh-106905): `ast.parse` in a reward
    can raise "AST constructor recursion depth mismatch" when another thread builds an AST at that instant, as the
    child's reward workers do. Such a call is made once more, lone or inside a watched batch; a reward raising it
    every time (on purpose, or for real) is charged as any error is."""
    from autoenv.child.limits import limit_hooks, run_watched

    race = "AST constructor recursion depth mismatch (before=18, after=13)"
    calls: list[str] = []

    class Parses:
        data = None

        async def once(self, code="1 + 1"):
            calls.append("once")
            if calls.count("once") in (1, 3):  # the race hit the first call, then the third
                raise SystemError(race)
            import ast
            return float(isinstance(ast.parse(code), ast.Module))
        once.reward = True  # type: ignore[attr-defined]

        async def always(self):
            calls.append("always")
            raise SystemError(race)
        always.reward = True  # type: ignore[attr-defined]

        async def other(self):
            calls.append("other")
            raise SystemError("some other interpreter error")
        other.reward = True  # type: ignore[attr-defined]

    limit_hooks(Parses, 5, "audit", str(tmp_path))
    task = Parses()
    assert asyncio.run(task.once()) == 1.0 and calls.count("once") == 2

    async def batch():
        return await task.once()

    assert asyncio.run(run_watched(batch)) == 1.0 and calls.count("once") == 4
    with pytest.raises(SystemError, match="^AST constructor recursion depth mismatch"):
        asyncio.run(task.always())
    assert calls.count("always") == 2  # tried twice, then charged
    with pytest.raises(SystemError, match="^some other interpreter error$"):
        asyncio.run(task.other())
    assert calls.count("other") == 1  # any other error: never retried
