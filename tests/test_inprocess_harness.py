"""The in-process harness against verifiers' stock null harness: same tasks, same results.

Every case runs real rollouts of the real examples in a fresh interpreter
(tests/harness_pair.py) through both harnesses against the project's endpoint on
127.0.0.1, and compares what the statistics read from each trace: rewards and their
components, turns, tool calls, token usage, stop conditions, error types and the outcome
(ok, provider_error, timeout, env_error). Faults are injected at rate 1 so every request of
both runs meets the same one. Stock rollouts cost ~1.3 s each on 2 cores: a handful of tasks
per case.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autoenv.core.paths import EXAMPLES
from autoenv.sandbox.rollouts import child_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
PAIR = Path(__file__).with_name("harness_pair.py")
BOTH = ["stock", "inprocess"]


def run_pair(tmp_path: Path, candidate: Path, **spec) -> dict:
    spec = {"candidate_dir": str(candidate), "harnesses": BOTH, **spec}
    path = tmp_path / f"spec-{len(list(tmp_path.glob('spec-*')))}.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(PAIR), str(path)], capture_output=True, text=True, timeout=600,
                          env=child_env(candidate), cwd=candidate)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def comparable(records: list[dict]) -> list[dict]:
    # Error messages carry ids, ports and tracebacks; their types and the outcome are compared.
    return [{k: v for k, v in r.items() if k != "error"} for r in records]


def assert_same(result: dict, tasks: int) -> list[dict]:
    stock, ours = result["stock"]["records"], result["inprocess"]["records"]
    assert len(stock) == len(ours) == tasks
    assert comparable(ours) == comparable(stock)
    return ours


def test_single_turn_rewards_tokens_and_outcomes_agree(tmp_path):
    (rec := assert_same(run_pair(tmp_path, EXAMPLES / "arithmetic", model="oracle", tasks=4), 4))
    assert {r["outcome"] for r in rec} == {"ok"} and all(r["reward"] == 1.0 for r in rec)
    assert all(r["turns"] == 1 and r["input_tokens"] > 0 and r["output_tokens"] > 0 for r in rec)


def test_wrong_answers_score_zero_through_both(tmp_path):
    rec = assert_same(run_pair(tmp_path, EXAMPLES / "arithmetic", model="wrong-answer", tasks=3), 3)
    assert {r["reward"] for r in rec} == {0.0}


def test_mcp_tool_calls_agree(tmp_path):
    rec = assert_same(run_pair(tmp_path, EXAMPLES / "shopping", model="oracle", tasks=3), 3)
    assert all(r["outcome"] == "ok" and r["tool_calls"] >= 1 and r["reward"] > 0 for r in rec)


def test_max_turns_reached_agrees(tmp_path):
    rec = assert_same(run_pair(tmp_path, EXAMPLES / "shopping", model="tool-spam", tasks=2, max_turns=2), 2)
    assert all(r["turns"] == 2 and r["tool_calls"] > 0 for r in rec)
    assert {r["stop_condition"] for r in rec} == {"max_turns"}


@pytest.mark.parametrize("fault, outcome", [("rate_429", "provider_error"), ("rate_500", "provider_error"),
                                            ("rate_cut", "provider_error")])
def test_provider_faults_classify_alike(tmp_path, fault, outcome):
    rec = assert_same(run_pair(tmp_path, EXAMPLES / "arithmetic", model="oracle", tasks=2, faults={fault: 1.0}), 2)
    assert {r["outcome"] for r in rec} == {outcome}


def test_hang_and_rollout_timeout_classify_alike(tmp_path):
    result = run_pair(tmp_path, EXAMPLES / "arithmetic", model="oracle", tasks=2, rollout_timeout=3,
                      faults={"rate_hang": 1.0, "hang_seconds": 60})
    assert {r["outcome"] for r in assert_same(result, 2)} == {"timeout"}
    slow = run_pair(tmp_path, EXAMPLES / "arithmetic", model="oracle", tasks=2, rollout_timeout=2, faults={"latency": 4})
    assert {r["outcome"] for r in assert_same(slow, 2)} == {"timeout"}


def test_reward_that_raises_is_an_env_error_through_both(tmp_path):
    candidate = tmp_path / "raising"
    shutil.copytree(EXAMPLES / "arithmetic", candidate, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    source = candidate / "candidate_env" / "taskset.py"
    text, count = re.subn(r"(async def correct\(self, trace: vf\.Trace\) -> float:\n)",
                          r'\1        raise ValueError("planted reward failure")\n', source.read_text())
    assert count == 1
    source.write_text(text)
    rec = assert_same(run_pair(tmp_path, candidate, model="oracle", tasks=2), 2)
    assert {r["outcome"] for r in rec} == {"env_error"} and all(r["reward"] is None for r in rec)


def test_200_concurrent_rollouts_leak_no_descriptors(tmp_path):
    result = run_pair(tmp_path, EXAMPLES / "arithmetic", model="oracle", tasks=200, concurrency=200, warmup=200,
                      harnesses=["inprocess"], hold_clients=True)
    ours = result["inprocess"]
    assert len(ours["records"]) == 200 and {r["outcome"] for r in ours["records"]} == {"ok"}
    assert result["clients"] == {"opened": 400, "closed": 400}  # warm-up and measured rollouts
    # Descriptors other than verifiers' keep-alive pool to the model endpoint (its size
    # follows concurrency and an idle timer, not rollouts) must not grow.
    assert ours["fds_after"] - ours["pooled_after"] <= ours["fds_before"] - ours["pooled_before"], ours
    assert ours["pooled_after"] <= 2 * 200  # both ends of each pooled connection live in this process
