"""A gate's outcome is a function of the candidate, the config and the seed: never of the machine's load or of
the order rollouts start and finish in.

The rollout-mode audits (a two-seat game probed seat by seat, a tool env) are run twice with the same config and
seed, the second time beside a CPU hog (a busy loop per core), and their audit.json and gates.json compared after
the fields that are timings or random ids by design (episode ids, seconds) are left out. The scripted models' draws
were once seeded by verifiers' trace id, a fresh uuid per rollout: the duel's `garbage` reply then differed per
run, and its first seat scored 0.562 in one run against an allowance of 0.550 and less in the next.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from autoenv.core.paths import EXAMPLES
from tests.conftest import autoenv, small_config
from tests.cpu_hog import cpu_hog

TIMINGS = {"episode", "seconds", "probe_seconds", "load_seconds", "elapsed", "started", "duration"}
"""Fields that are wall-clock measurements or random ids by design, not gate evidence."""
TIMED_FINDINGS = {"load time"}
"""Findings whose message states a measured time: their status must agree, their words may not."""


def _stable(value: object) -> object:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in sorted(value.items()) if k not in TIMINGS}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def canonical(audit: dict, gates: dict) -> tuple[dict, list, list]:
    """What the gates judged: the audit's fields less timings, its probe records as a sorted list (records are
    appended in order of completion), and each finding's name, status and message."""
    rest = _stable({k: v for k, v in audit.items() if k != "probes"})
    records = sorted(json.dumps(_stable(r), sort_keys=True) for r in audit["probes"])
    findings = [(f["name"], f["status"], "" if f["name"] in TIMED_FINDINGS else f["message"]) for f in gates["findings"]]
    return rest, records, findings  # type: ignore[return-value]


def probe_once(env: Path, into: Path) -> tuple[dict, list, list]:
    into.mkdir()
    (into / "config.toml").write_text(small_config(rollout_sample=4, rollout_timeout=600))
    result = autoenv("probe", "--env", str(env), cwd=into)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    gates = max((into / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    return canonical(json.loads((gates.parent / "audit.json").read_text()), json.loads(gates.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("example", ["real-duel", "shopping"])
def test_a_rollout_mode_audit_is_the_same_under_a_cpu_hog(tmp_path, example):
    quiet = probe_once(EXAMPLES / example, tmp_path / "quiet")
    with cpu_hog():
        loaded = probe_once(EXAMPLES / example, tmp_path / "loaded")
    assert quiet[0] == loaded[0]
    assert quiet[2] == loaded[2], "a gate changed its finding under load"
    differ = sorted(set(quiet[1]) ^ set(loaded[1]))
    assert quiet[1] == loaded[1], f"{len(differ)} probe record(s) differ, e.g. {differ[:2]}"
    assert any('"probe": "garbage"' in r for r in quiet[1])  # the random probe was played, and replayed


def test_a_rollouts_draws_are_seeded_by_its_task_and_ordinal_never_by_verifiers_random_trace_id():
    """Two endpoints, as two runs: the same tasks' rollouts minted in another order under other trace ids get the
    same per-task draws (noisy-oracle's success, the garbage probe's words)."""
    from autoenv.core.messages import ChatRequest
    from autoenv.endpoint.server import Endpoint
    from autoenv.endpoint.policies import Policies

    def run(order: list[str]) -> dict[str, list[str]]:
        endpoint = Endpoint(Policies(seed=3))
        out: dict[str, list[str]] = {}
        for i, task in enumerate(order):
            session = uuid.uuid4().hex  # what verifiers sends: a fresh trace id per rollout
            endpoint.assign(session, task)
            rollout = endpoint.replay_id(session, "garbage", task)
            assert endpoint.replay_id(session, "garbage", task) == rollout  # fixed at the rollout's first request
            reply = endpoint.policies.reply(ChatRequest(model="garbage", messages=[{"role": "user", "content": "hi"}],
                                                        tools=[], session=session, task=task, rollout=rollout))
            out.setdefault(task, []).append(reply.content or "")
        return {task: sorted(replies) for task, replies in out.items()}

    first = run(["a", "b", "a", "c", "b", "a"])
    assert first == run(["b", "a", "a", "b", "c", "a"])  # another start order, other trace ids: the same draws
    assert len(set(first["a"])) == 1  # a content-free probe's reply is the task's, not the rollout's
    assert Endpoint(Policies()).replay_id("s1", "m", None) == "s1"  # no task known: the session, as before
