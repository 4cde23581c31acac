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
"""

from __future__ import annotations

import asyncio
import hmac
import os
import secrets
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from autoenv.core.http import HOST, error_response
from autoenv.core.job import Job

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
            shutil.rmtree(Path(self.socket_path).parent, ignore_errors=True)

    async def _start(self) -> None:
        # No total timeout: a long stream is the rollout's to bound (rollout_timeout), not ours.
        # trust_env: a provider behind $HTTPS_PROXY is reached as the OpenAI client reached it.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
                                              auto_decompress=False, trust_env=True)
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{name}/{tail:.*}", self._forward)
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
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            if response is None:
                return error_response(502, f"the forwarder could not reach {upstream.base_url}: {type(e).__name__}: {e}")
            if request.transport is not None:  # the provider cut the answer short: so do we
                request.transport.close()
            return response


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
        update = {"rollouts": plan.model_copy(update={"roles": roles}), "forward_socket": forwarder.socket_path}
        yield job.model_copy(update=update), {TOKEN_VAR: forwarder.token}


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
