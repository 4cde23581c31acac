"""autoenv/sandbox/forwarder.py + environ.py: a real forwarder in front of a real Endpoint that demands a key.

The Endpoint (with `api_key`) plays the provider: it refuses requests without
`Authorization: Bearer <key>`. Clients hold only the forwarder's token.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time

import openai
import pytest
from openai import AsyncOpenAI

from autoenv.core.job import Job, RolloutPlan, Seat
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint
from autoenv.gates.oracle import OracleBook
from autoenv.sandbox.environ import scrubbed
from autoenv.sandbox.forwarder import TOKEN_VAR, Forwarder, Upstream, forwarding
from tests.conftest import autoenv, ledger, stop_process
from tests.test_server import ADD_PROMPT, ANSWER, make_tasks, user

pytestmark = pytest.mark.timeout(60)

KEY_VAR = "AUTOENV_TEST_PROVIDER_KEY"
KEY = "sk-provider-only-the-harness-knows-1234"


def through_forwarder(body, monkeypatch, key_var: str = KEY_VAR, base_url: str | None = None):
    """Run `await body(forwarder, endpoint)` with a keyed Endpoint behind a Forwarder for route `target`."""
    monkeypatch.setenv(KEY_VAR, KEY)

    async def main():
        async with Endpoint(Policies(OracleBook(make_tasks()), seed=3), api_key=KEY) as ep:
            with Forwarder({"target": Upstream(base_url or ep.base_url, key_var)}) as forwarder:
                return await body(forwarder, ep)

    return asyncio.run(main())


def client(forwarder: Forwarder, token: str | None = None) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=forwarder.url("target"), api_key=token or forwarder.token, max_retries=0)


def test_a_request_gets_the_providers_key_and_its_answer(monkeypatch):
    async def body(forwarder, ep):
        reply = await client(forwarder).chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
        return reply.choices[0].message.content, ep.counts["unauthorized"]

    assert through_forwarder(body, monkeypatch) == (ANSWER, 0)


def test_a_stream_comes_through_chunk_by_chunk_with_its_usage(monkeypatch):
    async def body(forwarder, ep):
        stream = await client(forwarder).chat.completions.create(
            model="oracle", messages=user(ADD_PROMPT), stream=True, stream_options={"include_usage": True})
        chunks = [chunk async for chunk in stream]
        return chunks

    chunks = through_forwarder(body, monkeypatch)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


def test_a_wrong_or_missing_token_is_refused_and_the_key_is_never_sent(monkeypatch):
    async def body(forwarder, ep):
        errors = []
        for token in ("not-the-token", KEY):  # the provider's own key is no token either
            with pytest.raises(openai.AuthenticationError) as caught:
                await client(forwarder, token).chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
            errors.append(str(caught.value))
        return errors, forwarder.refused, ep.counts["requests"]

    errors, refused, reached = through_forwarder(body, monkeypatch)
    assert refused == 2 and reached == 0
    assert all("forwarder refused" in e for e in errors)


def test_without_the_key_the_provider_refuses_and_says_so(monkeypatch):
    async def body(forwarder, ep):
        with pytest.raises(openai.AuthenticationError) as caught:
            await client(forwarder).chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
        return str(caught.value), ep.counts["unauthorized"]

    message, unauthorized = through_forwarder(body, monkeypatch, key_var="AUTOENV_TEST_UNSET_VAR")
    assert "invalid or missing API key" in message and unauthorized == 1


def test_an_unreachable_provider_is_a_502_naming_it(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"

    async def body(forwarder, ep):
        with pytest.raises(openai.InternalServerError) as caught:
            await client(forwarder).chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
        return caught.value.status_code, str(caught.value)

    status, message = through_forwarder(body, monkeypatch, base_url=dead)
    assert status == 502 and dead in message and KEY not in message


def test_forwarding_points_real_seats_at_the_forwarder_and_leaves_embedded_ones(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    roles = {"target": Seat(model="gpt", base_url="https://provider.invalid/v1", api_key_var=KEY_VAR),
             "strong": Seat(model="oracle", embedded=True)}
    job = Job(candidate_dir="c", out_dir="o", rollouts=RolloutPlan(examples=1, rollouts=1, roles=roles))
    with forwarding(job) as (forwarded, env):
        target = forwarded.rollouts.roles["target"]
        assert target.base_url.startswith("http://127.0.0.1:") and target.api_key_var == TOKEN_VAR
        assert forwarded.rollouts.roles["strong"] == roles["strong"]
        assert list(env) == [TOKEN_VAR] and KEY not in env.values()
        assert KEY not in forwarded.model_dump_json()
    offline = job.model_copy(update={"rollouts": RolloutPlan(examples=1, rollouts=1, roles={"target": roles["strong"]})})
    with forwarding(offline) as (same, env):
        assert same is offline and env == {}


def test_scrubbed_drops_every_secret_looking_variable_and_the_named_ones():
    env = {"OPENAI_API_KEY": "a", "HF_TOKEN": "b", "DB_PASSWORD": "c", "MY_SECRET_THING": "d",
           "AWS_SECRET_ACCESS_KEY": "e", "GOOGLE_APPLICATION_CREDENTIALS": "f", "PROVIDER_X": "g",
           "PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": "h"}
    assert scrubbed(env, drop=["PROVIDER_X"]) == {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    assert scrubbed(env, drop=["PROVIDER_X"], keep=["ANTHROPIC_API_KEY"])["ANTHROPIC_API_KEY"] == "h"


@pytest.fixture
def keyed_provider(run_repo, monkeypatch):
    """`autoenv serve --key-var` as its own process: a provider that refuses requests without the key;
    the run's config names that variable as both models' api_key_var."""
    from tests.test_e2e import free_port, remote_config

    monkeypatch.setenv(KEY_VAR, KEY)
    port = free_port()
    root = run_repo("arithmetic", remote_config(port).replace('api_key_var = ""', f'api_key_var = "{KEY_VAR}"'))
    proc = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "serve", "--port", str(port), "--key-var", KEY_VAR,
                             "--candidate", str(root / "candidate")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready = proc.stdout.readline()
    assert f"127.0.0.1:{port}" in ready, ready
    yield root, port
    stop_process(proc)


@pytest.mark.e2e
@pytest.mark.timeout(400)
def test_a_real_model_evaluation_goes_through_the_forwarder(keyed_provider):
    root, port = keyed_provider
    started = time.time()
    result = autoenv("eval", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (entry,) = ledger(root)
    assert entry["eval_success"] and entry["stats"]["target"]["scored"] > 0
    assert entry["stats"]["target"]["errors"]["provider_error"] == 0
    out = root / "outputs" / entry["commit"]
    seats = json.loads((out / "job.json").read_text())["rollouts"]["roles"]
    assert all(s["base_url"].startswith("http://127.0.0.1:") and f":{port}/" not in s["base_url"] for s in seats.values())
    assert all(s["api_key_var"] == TOKEN_VAR for s in seats.values())
    leaked = [p for p in root.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == []
    print(f"real-model eval through the forwarder: {time.time() - started:.1f} s")
