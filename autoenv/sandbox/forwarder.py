"""The harness's loopback forwarder: candidate processes reach real models through it, never with the key.

A candidate's code runs in the child process, so anything in the child's environment is the
candidate's: an import-time block once read both API keys from it. The harness therefore
serves, for the evaluation's life, one route per real model on 127.0.0.1 (an asyncio loop
in a thread of the harness process) that adds the provider's key itself and passes the
answer back chunk by chunk (server-sent event streams included). The child only holds a
per-evaluation token for this forwarder, checked on every request and worthless once the
evaluation ends; the key stays in the harness.

A sandboxed child has no network of its own (autoenv.sandbox.confine), so the forwarder also
listens on a Unix socket shown in the sandbox, and the child relays the forwarder's
loopback port to it (`relay`): the URLs in the job are the same either way.

The token is the candidate's too (it is in the child's environment), so the forwarder serves
rollouts and nothing else: a hostile candidate once sent through it, with the key, a chat
request for another model with `max_tokens: 100000`, then `GET /files` and `DELETE /files/...`.
Each route is one seat of the plan (`Upstream`). Only `POST <route>/chat/completions` is passed
on, which is all verifiers' harnesses (in-process and stock) send for a chat rollout; `GET
<route>/models` (and `/v1/models`, the path verifiers' interception server asks for to find a
context window) is answered here with the seat's model alone. The body is checked and rewritten
before it leaves: a model other than the seat's, or `n` above 1, is refused (verifiers writes
the seat's model into every request, so another model is never a rollout's: refusing, not
rewriting, keeps the attempt on record), `max_tokens` / `max_completion_tokens` are clamped to
the seat's sampling (set to it when absent), and a stream asks for its usage. Each route passes
at most the requests the plan allows (`request_bound`). Every other method, path, model or
request is refused with a 403 naming why, and recorded. Every token the provider reports in
`usage` is counted per route; under `autoenv run`, once the counted tokens cost what the run
had left of its max_usd when the evaluation started (`SpendCap`), further requests are refused
too (recorded as `capped`: the budget's doing, not the candidate's). `forwarding` writes the account to `forwarder.json` in the
evaluation's outputs and hands it to the evaluation (autoenv.core.record.Forwarded), which
records a commit whose code used the token for anything else as `tampered`
(autoenv.evaluation.decision).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import secrets
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from autoenv.core.canaries import CANARY_FILE, Canaries, canary_text, served_before
from autoenv.core.http import HOST, SESSION_HEADER, completion, error_response, stream_reply
from autoenv.core.job import Job, RolloutPlan
from autoenv.core.messages import Reply, message_text
from autoenv.core.record import Forwarded, ForwardedRequest, ForwardedRoute

TOKEN_VAR = "AUTOENV_FORWARD_TOKEN"
START_SECONDS = 30
# Per-hop headers, and the caller's credentials, are never passed on.
HOP_HEADERS = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "authorization",
               "proxy-authorization", "te", "trailer", "upgrade"}
# Nor what would bill or address another account than the seat's (the key's organisation, project).
CALLER_HEADERS = {"openai-organization", "openai-project", "x-api-key", "api-key", "cookie"}
REWRITTEN = {"accept-encoding", "content-type"}  # set by the forwarder for the body it sends
REPORT_FILE = "forwarder.json"
ROLLOUT_PATH = "chat/completions"
MODELS_PATHS = ("models", "v1/models")
MAX_TOKEN_KEYS = ("max_tokens", "max_completion_tokens")
# A rollout makes at most max_turns requests; the chat program's client retries a failed one (the SDK's
# and verifiers' stream retries), and compaction adds summaries: the bound allows four times that, and some.
RETRY_FACTOR = 4
SLACK_REQUESTS = 16
RECORDED = 100  # refused or clamped requests listed in the report (all are counted)
USAGE_LIMIT = 16 * 1024**2  # a JSON answer buffered to read its usage; past this it passes unmetered


@dataclass(frozen=True)
class Upstream:
    """A real provider: its OpenAI-compatible base URL and the variable holding its key ('' for none), and the
    seat it serves: its model (a body naming another is refused; '' pins none), its sampling's max_tokens
    (requests are clamped to it; None: the fields are removed, the endpoint's default applies), and the
    requests the plan allows (None: no bound)."""

    base_url: str
    key_var: str = ""
    model: str = ""
    max_tokens: int | None = None
    max_requests: int | None = None


@dataclass
class Meter:
    """Reads the provider's `usage` from an answer as it passes: the last one seen (a stream's final chunk,
    or the JSON body's)."""

    stream: bool
    usage: dict | None = None
    buffer: bytearray = field(default_factory=bytearray)
    overflow: bool = False

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        if self.stream:
            *lines, rest = bytes(self.buffer).split(b"\n")
            self.buffer = bytearray(rest)
            for line in lines:
                self._event(line)
        if len(self.buffer) > USAGE_LIMIT:  # no usage line, nor a JSON answer, is that long
            self.buffer.clear()
            self.overflow = True

    def finish(self) -> dict | None:
        if self.stream:
            self._event(bytes(self.buffer))
        elif not self.overflow:
            self._usage_of(bytes(self.buffer))
        return self.usage

    def _event(self, line: bytes) -> None:
        line = line.strip()
        if line.startswith(b"data:") and b'"usage"' in line:
            self._usage_of(line[5:])

    def _usage_of(self, data: bytes) -> None:
        try:
            answer = json.loads(data)
        except ValueError:
            return
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            self.usage = usage


def tokens(usage: dict, name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


LATENCY_KEPT = 50
"""Provider answer times kept per route: a canary is answered after their median."""


def request_bound(plan: RolloutPlan, role: str, max_turns: int) -> int:
    """The requests a route may pass: its rollouts (the smoke's attempts included) times a turn's worth of them."""
    rollouts = plan.examples * plan.rollouts + plan.canaries.get(role, 0) + \
        (plan.smoke_attempts if plan.smoke and role == "target" else 0)
    return rollouts * (max_turns + 1) * RETRY_FACTOR + SLACK_REQUESTS


@dataclass(frozen=True)
class SpendCap:
    """USD the evaluation may spend on the models, and the price of the tokens counted on a route (None: unpriced)."""

    usd: float
    cost: Callable[[str, ForwardedRoute], float | None]


class Refused(Exception):
    """A request the forwarder does not pass on: its status, why, and how it is recorded."""

    def __init__(self, status: int, reason: str, action: str = "refused"):
        super().__init__(reason)
        self.status, self.reason, self.action = status, reason, action


class Forwarder:
    """Loopback routes `/<name>/...` -> `upstreams[name].base_url/...`, with the provider's key added.

    Use it as a context manager: the server runs in its own thread for the block.
    """

    def __init__(self, upstreams: dict[str, Upstream], cap: SpendCap | None = None,
                 canaries: dict[str, Canaries] | None = None):
        self.upstreams = upstreams
        self.cap = cap
        self.canaries = canaries or {}
        """Online rollouts: which of them are canaries, answered here and never forwarded (autoenv.endpoint.canaries)."""
        self.latencies: dict[str, list[float]] = {name: [] for name in upstreams}
        """Seconds each route's provider took to answer (the latest LATENCY_KEPT): a canary takes as long."""
        self.token = secrets.token_urlsafe(32)
        self.port = 0
        self.refused = 0  # requests without the token
        self.routes = {name: ForwardedRoute(model=up.model, limit=up.max_requests, max_tokens=up.max_tokens)
                       for name, up in upstreams.items()}
        self.requests: list[ForwardedRequest] = []
        self.misused = {"refused": 0, "clamped": 0, "capped": 0}
        self.socket_path = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def url(self, name: str) -> str:
        """The base URL a client uses for upstream `name`."""
        return f"http://{HOST}:{self.port}/{name}"

    def __enter__(self) -> Forwarder:
        # Short and private: a Unix socket path has at most 107 bytes.
        root = forward_root()
        self.socket_path = str(Path(tempfile.mkdtemp(prefix="fw-", dir=root)) / "forwarder.sock")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="autoenv-forwarder", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=START_SECONDS)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        SERVING[self.token] = self
        return self

    def __exit__(self, *exc: object) -> None:
        SERVING.pop(self.token, None)
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result(timeout=START_SECONDS)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=START_SECONDS)
            loop.close()
            self._loop = self._thread = None
            shutil.rmtree(Path(self.socket_path).parent, ignore_errors=True)

    async def _start(self) -> None:
        # No total timeout: a long stream is the rollout's to bound (rollout_timeout), not ours.
        # trust_env: a provider behind $HTTPS_PROXY is reached as the OpenAI client reached it.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
                                              auto_decompress=False, trust_env=True)
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{path:.*}", self._forward)  # every path reaches the policy, and its record
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, 0).start()
        self.port = self._runner.addresses[0][1]
        await web.UnixSite(self._runner, self.socket_path).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def report(self) -> Forwarded:
        """What this forwarder passed on and refused so far."""
        return Forwarded(routes=dict(self.routes), requests=list(self.requests), refused=self.misused["refused"],
                         clamped=self.misused["clamped"], capped=self.misused["capped"], unauthorized=self.refused)

    def spent(self) -> float:
        """USD of the tokens counted so far, at the cap's prices."""
        cap = self.cap
        return sum(cap.cost(name, route) or 0.0 for name, route in self.routes.items()) if cap else 0.0

    def _note(self, action: str, request: web.Request, name: str, model: object, reason: str) -> None:
        """Record a refused or clamped request; never the token (a path could carry it) nor the key."""
        self.misused[action] += 1
        if len(self.requests) < RECORDED:
            def masked(text: str) -> str:
                return text.replace(self.token, "<token>")
            self.requests.append(ForwardedRequest(action=action, method=request.method[:20],
                                                  path=masked(request.path)[:300], route=masked(name)[:100],
                                                  model=masked(str(model))[:200] if model is not None else None,
                                                  reason=masked(reason)))

    def _count(self, name: str, **more: int) -> None:
        route = self.routes[name]
        self.routes[name] = route.model_copy(update={k: getattr(route, k) + v for k, v in more.items()})

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            self.refused += 1
            return error_response(401, "the forwarder refused the request: wrong or missing token")
        name, _, tail = request.match_info["path"].partition("/")
        tail = tail.strip("/")
        upstream = self.upstreams.get(name)
        model: object = None
        try:
            if upstream is None:
                raise Refused(404, f"the forwarder has no model route {name!r}")
            if request.method == "GET" and tail in MODELS_PATHS:
                self._count(name, local=1)
                return web.json_response({"object": "list", "data": [
                    {"id": upstream.model, "object": "model", "created": 0, "owned_by": "autoenv-forwarder"}]})
            if request.method != "POST" or tail != ROLLOUT_PATH:
                raise Refused(403, f"not a rollout's request (the forwarder serves POST /{name}/{ROLLOUT_PATH} "
                                   f"and GET /{name}/models only)")
            try:
                body = json.loads(await request.read())
            except ValueError:
                body = None
            if not isinstance(body, dict):
                raise Refused(400, "the body is not a JSON object (a chat completion request)")
            model = body.get("model")
            body = self._rollout_body(request, name, upstream, body)
        except Refused as refusal:
            self._note(refusal.action, request, name, model, refusal.reason)
            return error_response(refusal.status, f"the forwarder refused {request.method} {request.path}: "
                                                  f"{refusal.reason}")
        canaries = self.canaries.get(name)
        probe = canaries.probe(request.headers.get(SESSION_HEADER), body.get("messages") or []) \
            if canaries is not None else None
        if probe is not None:
            self._count(name, requests=1, canaries=1)
            return await self._canary(request, name, upstream, body, probe)
        self._count(name, requests=1)
        return await self._pass(request, name, upstream, body)

    async def _canary(self, request: web.Request, name: str, upstream: Upstream, body: dict,
                      probe: str) -> web.StreamResponse:
        """A canary rollout's request answered here, as the provider answers: after its typical latency, the seat's
        model, usage, JSON or server-sent events as asked."""
        seen = sorted(self.latencies[name])
        if seen:
            await asyncio.sleep(seen[len(seen) // 2])
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        reply = Reply(content=canary_text(probe))
        prompt = sum(max(1, len(message_text(m.get("content"))) // 4) for m in messages)
        done = max(1, len(reply.content) // 4) if reply.content else 0
        usage = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
        model = upstream.model or str(body.get("model") or "")
        if body.get("stream"):
            return await stream_reply(request, model, reply, usage)
        return web.json_response(completion(model, reply, usage))

    def _rollout_body(self, request: web.Request, name: str, upstream: Upstream, body: dict) -> dict:
        """The body as it leaves: the seat's model, max_tokens clamped, a stream's usage asked for; or Refused."""
        model = body.get("model")
        if upstream.model and model not in (None, upstream.model):
            raise Refused(403, f"the route {name!r} serves the model {upstream.model!r} only, not {str(model)[:100]!r}")
        n = body.get("n")
        if n is not None and n != 1:
            raise Refused(403, f"n = {str(n)[:20]}: a rollout asks for one completion a request")
        bound = upstream.max_requests
        if bound is not None and self.routes[name].requests >= bound:
            raise Refused(403, f"the route {name!r} has passed the {bound} requests the evaluation's plan allows")
        if self.cap is not None and (spent := self.spent()) >= self.cap.usd:
            raise Refused(403, f"the run's budget is spent: the models cost ${spent:.4f} of the ${self.cap.usd:.4f} "
                               "the run had left when this evaluation started (autoenv run --max-usd)", "capped")
        body = {**body, "model": upstream.model or model}
        cap = upstream.max_tokens
        asked = [body[k] for k in MAX_TOKEN_KEYS if k in body]
        if cap is None:
            for key in MAX_TOKEN_KEYS:
                body.pop(key, None)
        else:
            over = [v for v in asked if not isinstance(v, int) or isinstance(v, bool) or v > cap]
            if over:
                self._note("clamped", request, name, model, f"{'/'.join(k for k in MAX_TOKEN_KEYS if k in body)} "
                           f"{str(over[0])[:20]} clamped to the seat's {cap}")
            for key in MAX_TOKEN_KEYS:
                if key in body:
                    value = body[key]
                    body[key] = min(value, cap) if isinstance(value, int) and not isinstance(value, bool) \
                        and value > 0 else cap
            if not asked:
                body["max_tokens"] = cap
        if body.get("stream") is True:
            options = body.get("stream_options")
            body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        return body

    async def _pass(self, request: web.Request, name: str, upstream: Upstream, body: dict) -> web.StreamResponse:
        """Send `body` to the provider with the key; pass its answer back chunk by chunk, counting its usage."""
        url = upstream.base_url.rstrip("/") + "/" + ROLLOUT_PATH
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS | CALLER_HEADERS | REWRITTEN}
        headers["Accept-Encoding"] = "identity"  # the usage is read on the way through
        headers["Content-Type"] = "application/json"
        key = os.environ.get(upstream.key_var, "") if upstream.key_var else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        assert self._session is not None
        response: web.StreamResponse | None = None
        meter: Meter | None = None
        asked = time.monotonic()
        try:
            async with self._session.request("POST", url, params=request.query, headers=headers,
                                             data=json.dumps(body).encode()) as answer:
                response = web.StreamResponse(status=answer.status, reason=answer.reason, headers={
                    k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS})
                await response.prepare(request)
                if answer.status < 300:
                    meter = Meter(stream="event-stream" in answer.headers.get("Content-Type", ""))
                held = b""  # each chunk goes on when the next arrives: the last waits until the answer's tokens
                async for chunk in answer.content.iter_any():  # are counted, so a report read once the
                    if meter is not None:  # caller has its whole answer holds them
                        meter.feed(chunk)
                    if held:
                        await response.write(held)
                    held = chunk
                if meter is not None:
                    self._metered(name, meter)
                    meter = None
                    kept = self.latencies[name]
                    kept.append(time.monotonic() - asked)
                    del kept[:-LATENCY_KEPT]
                if held:
                    await response.write(held)
                await response.write_eof()
                return response
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            if response is None:
                return error_response(502, f"the forwarder could not reach {upstream.base_url}: {type(e).__name__}: {e}")
            if request.transport is not None:  # the provider cut the answer short: so do we
                request.transport.close()
            return response
        finally:
            if meter is not None:  # a cut answer's tokens are counted as far as they were reported
                self._metered(name, meter)

    def _metered(self, name: str, meter: Meter) -> None:
        """Count one answered request's tokens as its meter read them."""
        usage = meter.finish()
        details = usage.get("prompt_tokens_details") if usage else None
        self._count(name, answered=1, unmetered=0 if usage else 1,
                    prompt_tokens=tokens(usage or {}, "prompt_tokens"),
                    completion_tokens=tokens(usage or {}, "completion_tokens"),
                    cached_tokens=tokens(details if isinstance(details, dict) else {}, "cached_tokens"))


SERVING: dict[str, Forwarder] = {}
"""The forwarders serving now, by token: the Worker reads its child's route counts live (a child claiming the provider
failed its smoke rollout when nothing reached the provider: autoenv.sandbox.rollouts.check_smoke)."""


def serving(token: str) -> Forwarder | None:
    """The forwarder serving with `token` now, or None."""
    return SERVING.get(token)


def forward_root() -> str | None:
    """The one private folder every forwarder's socket folder is made in (/tmp/autoenv-fw-<uid>, mode 0700), so
    the warm child's sandbox, set up once, can show it (autoenv.sandbox.warmchild); None where it is not ours alone
    (made by someone else, a link, open to others): then a folder of the system's own temp dir, as before."""
    root = Path(tempfile.gettempdir()) / f"autoenv-fw-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return str(root)


@contextmanager
def forwarding(job: Job, recorded: Callable[[Forwarded], None] | None = None,
               cap: SpendCap | None = None) -> Iterator[tuple[Job, dict[str, str]]]:
    """`job` with its real seats pointed at a forwarder serving for the block (within `cap`), and the
    variables the child needs for it (the token). A job with no real seat is yielded as it is. When the
    block ends, the forwarder's account goes to `forwarder.json` in the job's outputs folder and to `recorded`."""
    plan = job.rollouts
    real = {role: seat for role, seat in plan.roles.items() if not seat.embedded} if plan else {}
    if plan is None or not real:
        yield job, {}
        return
    upstreams = {role: Upstream(seat.base_url, seat.api_key_var, model=seat.model, max_tokens=seat.sampling.max_tokens,
                                max_requests=request_bound(plan, role, job.max_turns)) for role, seat in real.items()}
    canaries = {role: Canaries(n - served_before(job.out / CANARY_FILE, role), plan.examples * plan.rollouts + n,
                               record=job.out / CANARY_FILE, role=role)
                for role in real if (n := plan.canaries.get(role, 0))}  # (resumed: those served before count)
    forwarder = Forwarder(upstreams, cap, canaries)
    try:
        with forwarder:
            roles = {**plan.roles, **{role: seat.model_copy(update={"base_url": forwarder.url(role),
                                                                     "api_key_var": TOKEN_VAR})
                                      for role, seat in real.items()}}
            update = {"rollouts": plan.model_copy(update={"roles": roles}), "forward_socket": forwarder.socket_path}
            yield job.model_copy(update=update), {TOKEN_VAR: forwarder.token}
    finally:
        if forwarder.port:  # it served: its account, read once its loop has stopped
            report = forwarder.report()
            if job.out.is_dir():
                (job.out / REPORT_FILE).write_text(report.model_dump_json(indent=1))
            if recorded is not None:
                recorded(report)


def relay(job: Job) -> bool:
    """In the child: when the forwarder's loopback port is free here (a sandbox with its own
    network), serve it and pipe each connection to the forwarder's Unix socket, in a thread
    (candidate code that blocks the child's loop must not stall it). False when there is
    nothing to relay: no forwarded seat, or the network is shared and the forwarder is here."""
    ports = {urlsplit(seat.base_url).port for seat in job.rollouts.roles.values()
             if not seat.embedded} if job.rollouts and job.forward_socket else set()
    if len(ports) != 1:
        return False
    try:
        listener = socket.create_server((HOST, ports.pop()))
    except OSError:
        return False

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    live: set[asyncio.Task] = set()

    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Held: a connection whose client half-closes is watched by nothing else, and its task would be
        # garbage-collected mid-answer (autoenv.containers.guard met this with the docker CLI).
        task = asyncio.current_task()
        assert task is not None  # a connection callback runs as a task
        live.add(task)
        try:
            try:
                up_reader, up_writer = await asyncio.open_unix_connection(job.forward_socket)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
        finally:
            live.discard(task)

    async def serve() -> None:
        server = await asyncio.start_server(connect, sock=listener)
        await server.serve_forever()

    threading.Thread(target=asyncio.run, args=(serve(),), name="autoenv-relay", daemon=True).start()
    return True
