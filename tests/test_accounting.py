"""Real providers' accounting against the built-in endpoint on 127.0.0.1: cached prompt tokens (inside or
apart from prompt_tokens), their price, and preflight refusing a model the endpoint does not list."""

from __future__ import annotations

import re

import httpx
import pytest
from conftest import autoenv, ledger, small_config
from test_cache import Served
from test_provider import running

from autoenv.core.config import Price
from autoenv.core.traces import Rollout, call_input_tokens
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint
from autoenv.evaluation.provider import check_endpoint
from autoenv.evaluation.stats import cost, input_tokens

PROMPT = [{"role": "system", "content": "x" * 200}, {"role": "user", "content": "y" * 76}]  # 50 + 19 tokens


def usage(endpoint: Endpoint, messages: list[dict]) -> dict:
    response = httpx.post(endpoint.base_url + "/chat/completions", json={"model": "echo", "messages": messages})
    response.raise_for_status()
    return response.json()["usage"]


@pytest.mark.parametrize("mode", ["included", "separate"])
def test_the_endpoint_reports_a_repeated_prompt_as_cached(mode):
    with running(Endpoint(Policies(), prompt_cache=mode)) as ep:
        first, second = usage(ep, PROMPT), usage(ep, PROMPT)
        longer = usage(ep, [*PROMPT, {"role": "assistant", "content": "z" * 40}, {"role": "user", "content": "w" * 4}])
    assert first["prompt_tokens"] == 69 and first["prompt_tokens_details"] == {"cached_tokens": 0}
    assert second["prompt_tokens_details"] == {"cached_tokens": 69}
    assert second["prompt_tokens"] == (69 if mode == "included" else 0)
    assert longer["prompt_tokens_details"] == {"cached_tokens": 69}
    assert longer["prompt_tokens"] == (80 if mode == "included" else 11)
    for call in (first, second, longer):  # whichever way it counts, the input is the whole prompt
        assert call_input_tokens(call, mode) == 69 + 11 * (call is longer)


def test_auto_reads_cached_tokens_apart_when_they_exceed_the_prompt():
    assert call_input_tokens({"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 68}}) == 69
    assert call_input_tokens({"prompt_tokens": 69, "prompt_tokens_details": {"cached_tokens": 68}}) == 69
    assert call_input_tokens({"prompt_tokens": 69}) == 69
    # verifiers' trace stores prompt_tokens less the cached ones (assuming they were included)
    assert call_input_tokens({"prompt_tokens": -67, "cached_input_tokens": 68}) == 69  # llama-server: 1 + 68
    assert call_input_tokens({"prompt_tokens": 1, "cached_input_tokens": 68}) == 69  # OpenAI: 69 with 68 cached


def test_cached_tokens_are_kept_apart_and_priced_at_the_cached_price():
    r = Rollout(trace_id="t", task_key="k", idx=0, outcome="ok", reward=1.0, input_tokens=69, cached_input_tokens=68,
                reported_prompt_tokens=1, output_tokens=10)
    assert input_tokens([r], "auto") == (69, 68) and input_tokens([r], "separate") == (69, 68)
    assert input_tokens([r], "included") == (1, 68)
    assert cost(Price(input=2.0, output=8.0, cached_input=0.5), 69, 68, 10) == round((1 * 2 + 68 * 0.5 + 80) / 1e6, 6)
    assert cost(Price(input=2.0, output=8.0), 69, 68, 10) == round((69 * 2 + 80) / 1e6, 6)  # no cached price


def test_preflight_refuses_a_model_the_endpoint_does_not_list():
    with running(Endpoint(Policies())) as ep:
        check = check_endpoint(ep.base_url, "gpt-4.1", None, backoff=0)
        param = check_endpoint(ep.base_url, "noisy-oracle:0.3", None, backoff=0)
    assert not check.ok and check.fixable
    assert "does not list the model 'gpt-4.1'; it lists: " in check.detail and "oracle" in check.detail
    assert param.ok
    with running(Endpoint(Policies(), models=[])) as ep:  # an endpoint that lists none is not checked
        check = check_endpoint(ep.base_url, "gpt-4.1", None, backoff=0)
    assert check.ok and "no model listed: not checked" in check.detail


def served_config(base_url: str, target: str = "echo", strong: str = "oracle") -> str:
    config = small_config()
    config = re.sub(r'(?m)^model = "gpt-4\.1-mini"', f'model = "{target}"', config)
    config = re.sub(r'(?m)^model = "gpt-4\.1"', f'model = "{strong}"', config)
    config = re.sub(r'(?m)^base_url = .*', f'base_url = "{base_url}"', config)
    config = re.sub(r'(?m)^api_key_var = .*', 'api_key_var = ""', config)
    return re.sub(r'(?m)^backend = .*', 'backend = "offline"', config)


@pytest.mark.slow
def test_eval_exits_2_naming_the_listed_models(run_repo):
    with Served() as endpoint:
        root = run_repo("arithmetic", config_text=served_config(endpoint.base_url, target="no-such-model"))
        result = autoenv("eval", cwd=root)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "does not list the model 'no-such-model'; it lists:" in result.stderr and "echo" in result.stderr
    assert "[target] model" in result.stderr and ledger(root) == []


@pytest.mark.e2e
def test_an_evaluation_counts_and_prices_cached_prompt_tokens(run_repo):
    """A llama-server-like endpoint (cached tokens apart from prompt_tokens): the record's input is the whole prompt."""
    served = Served()
    served.endpoint = Endpoint(Policies(None), prompt_cache="separate")
    with served as endpoint:
        config = served_config(endpoint.base_url, target="echo", strong="refusal")
        config += "\n[target.price]\ninput = 2.0\noutput = 8.0\ncached_input = 0.5\n"
        root = run_repo("arithmetic", config_text=config)
        result = autoenv("eval", cwd=root)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    target = ledger(root)[-1]["stats"]["target"]
    assert target["cached_input_tokens"] > 0 and target["input_tokens"] > target["cached_input_tokens"]
    fresh = target["input_tokens"] - target["cached_input_tokens"]
    assert target["cost_usd"] == round((fresh * 2.0 + target["cached_input_tokens"] * 0.5
                                        + target["output_tokens"] * 8.0) / 1e6, 6)
    assert target["input_tokens"] >= 40 * target["rollouts"]  # whole prompts (about 50 tokens), not the uncached rest
    print(f"target: {target['input_tokens']} input tokens, {target['cached_input_tokens']} of them cached, "
          f"${target['cost_usd']}")
