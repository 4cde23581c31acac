"""The many-strategy probes through real rollouts (autoenv.child.rollout_probes.play_trials).

In process, near-miss, shape-fill, field-copy and grader-attack try every strategy on every task and the best counts.
Through rollouts (a tool env, an Env of its own, a runtime) each used to play its first strategy only, and field-copy
not at all: a sign flipped was tried where a number times ten was the flaw, and data written back never. Now each
strategy plays a few trial tasks and the best plays the rest. Each planted single-turn env here is played through an
Env of its own (appended to its module by `in_env`), so the same flaws are caught on the rollouts path; its clean
version stays clean there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenv.core.messages import Reply
from autoenv.gates.probes import probe_reply, strategy_names
from tests.test_real_shapes import DATA, planted, probe_env


def reply(name: str, strategy: str | None, **kw) -> str | None:
    found = probe_reply(name, oracle=Reply(content="The total is <answer>42</answer>."), answer="42",
                        answers=["7", "42"], messages=[{"role": "user", "content": "Add 40 and 2."}], tools=[], key="k",
                        strategy=strategy, **kw)
    return None if found is None else found.content


def test_the_endpoint_plays_the_strategy_named_and_nothing_where_the_task_has_none_of_that_name():
    names = strategy_names("near-miss", answer="42", answers=["7", "42"], messages=[])
    assert names == ["sign flipped", "times ten", "digits swapped", "off by one"]
    assert reply("near-miss", None) == "The total is <answer>-42</answer>."  # the first, as before
    assert reply("near-miss", "times ten") == "The total is <answer>420</answer>."
    assert reply("near-miss", "no such change") is None
    fields = {"items": 3, "day": "Monday"}
    assert strategy_names("field-copy", answer="42", answers=[], messages=[], fields=fields) == [
        "`items`", "`items` in words", "`day`"]
    assert reply("field-copy", "`items` in words", fields=fields) == "The total is <answer>three</answer>."
    script = [{"role": "user", "content": "Write a Python program that reads standard input and prints the sum."}]
    programs = strategy_names("grader-attack", answer=None, answers=[], messages=script)
    assert len(programs) == 3 and "expected output read from its surroundings" in programs


def in_env(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """tests/data/<name> with `old` changed to `new` and an Env of its own exported: the audit plays it as rollouts."""
    env = planted(tmp_path, name, old, new)
    source = next(env.glob("*/__init__.py"))
    text = source.read_text()
    source.write_text(text + "\n\nclass OwnEnv(vf.SingleAgentEnv):\n    pass\n\n\n__all__ = [*__all__, \"OwnEnv\"]\n")
    return env


def played(audit: dict, probe: str) -> list[dict]:
    return [r for r in audit["probes"] if r["probe"] == probe and not r.get("skipped")]


@pytest.mark.slow
def test_data_written_back_is_caught_through_rollouts_and_the_answer_check_is_clean(tmp_path):
    flawed = in_env(tmp_path / "a", "order-total", 'CHECK = "answer"', 'CHECK = "any field"')
    findings, audit = probe_env(flawed, tmp_path / "any", rollout_sample=5)
    assert audit["mode"] == "rollouts"
    copy = findings["probe field-copy"]
    assert copy["status"] == "fail" and "best field: `" in copy["message"], copy
    records = played(audit, "field-copy")
    assert len(records) == 5 and min(r["strategies"] for r in records) >= 2  # several fields tried, one kept
    clean = in_env(tmp_path / "b", "order-total", 'CHECK = "answer"', 'CHECK = "answer"')
    findings, audit = probe_env(clean, tmp_path / "answer", rollout_sample=5)
    assert findings["probe field-copy"]["status"] == "pass" and played(audit, "field-copy")
    assert not [n for n, f in findings.items() if f["status"] == "fail"], findings


@pytest.mark.slow
def test_a_mapping_checked_by_its_values_types_is_caught_through_rollouts(tmp_path):
    """Caught by the second filling (one value under every key); the first (keys, empty values) is refused."""
    flawed = in_env(tmp_path, "city-facts", 'CHECK = "values"', 'CHECK = "types"')
    findings, audit = probe_env(flawed, tmp_path / "types", rollout_sample=5)
    fill = findings["probe shape-fill"]
    assert audit["mode"] == "rollouts" and fill["status"] == "fail", fill
    assert {r["strategy"] for r in played(audit, "shape-fill")} == {"one value for every key"}


@pytest.mark.slow
def test_a_count_off_by_one_is_caught_through_rollouts(tmp_path):
    """Not the first change near-miss makes (the sign flipped, refused here): one played only as a later strategy."""
    flawed = in_env(tmp_path, "abs-compare", "float(got == want if SIGNED else abs(got) == abs(want))",
                    "float(abs(got - want) <= 1)")
    findings, audit = probe_env(flawed, tmp_path / "near", rollout_sample=6)
    miss = findings["probe near-miss"]
    assert audit["mode"] == "rollouts" and miss["status"] == "fail", miss
    assert {r["strategy"] for r in played(audit, "near-miss")} == {"off by one"}, miss
