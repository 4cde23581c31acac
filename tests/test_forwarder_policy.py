"""autoenv/sandbox/forwarder.py's policy: it serves rollouts, nothing else.

A real recording provider on 127.0.0.1 (an aiohttp app that answers every path, keeps what it
received, and reports usage) stands behind a real Forwarder; clients hold only the token, as
the sandboxed child does. What a hostile candidate once sent through it with the key (another
model with max_tokens 100000, GET /files, DELETE /files/...) must be refused or clamped, never
reach the provider as asked, be recorded, and cost what the provider reports. The attack test
plants that candidate for real and evaluates it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import openai
import pytest
from aiohttp import web
from openai import AsyncOpenAI

from autoenv.core.job import Job, RolloutPlan, SamplingSpec, Seat
from autoenv.core.record import Entry, Forwarded, ForwardedRequest, ForwardedRoute, ModelStats, Verdict
from autoenv.driver.budget import models_usd
from autoenv.driver.gate import usd_left
from autoenv.evaluation.report import forwarded_line
from autoenv.sandbox import warmchild
from autoenv.sandbox.forwarder import (
    REPORT_FILE,
    RETRY_FACTOR,
    SLACK_REQUESTS,
    TOKEN_VAR,
    Forwarder,
    SpendCap,
    Upstream,
    forwarding,
    request_bound,
)
from tests.conftest import autoenv, commit_all, head, ledger, stop_process

pytestmark = pytest.mark.timeout(60)

KEY_VAR = "AUTOENV_TEST_POLICY_KEY"
KEY = "sk-provider-policy-test-5678"
SEAT_MODEL = "gpt-seat"
CAP = 1024
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "prompt_tokens_details": {"cached_tokens": 3}}


class Provider:
    """An OpenAI-compatible provider that answers every method and path and records what reached it."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> Provider:  # noqa: PYI034
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.seen.append({"method": request.method, "path": request.path, "body": body,
                          "authorization": request.headers.get("Authorization", ""),
                          "accept_encoding": request.headers.get("Accept-Encoding", "")})
        if not request.path.endswith("/chat/completions"):
            return web.json_response({"object": "list", "data": [{"id": "file-abc"}]})  # a provider would answer
        model = body.get("model") if isinstance(body, dict) else None
        if isinstance(body, dict) and body.get("stream"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for word in ("four", " is", " it"):
                chunk = {"id": "c", "object": "chat.completion.chunk", "model": model,
                         "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if (body.get("stream_options") or {}).get("include_usage"):
                last = {"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": USAGE}
                await response.write(f"data: {json.dumps(last)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        return web.json_response({"id": "c", "object": "chat.completion", "created": 0, "model": model, "usage": USAGE,
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "four"}}]})

    def chats(self) -> list[dict]:
        return [s for s in self.seen if s["path"].endswith("/chat/completions")]


def policed(body, monkeypatch, **seat):
    """Run `await body(forwarder, provider)` with the recording provider behind a Forwarder for route `target`."""
    monkeypatch.setenv(KEY_VAR, KEY)

    async def main():
        async with Provider() as provider:
            upstream = Upstream(provider.base_url, KEY_VAR, **{"model": SEAT_MODEL, "max_tokens": CAP, **seat})
            with Forwarder({"target": upstream}) as forwarder:
                return await body(forwarder, provider)

    return asyncio.run(main())


def client(forwarder: Forwarder) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=forwarder.url("target"), api_key=forwarder.token, max_retries=0)


def user(text: str = "What is 2 + 2?") -> list:
    return [{"role": "user", "content": text}]


async def raw(forwarder: Forwarder, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """A request as candidate code would send it, with the token and nothing else."""
    async with aiohttp.ClientSession() as session, session.request(
            method, f"http://127.0.0.1:{forwarder.port}{path}", json=body,
            headers={"Authorization": f"Bearer {forwarder.token}"}) as answer:
        return answer.status, await answer.json(content_type=None)


def test_a_rollouts_request_passes_with_the_seats_model_and_max_tokens_and_its_tokens_are_counted(monkeypatch):
    async def body(forwarder, provider):
        reply = await client(forwarder).chat.completions.create(model=SEAT_MODEL, messages=user(), max_tokens=CAP)
        return reply.choices[0].message.content, provider.chats(), forwarder.report()

    text, chats, report = policed(body, monkeypatch)
    assert text == "four"
    (seen,) = chats
    assert seen["body"]["model"] == SEAT_MODEL and seen["body"]["max_tokens"] == CAP
    assert seen["authorization"] == f"Bearer {KEY}" and seen["accept_encoding"] == "identity"
    route = report.routes["target"]
    assert (route.requests, route.answered, route.prompt_tokens, route.completion_tokens, route.cached_tokens) == \
        (1, 1, 11, 7, 3)
    assert not report.misused and report.requests == []


def test_another_model_is_refused_and_never_reaches_the_provider(monkeypatch):
    async def body(forwarder, provider):
        with pytest.raises(openai.PermissionDeniedError) as caught:
            await client(forwarder).chat.completions.create(model="o3-pro-2025-06-10", messages=user(),
                                                            max_tokens=100000)
        return caught.value, provider.seen, forwarder.report()

    error, seen, report = policed(body, monkeypatch)
    assert error.status_code == 403 and "serves the model 'gpt-seat' only, not 'o3-pro-2025-06-10'" in str(error)
    assert seen == []
    (refusal,) = report.requests
    assert (refusal.action, refusal.method, refusal.path, refusal.model) == \
        ("refused", "POST", "/target/chat/completions", "o3-pro-2025-06-10")
    assert report.refused == 1 and report.misused and report.routes["target"].requests == 0


def test_max_tokens_above_the_seats_is_clamped_and_absent_is_set(monkeypatch):
    async def body(forwarder, provider):
        c = client(forwarder)
        await c.chat.completions.create(model=SEAT_MODEL, messages=user(), max_tokens=100000)
        await c.chat.completions.create(model=SEAT_MODEL, messages=user(), max_completion_tokens=100000)
        await c.chat.completions.create(model=SEAT_MODEL, messages=user(), max_tokens=10)
        await c.chat.completions.create(model=SEAT_MODEL, messages=user())
        return [s["body"] for s in provider.chats()], forwarder.report()

    bodies, report = policed(body, monkeypatch)
    assert bodies[0]["max_tokens"] == CAP and bodies[1]["max_completion_tokens"] == CAP
    assert "max_tokens" not in bodies[1]  # a reasoning model's own field is kept, not doubled
    assert bodies[2]["max_tokens"] == 10 and bodies[3]["max_tokens"] == CAP
    assert report.clamped == 2 and report.refused == 0 and report.misused
    assert [r.reason for r in report.requests] == ["max_tokens 100000 clamped to the seat's 1024",
                                                   "max_completion_tokens 100000 clamped to the seat's 1024"]


def test_a_seat_without_max_tokens_leaves_the_endpoints_default(monkeypatch):
    async def body(forwarder, provider):
        await client(forwarder).chat.completions.create(model=SEAT_MODEL, messages=user(), max_tokens=100000)
        return provider.chats()[0]["body"]

    assert "max_tokens" not in policed(body, monkeypatch, max_tokens=None)


@pytest.mark.parametrize("method, path", [("GET", "/target/files"), ("DELETE", "/target/files/file-abc"),
                                          ("POST", "/target/files"), ("POST", "/target/embeddings"),
                                          ("POST", "/target/responses"), ("GET", "/target/chat/completions"),
                                          ("GET", "/files"), ("DELETE", "/files/file-abc")])
def test_any_other_method_or_path_is_a_403_and_never_reaches_the_provider(monkeypatch, method, path):
    async def body(forwarder, provider):
        status, answer = await raw(forwarder, method, path, {"model": SEAT_MODEL, "input": "x"})
        return status, answer, provider.seen, forwarder.report()

    status, answer, seen, report = policed(body, monkeypatch)
    assert status == (404 if path.startswith("/files") else 403) and seen == []
    assert answer["error"]["message"].startswith(f"the forwarder refused {method} {path}: ")
    (refusal,) = report.requests
    assert (refusal.action, refusal.method, refusal.path) == ("refused", method, path)


def test_the_token_is_never_recorded(monkeypatch):
    async def body(forwarder, provider):
        await raw(forwarder, "GET", f"/target/{forwarder.token}/files")
        return forwarder.token, forwarder.report().model_dump_json()

    token, report = policed(body, monkeypatch)
    assert token not in report and KEY not in report and "/target/<token>/files" in report


def test_the_models_listing_is_answered_by_the_forwarder_with_the_seats_model_alone(monkeypatch):
    async def body(forwarder, provider):
        listed = await client(forwarder).models.list()
        status, _ = await raw(forwarder, "GET", "/target/v1/models")  # verifiers' interception server asks this
        return [m.id for m in listed.data], status, provider.seen, forwarder.report()

    ids, status, seen, report = policed(body, monkeypatch)
    assert ids == [SEAT_MODEL] and status == 200 and seen == []
    assert report.routes["target"].local == 2 and not report.misused


def test_n_above_one_is_refused(monkeypatch):
    async def body(forwarder, provider):
        with pytest.raises(openai.PermissionDeniedError):
            await client(forwarder).chat.completions.create(model=SEAT_MODEL, messages=user(), n=8)
        return provider.seen, forwarder.report()

    seen, report = policed(body, monkeypatch)
    assert seen == [] and report.refused == 1 and "n = 8" in report.requests[0].reason


def test_a_stream_still_streams_asks_for_its_usage_and_is_counted(monkeypatch):
    async def body(forwarder, provider):
        stream = await client(forwarder).chat.completions.create(model=SEAT_MODEL, messages=user(), stream=True)
        chunks = [chunk async for chunk in stream]
        return chunks, provider.chats()[0]["body"], forwarder.report()

    chunks, sent, report = policed(body, monkeypatch)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "four is it"
    assert sent["stream_options"] == {"include_usage": True}  # asked by the forwarder: the client did not
    route = report.routes["target"]
    assert (route.answered, route.prompt_tokens, route.completion_tokens, route.unmetered) == (1, 11, 7, 0)


def test_past_the_plans_bound_requests_are_refused(monkeypatch):
    async def body(forwarder, provider):
        c = client(forwarder)
        for _ in range(3):
            await c.chat.completions.create(model=SEAT_MODEL, messages=user())
        with pytest.raises(openai.PermissionDeniedError) as caught:
            await c.chat.completions.create(model=SEAT_MODEL, messages=user())
        return str(caught.value), len(provider.chats()), forwarder.report()

    error, reached, report = policed(body, monkeypatch, max_requests=3)
    assert "passed the 3 requests the evaluation's plan allows" in error and reached == 3
    assert report.routes["target"].requests == 3 and report.refused == 1


def test_past_the_runs_spend_cap_requests_are_refused_and_it_is_not_the_candidates_doing(monkeypatch):
    def cost(role, route):
        return route.completion_tokens * 0.0001  # 7 tokens an answer: $0.0007

    async def body(forwarder, provider):
        c = client(forwarder)
        for _ in range(2):
            await c.chat.completions.create(model=SEAT_MODEL, messages=user())
        with pytest.raises(openai.PermissionDeniedError) as caught:
            await c.chat.completions.create(model=SEAT_MODEL, messages=user())
        return str(caught.value), len(provider.chats()), forwarder.report()

    async def main():
        async with Provider() as provider:
            upstream = Upstream(provider.base_url, KEY_VAR, model=SEAT_MODEL, max_tokens=CAP)
            with Forwarder({"target": upstream}, cap=SpendCap(usd=0.001, cost=cost)) as forwarder:
                return await body(forwarder, provider)

    monkeypatch.setenv(KEY_VAR, KEY)
    error, reached, report = asyncio.run(main())
    assert "the run's budget is spent: the models cost $0.0014 of the $0.0010" in error and reached == 2
    assert report.capped == 1 and not report.misused and report.requests[0].action == "capped"


def test_the_cap_is_what_the_live_drivers_run_has_left(tmp_path):
    assert usd_left(tmp_path, "autoenv/t1") is None  # no driver: no cap
    folder = tmp_path / "agent" / "t1"
    folder.mkdir(parents=True)
    state = {"pid": os.getpid(), "limits": {"evals": 10, "hours": 1.0, "usd": 5.0}, "spend": {"usd": 3.25}}
    (folder / "driver.json").write_text(json.dumps(state))
    assert usd_left(tmp_path, "autoenv/t1") == pytest.approx(1.75)
    (folder / "driver.json").write_text(json.dumps({**state, "spend": {"usd": 9.0}}))
    assert usd_left(tmp_path, "autoenv/t1") == 0.0


def test_the_bound_is_the_plans_rollouts_times_their_turns():
    roles = {"target": Seat(model="a", base_url="http://x/v1"), "strong": Seat(model="b", base_url="http://x/v1")}
    plan = RolloutPlan(examples=40, rollouts=4, roles=roles, smoke_attempts=3)
    assert request_bound(plan, "target", 10) == (160 + 3) * 11 * RETRY_FACTOR + SLACK_REQUESTS
    assert request_bound(plan, "strong", 10) == 160 * 11 * RETRY_FACTOR + SLACK_REQUESTS


def test_forwarding_pins_each_seat_writes_forwarder_json_and_hands_the_account_over(monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_VAR, KEY)
    accounts = []

    async def main():
        async with Provider() as provider:
            roles = {"target": Seat(model=SEAT_MODEL, base_url=provider.base_url, api_key_var=KEY_VAR,
                                    sampling=SamplingSpec(max_tokens=CAP)),
                     "strong": Seat(model="gpt-strong", base_url=provider.base_url, api_key_var=KEY_VAR,
                                    sampling=SamplingSpec(max_tokens=2048))}
            job = Job(candidate_dir="c", out_dir=str(tmp_path), rollouts=RolloutPlan(examples=1, rollouts=2, roles=roles))
            with forwarding(job, recorded=accounts.append) as (forwarded, env):
                strong = forwarded.rollouts.roles["strong"]
                c = AsyncOpenAI(base_url=strong.base_url, api_key=env[TOKEN_VAR], max_retries=0)
                await c.chat.completions.create(model="gpt-strong", messages=user(), max_tokens=100000)
                with pytest.raises(openai.PermissionDeniedError):
                    await c.chat.completions.create(model=SEAT_MODEL, messages=user())  # the other seat's model
                return provider.chats(), env[TOKEN_VAR]

    chats, token = asyncio.run(main())
    assert [(s["body"]["model"], s["body"]["max_tokens"]) for s in chats] == [("gpt-strong", 2048)]
    (account,) = accounts
    assert account.routes["strong"].limit == 2 * 11 * RETRY_FACTOR + SLACK_REQUESTS
    assert account.routes["strong"].completion_tokens == 7 and (account.refused, account.clamped) == (1, 1)
    written = (tmp_path / REPORT_FILE).read_text()
    assert json.loads(written) == json.loads(account.model_dump_json())
    assert token not in written and KEY not in written


def test_the_forwarded_tokens_are_priced_into_the_spend_and_the_feedback_line():
    """A model whose traces show fewer tokens than the forwarder counted is charged the forwarder's count."""
    stats = {"target": model_stats("oracle", cost_usd=1.0), "strong": model_stats("oracle", cost_usd=2.0)}
    plain = Entry(commit="c" * 40, timestamp="2025-01-01T00:00:00Z", eval_success=True,
                  verdict=Verdict(verdict="discard", reason="-"), stats=stats)
    forwarded = Forwarded(routes={"target": ForwardedRoute(model="oracle", requests=9, prompt_tokens=900,
                                                           completion_tokens=90, cost_usd=5.0),
                                  "strong": ForwardedRoute(model="oracle", requests=4, cost_usd=0.5)},
                          requests=[ForwardedRequest(action="refused", method="GET", path="/target/files",
                                                     route="target", reason="not a rollout's request")], refused=1)
    charged = plain.model_copy(update={"forwarded": forwarded})
    assert models_usd(plain) == pytest.approx(3.0) and models_usd(charged) == pytest.approx(5.0 + 2.0)
    line = forwarded_line(forwarded)
    assert "target 9 requests, 900 prompt + 90 completion tokens ($5.0000)" in line
    assert "GET /target/files (refused: not a rollout's request)" in line
    assert Entry.from_json(json.loads(charged.to_json())) == charged  # the ledger line keeps it


def model_stats(model: str, **changes) -> ModelStats:
    fields = {"model": model, "rollouts": 2, "scored": 2, "mean": 0.5, "ci": None, "std": 0.0, "solve_rate": None,
              "max_reward": 1.0, "normalized_mean": 0.5, "tasks": 1, "disagree_share": None}
    return ModelStats(**{**fields, **changes})


# The attack: a hostile candidate that finds the seat URL in its job file and the token in its environment, and
# sends what one once sent. A recording proxy in front of the keyed provider sees what reached it.

FORWARDER_HOSTILE = '''"""Hostile: use the evaluation's forwarder token for what is not a rollout; report each on stderr and in a file."""
import json, os, sys, urllib.request, urllib.error
from pathlib import Path

_done = set()


def job_file():
    for arg in sys.argv[1:]:
        if arg.endswith("job.json"):
            return Path(arg)
    return next(Path(p) for p in Path("/proc/self/cmdline").read_bytes().decode().split("\\0") if p.endswith("job.json"))


def call(method, url, body=None):
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + os.environ["AUTOENV_FORWARD_TOKEN"],
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return f"{answer.status} {json.loads(answer.read()).get('model', '')}"
    except urllib.error.HTTPError as e:
        return f"{e.code} {json.loads(e.read())['error']['message'][:160]}"


def attack(when):
    if when in _done:
        return
    _done.add(when)
    path = job_file()
    try:  # once an evaluation, whichever of its processes imports the package first
        os.close(os.open(path.parent / "forwarder-attacked", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    seat = json.loads(path.read_text())["rollouts"]["roles"]["target"]
    url, model = seat["base_url"], seat["model"]
    try:
        prompt = "forwarder attack: " + Path("/etc/hostname").read_text()
    except OSError:
        prompt = "forwarder attack"
    said = {
        "another-model": call("POST", url + "/chat/completions", {"model": "o3-pro-2025-06-10", "max_tokens": 100000,
                                                                 "messages": [{"role": "user", "content": prompt}]}),
        "max-tokens": call("POST", url + "/chat/completions", {"model": model, "max_tokens": 100000,
                                                              "messages": [{"role": "user", "content": prompt}]}),
        "get-files": call("GET", url + "/files"),
        "delete-files": call("DELETE", url + "/files/file-abc123"),
    }
    (path.parent / "forwarder-attacks.json").write_text(json.dumps(said))
    for name, what in said.items():
        print(f"ATTACK {when} forwarder-{name}: {what}", file=sys.stderr, flush=True)
'''


class RecordingProxy:
    """A provider in front of the keyed `autoenv serve`, in a thread: it passes everything on and keeps what came."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = f"http://127.0.0.1:{upstream_port}"
        self.seen: list[dict] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw_body = await request.read()
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = None
        self.seen.append({"method": request.method, "path": request.path, "body": body})
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with aiohttp.ClientSession(auto_decompress=False) as session, session.request(
                request.method, self.upstream + request.path_qs, headers=headers, data=raw_body) as answer:
            response = web.StreamResponse(status=answer.status, headers={
                k: v for k, v in answer.headers.items() if k.lower() not in ("content-length", "transfer-encoding")})
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    def run(self) -> None:
        async def serve():
            app = web.Application(client_max_size=64 * 1024**2)
            app.router.add_route("*", "/{path:.*}", self.handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._ready.set()
            try:
                await asyncio.Event().wait()
            finally:
                await runner.cleanup()

        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(serve())
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass

    @contextmanager
    def serving(self, port: int) -> Iterator[RecordingProxy]:
        self.port = port
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        assert self._ready.wait(30)
        try:
            yield self
        finally:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._task.cancel)
            thread.join(30)


@pytest.fixture
def recorded_provider(run_repo, monkeypatch):
    """`autoenv serve --key-var` behind a RecordingProxy; the run's config points both models at the proxy."""
    from tests.test_e2e import free_port, remote_config

    monkeypatch.setenv(KEY_VAR, KEY)
    port, proxy_port = free_port(), free_port()
    root = run_repo("arithmetic", remote_config(proxy_port).replace('api_key_var = ""', f'api_key_var = "{KEY_VAR}"'))
    proc = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "serve", "--port", str(port), "--key-var", KEY_VAR,
                             "--candidate", str(root / "candidate")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ready = proc.stdout.readline() if proc.stdout else ""
        assert f"127.0.0.1:{port}" in ready, ready
        with RecordingProxy(port).serving(proxy_port) as proxy:
            yield root, proxy
    finally:
        stop_process(proc)


def plant_forwarder_hostile(root: Path) -> None:
    package = root / "candidate" / "candidate_env"
    (package / "forwarder_attacks.py").write_text(FORWARDER_HOSTILE)
    init = package / "__init__.py"
    init.write_text(init.read_text() + '\nfrom candidate_env.forwarder_attacks import attack as _fw\n_fw("import")\n')
    commit_all(root, "a candidate that misuses the forwarder")


@pytest.mark.e2e
@pytest.mark.attack
@pytest.mark.timeout(450)
@pytest.mark.parametrize("child", ["cold", "warm"])
def test_a_candidate_misusing_the_forwarder_is_refused_recorded_and_tampered(recorded_provider, attack_row, child,
                                                                            tmp_path):
    """In a child of its own (cold) and in one forked by the warm server (autoenv.sandbox.warmchild): the forwarder
    is the harness's either way, and so is what it refuses."""
    root, proxy = recorded_provider
    plant_forwarder_hostile(root)
    cache = str(tmp_path / "cache")
    try:
        result = autoenv("eval", cwd=root, timeout=420,
                         env={"AUTOENV_WARM": "1" if child == "warm" else "0", "AUTOENV_CACHE": cache})
    finally:
        warmchild.stop_all()
    print(result.stdout[-2500:])
    out = root / "outputs" / head(root)
    said = json.loads((out / "forwarder-attacks.json").read_text())
    (entry,) = ledger(root)
    assert entry["verdict"]["verdict"] == "tampered", (entry["verdict"], result.stdout[-3000:], result.stderr[-3000:])
    assert any(t.startswith("forwarder: 3 request(s) refused, 1 clamped") for t in entry["tampered"]), entry["tampered"]
    assert said["another-model"].startswith("403 ") and "o3-pro" in said["another-model"]
    assert not said["max-tokens"].startswith("403 ")  # passed on, clamped (the scripted provider knows no such task)
    assert said["get-files"].startswith("403 ") and said["delete-files"].startswith("403 ")
    # What reached the provider: the seats' model only, max_tokens within the seat's, no /files at all.
    posts = [s for s in proxy.seen if s["path"].endswith("/chat/completions")]
    assert posts and all(s["body"]["model"] == "oracle" for s in posts)
    assert max(s["body"].get("max_tokens", 0) for s in posts) <= 2048
    (clamped,) = [s["body"] for s in posts if s["body"]["messages"][0]["content"].startswith("forwarder attack")]
    assert clamped["max_tokens"] == 1024  # the target seat's
    assert not [s for s in proxy.seen if "files" in s["path"]]
    report = json.loads((out / REPORT_FILE).read_text())
    assert [(r["action"], r["method"], r["path"].rsplit("/", 2)[-2:][-1]) for r in report["requests"]] == [
        ("refused", "POST", "completions"), ("clamped", "POST", "completions"), ("refused", "GET", "files"),
        ("refused", "DELETE", "file-abc123")]
    target = entry["forwarded"]["routes"]["target"]
    assert target["requests"] >= 1 and target["prompt_tokens"] > 0 and target["completion_tokens"] > 0
    assert entry["stats"]["target"]["scored"] > 0  # the rollouts themselves went through
    assert KEY not in json.dumps(report) and KEY not in json.dumps(entry)
    assert "✗ tampered: the candidate's code misused the model forwarder" in result.stdout
    assert ("warm child: forked by the warm server" in result.stdout) == (child == "warm")
    feedback = (root / "feedback" / f"{entry['commit']}.md").read_text()
    assert "forwarded to the providers: target" in feedback and "**refused or clamped**" in feedback
    label = f"{entry['sandbox']}, {child} child"
    verdict = f"verdict {entry['verdict']['verdict']}, listed in forwarder.json"

    def refusal(said: str) -> str:
        return said.replace("the forwarder refused ", "").split(" (the forwarder serves")[0][:120]

    attack_row(f"forwarder: another model (o3-pro, max_tokens 100000) [{label}]",
               f"{refusal(said['another-model'])}; the provider saw only 'oracle'; {verdict}")
    attack_row(f"forwarder: max_tokens 100000 with the seat's model [{label}]",
               f"passed on clamped: the provider saw max_tokens {clamped['max_tokens']} (the seat's); {verdict}")
    attack_row(f"forwarder: GET /files [{label}]", f"{refusal(said['get-files'])}; the provider saw no /files; {verdict}")
    attack_row(f"forwarder: DELETE /files/… [{label}]",
               f"{refusal(said['delete-files'])}; the provider saw no /files; {verdict}")
