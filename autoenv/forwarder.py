"""The harness's loopback forwarder: candidate processes reach real models through it, never with the key.

A candidate's code runs in the child process, so anything in the child's environment is the
candidate's: an import-time block once read both API keys from it. The harness therefore
serves, for the evaluation's life, one route per real model on 127.0.0.1 (an asyncio loop
in a thread of the harness process) that adds the provider's key itself and passes the
answer back chunk by chunk (server-sent event streams included). The child only holds a
per-evaluation token for this forwarder, checked on every request and worthless once the
evaluation ends; the key stays in the harness.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from autoenv.endpoint.server import HOST, error_response
from autoenv.job import Job

TOKEN_VAR = "AUTOENV_FORWARD_TOKEN"
START_SECONDS = 30
# Per-hop headers, and the caller's credentials, are never passed on.
HOP_HEADERS = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "authorization",
               "proxy-authorization", "te", "trailer", "upgrade"}


@dataclass(frozen=True)
class Upstream:
    """A real provider: its OpenAI-compatible base URL and the variable holding its key ('' for none)."""

    base_url: str
    key_var: str = ""


class Forwarder:
    """Loopback routes `/<name>/...` -> `upstreams[name].base_url/...`, with the provider's key added.

    Use it as a context manager: the server runs in its own thread for the block.
    """

    def __init__(self, upstreams: dict[str, Upstream]):
        self.upstreams = upstreams
        self.token = secrets.token_urlsafe(32)
        self.port = 0
        self.refused = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def url(self, name: str) -> str:
        """The base URL a client uses for upstream `name`."""
        return f"http://{HOST}:{self.port}/{name}"

    def __enter__(self) -> Forwarder:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="autoenv-forwarder", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=START_SECONDS)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
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

    async def _start(self) -> None:
        # No total timeout: a long stream is the rollout's to bound (rollout_timeout), not ours.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
                                              auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{name}/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, 0).start()
        self.port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            self.refused += 1
            return error_response(401, "the forwarder refused the request: wrong or missing token")
        name = request.match_info["name"]
        upstream = self.upstreams.get(name)
        if upstream is None:
            return error_response(404, f"the forwarder has no model route {name!r}")
        url = upstream.base_url.rstrip("/") + "/" + request.match_info["tail"]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        key = os.environ.get(upstream.key_var, "") if upstream.key_var else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        assert self._session is not None
        response: web.StreamResponse | None = None
        try:
            async with self._session.request(request.method, url, params=request.query, headers=headers,
                                             data=await request.read()) as answer:
                response = web.StreamResponse(status=answer.status, reason=answer.reason, headers={
                    k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS})
                await response.prepare(request)
                async for chunk in answer.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            if response is None:
                return error_response(502, f"the forwarder could not reach {upstream.base_url}: {type(e).__name__}: {e}")
            if request.transport is not None:  # the provider cut the answer short: so do we
                request.transport.close()
            return response


@contextmanager
def forwarding(job: Job) -> Iterator[tuple[Job, dict[str, str]]]:
    """`job` with its real seats pointed at a forwarder serving for the block, and the variables
    the child needs for it (the token). A job with no real seat is yielded as it is."""
    plan = job.rollouts
    real = {role: seat for role, seat in plan.roles.items() if not seat.embedded} if plan else {}
    if plan is None or not real:
        yield job, {}
        return
    with Forwarder({role: Upstream(seat.base_url, seat.api_key_var) for role, seat in real.items()}) as forwarder:
        roles = {**plan.roles, **{role: seat.model_copy(update={"base_url": forwarder.url(role), "api_key_var": TOKEN_VAR})
                                  for role, seat in real.items()}}
        yield job.model_copy(update={"rollouts": plan.model_copy(update={"roles": roles})}), {TOKEN_VAR: forwarder.token}
