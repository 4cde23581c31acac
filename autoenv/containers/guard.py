"""The engine's API for a sandboxed child, with only its own containers in reach.

verifiers' docker runtime drives the `docker` CLI from the evaluation's child, the candidate's
process. The engine's socket is root on the host, so the sandbox hides it
(autoenv.sandbox.confine masks every engine socket) and the child gets this guard instead: a
Unix socket served by the harness for the evaluation's life (an asyncio loop in a thread, like
the forwarder) that reads each HTTP request of the Engine API, asks
autoenv.containers.policy whether the child may make it, and passes it to the engine or
answers 403 with the reason (the docker CLI prints it as "Error response from daemon: ...").

verifiers' egress proxy binds a helper container's `/run/vf` to a temp folder holding a Unix
socket. The child's temp folder is the evaluation's share folder, the same path on the host
and in the sandbox, so the daemon can see it; the guard never lets the daemon follow a path
the child could have swapped for a link: a bind of a share folder is rewritten to a folder of
the guard's own (outside the sandbox) holding hard links to that folder's sockets, and
nothing else.

With egress off (`AUTOENV_CONTAINER_EGRESS=off`, autoenv.containers.access), a container the child
creates on the default bridge joins OFFLINE_NETWORK instead: a bridge whose traffic is not
masqueraded, so nothing in the container reaches past the host (no DNS, no package index), while
the port verifiers publishes on 127.0.0.1 and its egress proxy (a listener in the container's own
network namespace, serviced by the child) still work. verifiers' stock chat program needs nothing
more with the local base image (autoenv.containers.image), whose dependencies are baked in.

verifiers starts one container per rollout (its rollout provisions a runtime unless the caller
lends one through `Agent.run(runtime=...)`, which the environment's own `run` never does, and a
lent box keeps one rollout's state for the next). So the guard starts the next one ahead of
need instead: after each `create` of a task container (`sleep infinity`, as verifiers' runtime
makes them) it creates and starts a spare from the same request, and answers the next identical
`create` with that spare, renamed to the name asked for; the CLI's `start` of a running
container is a no-op (304). The spare is removed when the evaluation ends unused.

A forced removal of a container of the child's own (verifiers' `docker rm -f` at each
rollout's end, 0.2-0.3 s of a killed `sleep infinity` and its layer) is answered at once and
done apart, at most REMOVING_AHEAD at a time (a further one waits for a slot), so the next
rollout need not wait for the engine to tidy the last; the guard's end waits for all of them.
A removal the engine did not answer counts as `unreachable`, like any other request.

The guard also counts what only the harness can see: requests the engine did not answer
(`unreachable`), so an engine that goes away mid-evaluation is infrastructure, never the
candidate's crash (autoenv.evaluation.pipeline).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from autoenv.containers import policy
from autoenv.containers.engine import ENGINE_VARS, Endpoint
from autoenv.core.errors import AutoEnvError
from autoenv.core.job import Job

LABEL = "autoenv.guarded"  # on every container a guarded child creates
HEAD_LIMIT = 64 * 1024
BODY_LIMIT = 1024 * 1024  # a create or exec body: JSON of a few kilobytes
START_SECONDS = 30
REMOVING_AHEAD = 4  # forced removals in flight before the next one waits
REMOVE_SECONDS = 120  # the guard's end waits this long for the removals in flight
OFFLINE_NETWORK = "autoenv-offline"
DEFAULT_NETWORKS = {"", "default", "bridge"}


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k.lower() == name), "")

    @property
    def upgrade(self) -> bool:
        return "upgrade" in self.header("connection").lower()

    def encode(self, body: bytes | None = None) -> bytes:
        """The head as sent upstream: one request a connection (Connection: close) unless it is hijacked."""
        drop = {"connection"} | ({"content-length", "transfer-encoding"} if body is not None else set())
        lines = [f"{self.method} {self.target} {self.version}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in drop]
        lines.append("Connection: Upgrade" if self.upgrade else "Connection: close")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class Guard:
    """Serves `engine`'s API to one evaluation's child on a Unix socket, within autoenv.containers.policy."""

    engine: Endpoint
    share: Path
    mounts: Path
    socket_path: str = ""
    network: str | None = None  # the network a new container joins in place of the default bridge
    owned: policy.Owned = field(default_factory=policy.Owned)
    refused: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    _live: set[asyncio.Task] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.AbstractServer | None = None
    _mounted: int = 0
    spares: bool = True  # start the next task container ahead of need
    started_ahead: int = 0  # creates answered with a spare
    _spare: tuple[str, asyncio.Task] | None = None  # (the create request it answers, its container's id or None)
    _dropping: set[asyncio.Task] = field(default_factory=set)
    _removing: set[asyncio.Task] = field(default_factory=set)  # forced removals done apart
    removed_apart: int = 0

    def __enter__(self) -> Guard:
        self.socket_path = str(self.share.parent / "engine" / "engine.sock")
        Path(self.socket_path).parent.mkdir(exist_ok=True)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="autoenv-engine-guard", daemon=True)
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        started.result(timeout=START_SECONDS)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=self.socket_path, limit=HEAD_LIMIT)

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._thread is not None
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._drop_spare(), self._loop).result(timeout=START_SECONDS * 2)
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._removals_done(), self._loop).result(timeout=REMOVE_SECONDS)
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)  # the server is the loop's: closed in its thread
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=START_SECONDS)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Held here: once the client half-closes, the loop stops watching its socket, and a task reachable only
        # through it would be garbage-collected mid-stream (its socket closed: the client reads an early end).
        task = asyncio.current_task()
        if task is not None:
            self._live.add(task)
        try:
            await self._one(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()
            self._live.discard(task)

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = parse_head(await reader.readuntil(b"\r\n\r\n"))
        path, _ = policy.split(request.target)
        inspect = request.method == "POST" and (path == "/containers/create" or
                                                 (path.startswith("/containers/") and path.endswith("/exec")))
        body: bytes | None = await read_body(reader, request) if inspect else None
        parsed = json.loads(body or b"{}") if inspect else None
        problem = policy.decide(request.method, request.target, parsed, self.owned, self.share)
        if problem is None and path == "/containers/create" and isinstance(parsed, dict):
            problem = self._mount_shares(parsed)
            parsed["Labels"] = {**(parsed.get("Labels") or {}), LABEL: "1"}  # for sweep()
            host = parsed.setdefault("HostConfig", {})
            if self.network and isinstance(host, dict) and host.get("NetworkMode", "") in DEFAULT_NETWORKS:
                host["NetworkMode"] = self.network
                parsed.pop("NetworkingConfig", None)  # the CLI's endpoint settings name the bridge
            body = json.dumps(parsed).encode()
        if problem is not None:
            self.refused.append(f"{request.method} {path}: {problem}")
            await respond(writer, 403, f"autoenv sandbox: {problem}")
            return
        if request.method == "DELETE" and self._removes_apart(path, request.target):
            while len(self._removing) >= REMOVING_AHEAD:
                await asyncio.wait(set(self._removing), return_when=asyncio.FIRST_COMPLETED)
            removal = asyncio.ensure_future(self._remove_apart(request.target, path))
            self._removing.add(removal)
            removal.add_done_callback(self._removing.discard)
            self.removed_apart += 1
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return
        if path == "/containers/create" and isinstance(parsed, dict) and (key := self._spare_key(parsed)) is not None:
            name = policy.split(request.target)[1].get("name", [""])[0]
            held, self._spare = self._spare, (key, asyncio.ensure_future(self._make_spare(parsed)))  # one at a time
            spare = await self._claim(held, key, name)
            if spare is not None:
                self.started_ahead += 1
                self.owned.containers.add(spare)
                if name:
                    self.owned.names.add(name)
                answer = json.dumps({"Id": spare, "Warnings": []}).encode()
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(answer)).encode() + b"\r\nConnection: close\r\n\r\n" + answer)
                await writer.drain()
                return
        try:
            up_reader, up_writer = await self.engine.open()
        except OSError as e:
            self.unreachable.append(f"{request.method} {path}: {type(e).__name__}: {e}")
            await respond(writer, 502, f"autoenv: the container engine at {self.engine.address} is not reachable: {e}")
            return
        try:
            up_writer.write(request.encode(body))
            if body is not None:
                up_writer.write(body)
            else:
                await copy_body(reader, up_writer, request)
            await up_writer.drain()
            if inspect:
                response = await up_reader.read()  # Connection: close, a small JSON answer
                self._record(path, request.target, response)
                writer.write(response)
                await writer.drain()
            elif request.upgrade:  # attach or exec start: a raw stream both ways until both ends close
                await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
            else:
                await pipe(up_reader, writer)
        except (ConnectionResetError, BrokenPipeError) as e:
            self.unreachable.append(f"{request.method} {path}: the engine dropped the connection ({e})")
        finally:
            up_writer.close()

    @staticmethod
    def _removes_apart(path: str, target: str) -> bool:
        """A forced removal of one container (policy has already found it the child's own)."""
        parts = path.strip("/").split("/")
        force = policy.split(target)[1].get("force", [""])[0].lower()
        return len(parts) == 2 and parts[0] == "containers" and force in ("1", "true")

    async def _remove_apart(self, target: str, path: str) -> None:
        status, _ = await self._call("DELETE", target)
        if status == 0:
            self.unreachable.append(f"DELETE {path}: the engine did not answer the removal")

    async def _removals_done(self) -> None:
        if self._removing:
            await asyncio.gather(*self._removing, return_exceptions=True)

    def _spare_key(self, body: dict) -> str | None:
        """The request a spare answers: a task container verifiers' runtime creates, else None."""
        if not self.spares or body.get("Entrypoint") != ["sleep"] or body.get("Cmd") != ["infinity"]:
            return None
        return json.dumps(body, sort_keys=True)

    async def _claim(self, held: tuple[str, asyncio.Task] | None, key: str, name: str) -> str | None:
        """The held spare's id, renamed to `name`, when it was made from the same request and started; else None."""
        if held is None:
            return None
        if held[0] != key:
            self._dropping.add(asyncio.ensure_future(self._remove(held[1])))
            return None
        made = await held[1]
        if made is None:
            return None
        if name:
            status, _ = await self._call("POST", f"/containers/{made}/rename?{urlencode({'name': name})}")
            if status != 204:
                await self._remove(held[1])
                return None
        return made

    async def _make_spare(self, body: dict) -> str | None:
        status, answer = await self._call("POST", "/containers/create", body)
        made = answer.get("Id") if status == 201 else None
        if not made:
            return None
        status, _ = await self._call("POST", f"/containers/{made}/start")
        if status not in (204, 304):
            await self._call("DELETE", f"/containers/{made}?force=1")
            return None
        return str(made)

    async def _remove(self, task: asyncio.Task) -> None:
        with suppress(Exception):
            made = await task
            if made:
                await self._call("DELETE", f"/containers/{made}?force=1")

    async def _drop_spare(self) -> None:
        held, self._spare = self._spare, None
        if held is not None:
            await self._remove(held[1])
        if self._dropping:
            await asyncio.gather(*self._dropping, return_exceptions=True)

    async def _call(self, method: str, target: str, body: dict | None = None) -> tuple[int, dict]:
        """One request of the guard's own to the engine: (status, its JSON answer); (0, {}) when it is not reachable."""
        try:
            reader, writer = await self.engine.open()
        except OSError:
            return 0, {}
        try:
            data = json.dumps(body).encode() if body is not None else b""
            writer.write(f"{method} {target} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
            response = await reader.read()
        except OSError:
            return 0, {}
        finally:
            writer.close()
        head, _, raw = response.partition(b"\r\n\r\n")
        try:
            status = int(head.split(b" ", 2)[1])
            if b"transfer-encoding: chunked" in head.lower():
                raw = dechunk(raw)
            answer = json.loads(raw) if raw.strip() else {}
        except (IndexError, ValueError):
            return 0, {}
        return status, answer if isinstance(answer, dict) else {}

    def _record(self, path: str, target: str, response: bytes) -> None:
        head, _, raw = response.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1:2]
        if not status or not status[0].startswith(b"2"):
            return
        if b"transfer-encoding: chunked" in head.lower():
            raw = dechunk(raw)
        with suppress(ValueError, AttributeError):
            made = json.loads(raw).get("Id", "")
            if path == "/containers/create":
                self.owned.containers.add(made)
                name = policy.split(target)[1].get("name", [""])[0]
                if name:
                    self.owned.names.add(name)
            elif made:
                self.owned.execs.add(made)

    def _mount_shares(self, body: dict) -> str | None:
        """Binds of share folders rewritten to the guard's own folders holding links to their sockets."""
        host = body.get("HostConfig") or {}
        binds = []
        for bind in host.get("Binds") or []:
            source, _, rest = str(bind).partition(":")
            mounted = self._mirror(source)
            if mounted is None:
                return f"binding {source}: not a folder under {self.share}"
            binds.append(f"{mounted}:{rest}" if rest else mounted)
        if binds:
            host["Binds"] = binds
        for mount in host.get("Mounts") or []:
            if mount.get("Type") == "bind":
                mounted = self._mirror(str(mount.get("Source")))
                if mounted is None:
                    return f"binding {mount.get('Source')}: not a folder under {self.share}"
                mount["Source"] = mounted
        return None

    def _mirror(self, source: str) -> str | None:
        """A new folder of the guard's with a hard link to each socket directly in `source` (a folder under the
        share folder, every part opened without following links), or None."""
        relative = Path(source).relative_to(self.share)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        fd = os.open(self.share, flags)
        try:
            for part in relative.parts:
                fd_next = os.open(part, flags, dir_fd=fd)
                os.close(fd)
                fd = fd_next
        except OSError:
            os.close(fd)
            return None
        self._mounted += 1
        target = self.mounts / str(self._mounted)
        target.mkdir(parents=True)
        target_fd = os.open(target, flags)
        try:
            for name in os.listdir(fd):
                with suppress(OSError):
                    if stat.S_ISSOCK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                        os.link(name, name, src_dir_fd=fd, dst_dir_fd=target_fd, follow_symlinks=False)
                        if not stat.S_ISSOCK(os.stat(name, dir_fd=target_fd, follow_symlinks=False).st_mode):
                            os.unlink(name, dir_fd=target_fd)  # swapped between the look and the link
        finally:
            os.close(fd)
            os.close(target_fd)
        return str(target)


def parse_head(data: bytes) -> Request:
    lines = data.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return Request(method, target, version, headers)


async def read_body(reader: asyncio.StreamReader, request: Request) -> bytes:
    if request.header("transfer-encoding").lower() == "chunked":
        out = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return out
            out += await reader.readexactly(size)
            await reader.readexactly(2)
            if len(out) > BODY_LIMIT:
                raise ValueError("request body too large")
    length = int(request.header("content-length") or 0)
    if length > BODY_LIMIT:
        raise ValueError("request body too large")
    return await reader.readexactly(length)


async def copy_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request) -> None:
    """The request's body passed on as it comes (an archive upload can be large)."""
    if request.header("transfer-encoding").lower() == "chunked":
        while True:
            line = await reader.readuntil(b"\r\n")
            writer.write(line)
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                writer.write(await reader.readuntil(b"\r\n"))
                return
            writer.write(await reader.readexactly(size + 2))
            await writer.drain()
    left = int(request.header("content-length") or 0)
    while left > 0:
        data = await reader.read(min(left, 65536))
        if not data:
            return
        writer.write(data)
        await writer.drain()
        left -= len(data)


def dechunk(raw: bytes) -> bytes:
    out = b""
    while raw:
        size_line, _, raw = raw.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out, raw = out + raw[:size], raw[size + 2:]
    return out


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a hijacked stream closes one way at a time (stdin ends, output goes on)
    except (OSError, RuntimeError):
        pass


async def respond(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    body = json.dumps({"message": message}).encode()
    reason = {403: "Forbidden", 502: "Bad Gateway"}[status]
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                 f"Connection: close\r\n\r\n".encode() + body)
    await writer.drain()


def sweep(engine: str = "docker") -> list[str]:
    """Remove the stopped containers guarded children left (an evaluation killed, or an engine stopped, before
    verifiers removed them); running ones may be another evaluation's and stay. The ids removed."""
    try:
        proc = subprocess.run([engine, "ps", "-aq", "--filter", f"label={LABEL}", "--filter", "status=exited",
                               "--filter", "status=created", "--filter", "status=dead"], capture_output=True, text=True,
                              timeout=60, check=False)
        stale = proc.stdout.split()
        if stale:
            subprocess.run([engine, "rm", "-f", *stale], capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return stale


def offline_network(engine: str = "docker") -> str:
    """OFFLINE_NETWORK, created when missing: a bridge without masquerading (no route past the host)."""
    if subprocess.run([engine, "network", "inspect", OFFLINE_NETWORK], capture_output=True, timeout=60,
                      check=False).returncode != 0:
        made = subprocess.run([engine, "network", "create", "--label", LABEL + "=1", "--opt",
                               "com.docker.network.bridge.enable_ip_masquerade=false", OFFLINE_NETWORK],
                              capture_output=True, text=True, timeout=60, check=False)
        if made.returncode != 0 and "already exists" not in made.stderr:
            raise AutoEnvError(f"could not create the containers' offline network {OFFLINE_NETWORK}: "
                               f"{made.stderr.strip()}", where="AUTOENV_CONTAINER_EGRESS=off",
                               fix=f"check `{engine} network ls`, or unset AUTOENV_CONTAINER_EGRESS")
    return OFFLINE_NETWORK


@contextmanager
def guarded(job: Job, engine: Endpoint, offline: bool = False) -> Iterator[tuple[Job, dict[str, str], Guard]]:
    """For the block: a guard for `job`'s child, its folders (the share folder the child's temp files go to,
    bound at the same path in the sandbox), and the variables that point the child's docker CLI at it. `offline`:
    the child's containers join OFFLINE_NETWORK."""
    sweep()
    root = Path(tempfile.mkdtemp(prefix="autoenv-ce-"))  # short: a Unix socket path has at most 107 bytes
    try:
        share, mounts = root / "share", root / "mounts"
        share.mkdir()
        mounts.mkdir()
        with Guard(engine, share, mounts, network=offline_network() if offline else None) as guard:
            env = {var: "" for var in ENGINE_VARS}
            env.update({"DOCKER_HOST": f"unix://{guard.socket_path}", "TMPDIR": str(share)})
            yield job.model_copy(update={"engine_socket": guard.socket_path, "share_dir": str(share)}), env, guard
    finally:
        shutil.rmtree(root, ignore_errors=True)
