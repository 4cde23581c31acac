"""The built-in OpenAI-compatible endpoint on 127.0.0.1, serving scripted policies.

It is the embedded default for offline runs (no key needed), the engine the probes play
through, and the test double for real providers. With an `api_key` it refuses requests without that bearer key, as a provider
does. It speaks `/v1/chat/completions`
(server-sent events with a final usage chunk when `stream` is set, one JSON body
otherwise) and `/v1/models`. Latency and faults (429, 500, a hang, a stream cut short)
are injected at seeded rates so failure handling downstream can be tested for real.

As a real provider it can also cache prompts (`prompt_cache`): a request whose leading
messages were sent before reports those messages' tokens in
`usage.prompt_tokens_details.cached_tokens`, inside `prompt_tokens` as OpenAI counts them
(`included`) or apart from them as llama.cpp's llama-server does (`separate`). `models`
replaces the list `/v1/models` serves (`[]`: an endpoint that lists none).

Which task a request plays is the harness's to say, never guessed from text where tasks share a
prompt: verifiers sends each rollout's trace id as `X-Session-ID`, and the child tells the endpoint
which task each trace plays before its first request (`follow`, verifiers' `run_slot(on_trace=...)`).
An external client can send the task's key as `X-AutoEnv-Task`. Without either, the policies match
the conversation's text (autoenv.gates.oracle).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from autoenv.core.http import HOST, SESSION_HEADER, completion, error_response, stream_reply
from autoenv.core.messages import message_text
from autoenv.core.canaries import Canaries, canary_text
from autoenv.endpoint.policies import ChatRequest, Policies, PolicyError, Reply

FAULT_KINDS = ("429", "500", "hang", "cut")
TASK_HEADER = "X-AutoEnv-Task"
"""The key of the task a request's rollout plays, for a client the harness cannot `assign` (autoenv serve)."""


@dataclass(frozen=True)
class Faults:
    """Rates (0..1) of injected failures per request, and added latency."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_hang: float = 0.0
    rate_cut: float = 0.0
    latency: float = 0.0
    """Seconds added before every reply."""
    hang_seconds: float = 3600.0
    seed: int = 0
    burst: str | None = None
    """A fault kind (429, 500, hang, cut) every chat request gets until `burst_count` have had it."""
    burst_count: int = 0

    def __post_init__(self):
        rates = (self.rate_429, self.rate_500, self.rate_hang, self.rate_cut)
        if any(r < 0 or r > 1 for r in rates) or sum(rates) > 1:
            raise ValueError("fault rates must each be in [0, 1] and sum to at most 1")
        if self.burst is not None and (self.burst not in FAULT_KINDS or self.burst_count < 0):
            raise ValueError(f"a burst is one of {', '.join(FAULT_KINDS)} and a count >= 0")


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Endpoint:
    """An aiohttp application serving `policies`; `async with Endpoint(...) as ep` binds a port."""

    def __init__(self, policies: Policies, faults: Faults = Faults(), port: int = 0, api_key: str | None = None,
                 prompt_cache: str | None = None, models: list[str] | None = None, api_key_sha256: str | None = None):
        if prompt_cache not in (None, "included", "separate"):
            raise ValueError("prompt_cache is None, 'included' or 'separate'")
        self.policies = policies
        self.prompt_cache = prompt_cache
        self.models = models
        self._prefixes: set[str] = set()
        self.api_key = api_key
        # the key's digest is what the check compares: a server run in the sandbox (`autoenv serve --candidate`,
        # the candidate's oracle in its process) is given the digest, never the key
        self.api_key_sha256 = api_key_sha256 or (key_digest(api_key) if api_key is not None else None)
        self.faults = faults
        self.port = port
        self.counts: Counter[str] = Counter()
        self.sessions: dict[str, str] = {}
        """Rollout id (X-Session-ID) -> the key of the task that rollout plays, as the harness assigned it."""
        self._replays: dict[str, str] = {}
        """Rollout id -> its replayable id (ChatRequest.rollout), fixed at the rollout's first request."""
        self._ordinals: Counter[tuple[str, str]] = Counter()
        self._fault_rng = random.Random(faults.seed)
        self._runner: web.AppRunner | None = None
        self.canaries: dict[str, Canaries] = {}
        """Offline rollouts: which of each seat's are canaries (autoenv.core.canaries), set by the rollouts stage;
        a seat's requests come under /<role>/v1 (`seat_url`)."""

    def assign(self, session: str, task_key: str) -> None:
        """The rollout whose requests carry `X-Session-ID: session` plays the task keyed `task_key`."""
        self.sessions[session] = task_key

    def follow(self, trace: Any) -> None:
        """verifiers' `run_slot(on_trace=...)`: each trace, at mint and before its first model request, plays its
        own task (verifiers sends the trace id as the rollout's X-Session-ID)."""
        self.assign(str(trace.id), str(trace.task.key))

    def replay_id(self, session: str, model: str, task: str | None) -> str:
        """The id a policy seeds this rollout's draws with (ChatRequest.rollout): the task's key, the model and how
        many rollouts of that model and task came before this one. Rollouts of one task by one model are alike, so
        whichever starts first, a run draws the same per-task outcomes as any other run with the same seed."""
        if task is None:
            return session
        if session not in self._replays:
            n = self._ordinals[(model, task)]
            self._ordinals[(model, task)] += 1
            self._replays[session] = f"{task}#{model}#{n}"
        return self._replays[session]

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def seat_url(self, role: str) -> str:
        """The base URL of one seat (its requests are told apart by it: the seat's canaries)."""
        return f"http://{HOST}:{self.port}/{role}/v1"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2, middlewares=[self._check_key])
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/{role}/v1/chat/completions", self._chat)
        app.router.add_get("/{role}/v1/models", self._models)
        app.router.add_get("/health", self._health)
        return app

    async def start(self) -> "Endpoint":
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the bound port when 0 was asked
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> "Endpoint":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    @web.middleware
    async def _check_key(self, request: web.Request, handler) -> web.StreamResponse:
        """With an `api_key`, a request without `Authorization: Bearer <key>` is refused, as a provider would."""
        given = request.headers.get("Authorization", "")
        if self.api_key_sha256 is not None and request.path != "/health" and not (
                given.startswith("Bearer ") and hmac.compare_digest(key_digest(given[7:]), self.api_key_sha256)):
            self.counts["unauthorized"] += 1
            return error_response(401, "invalid or missing API key")
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _models(self, request: web.Request) -> web.Response:
        listed = self.policies.names() if self.models is None else {name: "" for name in self.models}
        data = [
            {"id": name, "object": "model", "owned_by": "autoenv", "description": doc}
            for name, doc in listed.items()
        ]
        return web.json_response({"object": "list", "data": data})

    def _draw_fault(self) -> str | None:
        f = self.faults
        if f.burst and self.counts[f"fault:{f.burst}"] < f.burst_count:
            return f.burst
        roll = self._fault_rng.random()
        for name, rate in (("429", f.rate_429), ("500", f.rate_500), ("hang", f.rate_hang), ("cut", f.rate_cut)):
            if roll < rate:
                return name
            roll -= rate
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return error_response(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error_response(400, "request needs a `messages` array")
        model = str(body.get("model") or "")
        self.counts["requests"] += 1
        self.counts[f"model:{model}"] += 1
        if self.faults.latency:
            await asyncio.sleep(self.faults.latency)
        fault = self._draw_fault()
        if fault:
            self.counts[f"fault:{fault}"] += 1
        if fault == "429":
            return error_response(429, "injected rate limit", headers={"Retry-After": "0"})
        if fault == "500":
            return error_response(500, "injected server error")
        if fault == "hang":
            await asyncio.sleep(self.faults.hang_seconds)
            return error_response(504, "injected hang ended")
        session = request.headers.get(SESSION_HEADER) or uuid.uuid4().hex
        task = request.headers.get(TASK_HEADER) or self.sessions.get(session)
        chat = ChatRequest(model=model, messages=body["messages"], tools=body.get("tools") or [], session=session,
                           task=task, rollout=self.replay_id(session, model, task))
        canaries = self.canaries.get(request.match_info.get("role", ""))
        probe = canaries.probe(session, chat.messages) if canaries is not None else None
        try:
            reply = Reply(content=canary_text(probe)) if probe else self.policies.reply(chat)
        except PolicyError as e:
            return error_response(e.status, str(e))
        except Exception as e:  # a candidate's oracle hook raised: report it, keep serving
            return error_response(500, f"the policy failed: {type(e).__name__}: {e}")
        usage = self._usage(model, chat.messages, reply)
        self.counts["tokens"] += usage["total_tokens"]
        if fault == "cut" and not body.get("stream"):
            if request.transport is not None:
                request.transport.close()  # the connection drops before any byte of the answer
            return web.Response(status=500)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await stream_reply(request, model, reply, usage if include_usage else None, cut=fault == "cut")
        return web.json_response(completion(model, reply, usage))

    def _usage(self, model: str, messages: list[dict], reply: Reply) -> dict:
        """OpenAI-style usage; with a prompt cache, the tokens of the longest prefix of `messages` sent
        before to the same model are reported as cached (inside or apart from `prompt_tokens`): a provider
        caches per model, so one model's requests never make another's cached."""
        counts = [_tokens(message_text(m.get("content"))) for m in messages]
        prompt, cached = sum(counts), 0
        if self.prompt_cache:
            digest = hashlib.sha256(model.encode() + b"\0")
            for i, message in enumerate(messages):
                digest.update(json.dumps(message, sort_keys=True, default=str).encode())
                key = digest.hexdigest()
                if key in self._prefixes:
                    cached = sum(counts[: i + 1])
                self._prefixes.add(key)
        completion_tokens = _tokens(reply.content) + sum(_tokens(c.arguments) for c in reply.tool_calls)
        reported = prompt - cached if self.prompt_cache == "separate" else prompt
        usage: dict = {"prompt_tokens": reported, "completion_tokens": completion_tokens,
                       "total_tokens": reported + completion_tokens}
        if self.prompt_cache:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return usage


async def serve_forever(endpoint: Endpoint, ready) -> None:
    await endpoint.start()
    ready(endpoint)
    try:
        await asyncio.Event().wait()
    finally:
        await endpoint.stop()
