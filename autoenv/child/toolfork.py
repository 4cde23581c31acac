"""The candidate's tool servers forked from a copy of the child made before the candidate was imported.

verifiers starts each toolset's server on this host as `python -m <the toolset's module>` in the
background (`SubprocessRuntime.run_background`, the subprocess runtime's servers): a fresh interpreter
that imports verifiers, MCP's server and uvicorn before it serves (3.5 to 4.5 CPU-seconds a server on
the 2-core machine, measured with process accounting; an evaluation of a tool environment starts one
per stage that plays rollouts: three for an offline evaluation of examples/shopping).

The child forks a template (the "forker", process name `autoenv-forker`) right after verifiers'
import and before anything of the candidate's is imported or any stage runs: a process with
verifiers loaded and nothing of the candidate's. The child's `run_background` hands it a request for
exactly that command (`[sys.executable, "-m", MODULE]`, nothing else) with the server's environment,
working folder and log file; the forker imports what a tool server needs (once, on its first request)
and forks the server (`autoenv-tools`), which becomes what a fresh `python -m MODULE` would be: its own
session, the log as stdout and stderr, exactly the environment verifiers built for it (keys dropped,
as verifiers drops them), that working folder first on sys.path, the module run as `__main__`, the
interpreter's exit (non-daemon threads joined, the server's own atexit hooks run). Every other command,
and every request the forker cannot serve (it has died, the fork failed, the environment changes a
PYTHON* variable the interpreter reads at start), is started as a process, as before.

The server is the forker's child, so its exit status reaches the child through a pipe the forker writes
when it reaps it; verifiers stops it as it stops any background process (its process group, SIGTERM
then SIGKILL). The forker holds no descriptor of the child's but stdin (as a subprocess would inherit
it) and its request socket; when the child ends, however it ends, the socket closes and the forker
kills its servers and exits (the kernel's parent-death signal as the backstop). Inside the sandbox it
is one process more than before, counted against `[limits] processes` like any other.
`AUTOENV_TOOLFORK=0` starts every tool server as a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import io
import json
import os
import re
import runpy
import select
import signal
import socket
import sys
import threading
import traceback
from typing import Any

VAR = "AUTOENV_TOOLFORK"
FORKER_NAME = b"autoenv-forker"
SERVER_NAME = b"autoenv-tools"
SERVER_IMPORTS = ("uvicorn", "mcp.server.mcpserver", "mcp.server.transport_security", "httpx",
                  "starlette.applications", "sse_starlette")
"""What verifiers' tool server imports on top of verifiers (autoenv.child.forkserver's WARM_IMPORTS has them too)."""
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
MESSAGE_BYTES = 4 << 20
REPLY_SECONDS = 120.0  # the forker's first answer imports MCP's server (seconds on a loaded machine)
PR_SET_NAME, PR_SET_PDEATHSIG = 15, 1

_forker: _Forker | None = None


def wanted() -> bool:
    return os.environ.get(VAR, "").strip().lower() not in ("0", "off", "no", "false")


def start(candidate_dir: str | None = None) -> bool:
    """Fork the forker (called once, after verifiers' import, before the candidate's) and route verifiers'
    background `python -m` commands to it. False when it is off or cannot be forked."""
    global _forker
    if _forker is not None or not wanted():
        return _forker is not None
    path = list(sys.path)
    if candidate_dir and candidate_dir in path:  # the child's own addition (autoenv.child.main.prepare)
        path.remove(candidate_dir)
    if path and not sys.flags.safe_path:  # the child's `-m` entry (its working folder); a server gets its own
        path = path[1:]
    for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice by a fork
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return False
    if pid == 0:
        code = 70
        try:
            ours.close()
            code = _Template(theirs, path).serve()
        finally:
            os._exit(code)
    theirs.close()
    _forker = _Forker(ours, pid)
    _route()
    return True


def _name(name: bytes) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


def _on_parent_death(sig: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def _leave(*_: Any) -> None:
    raise SystemExit(0)


# ---- the child's side ----------------------------------------------------------------------------------------------


class _Forker:
    def __init__(self, sock: socket.socket, pid: int):
        self.sock, self.pid = sock, pid
        self.sock.settimeout(REPLY_SECONDS)
        self.lock = threading.Lock()
        self.dead = False

    def spawn(self, module: str, env: dict[str, str], cwd: str, log_fd: int, status_fd: int) -> int | None:
        """The forked server's pid, or None when the forker cannot serve (the caller starts a process)."""
        request = json.dumps({"module": module, "env": env, "cwd": cwd}).encode()
        with self.lock:
            if self.dead:
                return None
            try:
                socket.send_fds(self.sock, [request], [log_fd, status_fd])
                reply = self.sock.recv(MESSAGE_BYTES)
            except OSError:
                reply = b""
            if not reply:
                self.dead = True
                return None
        answer = json.loads(reply)
        return int(answer["pid"]) if answer.get("pid") else None


class ForkedProcess:
    """The forked server, as verifiers' subprocess runtime handles a background process: `pid` (its own process
    group), `returncode` once it has ended, `wait()`."""

    def __init__(self, pid: int, status_fd: int):
        self.pid = pid
        self.returncode: int | None = None
        self._status_fd = status_fd
        os.set_blocking(status_fd, False)
        self._bytes = b""

    def _read(self) -> bool:
        """Whether the forker has said how the server ended (or is gone: then it was killed)."""
        try:
            while chunk := os.read(self._status_fd, 64):
                self._bytes += chunk
        except BlockingIOError:
            return False
        except OSError:
            pass
        text = self._bytes.decode(errors="replace").strip()
        self.returncode = int(text) if re.fullmatch(r"-?\d+", text) else -signal.SIGKILL
        return True

    async def wait(self) -> int:
        if self.returncode is None and not self._read():
            loop = asyncio.get_running_loop()
            ended = loop.create_future()

            def readable() -> None:
                if self._read() and not ended.done():
                    ended.set_result(None)

            loop.add_reader(self._status_fd, readable)
            try:
                await ended
            finally:
                loop.remove_reader(self._status_fd)
        if self._status_fd >= 0:
            os.close(self._status_fd)
            self._status_fd = -1
        assert self.returncode is not None
        return self.returncode


def forkable(argv: list[str], env: dict[str, str]) -> str | None:
    """The module of a `[sys.executable, "-m", MODULE]` command the forker can start with this environment."""
    if len(argv) != 3 or argv[0] != sys.executable or argv[1] != "-m" or not MODULE.fullmatch(argv[2]):
        return None
    start_vars = {k for k in (*env, *os.environ) if k.startswith("PYTHON")}
    if any(env.get(k) != os.environ.get(k) for k in start_vars):
        return None  # the interpreter reads these at start: a fork already started with the child's
    return argv[2]


def _route() -> None:
    """verifiers' subprocess runtime hands its background `python -m` servers to the forker."""
    from verifiers.v1.runtimes.subprocess import SubprocessRuntime  # deferred: verifiers only in the child

    stock = SubprocessRuntime.run_background
    if getattr(stock, "autoenv_forked", False):
        return

    async def run_background(self, argv: list[str], env: dict[str, str], log: str) -> None:
        full_env = {k: v for k, v in os.environ.items() if "API_KEY" not in k.upper()}
        full_env.update(self.process_env(env))
        module = forkable(list(argv), full_env)
        if module is None or _forker is None or self.workdir is None:
            return await stock(self, argv, env, log)
        read_end, write_end = os.pipe()
        try:
            with (self.workdir / log).open("wb") as logfile:
                pid = await asyncio.to_thread(_forker.spawn, module, full_env, str(self.workdir), logfile.fileno(),
                                              write_end)
        finally:
            os.close(write_end)
        if pid is None:
            os.close(read_end)
            return await stock(self, argv, env, log)
        self._background.append(ForkedProcess(pid, read_end))

    run_background.autoenv_forked = True  # type: ignore[attr-defined]  # a marker on our own function
    SubprocessRuntime.run_background = run_background  # the one route in


# ---- the forker ----------------------------------------------------------------------------------------------------


class _Template:
    """The forker's loop: one request at a time, a server forked for each, each one's end written to its pipe."""

    def __init__(self, sock: socket.socket, path: list[str]):
        self.sock, self.path = sock, path
        self.servers: dict[int, int] = {}  # pid -> the status pipe's write end
        self.imported = False

    def serve(self) -> int:
        _name(FORKER_NAME)
        _on_parent_death(signal.SIGTERM)  # the child gone: SIGTERM, and the loop's end kills the servers' groups
        keep = self.sock.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)  # the child's event pipe, its relay's socket, its logs: not the forker's
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, _leave)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        try:
            while True:
                ready, _, _ = select.select([self.sock.fileno(), wake_r], [], [])
                if wake_r in ready:
                    with contextlib.suppress(OSError):
                        os.read(wake_r, 4096)
                self.reap()
                if self.sock.fileno() in ready and not self.request():
                    return 0
        finally:
            for pid in list(self.servers):
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)

    def reap(self) -> None:
        while self.servers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = self.servers.pop(pid, None)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
                os.close(fd)

    def request(self) -> bool:
        try:
            message, fds, _, _ = socket.recv_fds(self.sock, MESSAGE_BYTES, 4)
        except OSError:
            return False
        if not message:
            for fd in fds:
                os.close(fd)
            return False
        pid = None
        try:
            if len(fds) == 2:
                pid = self.fork(json.loads(message), fds[0], fds[1])
        except Exception:  # the child starts the server as a process instead
            pid = None
        finally:
            for fd in fds if pid is None else fds[:1]:  # a server's status pipe is written when it is reaped
                os.close(fd)
        try:
            self.sock.send(json.dumps({"pid": pid}).encode())
        except OSError:
            return False
        return True

    def fork(self, request: dict[str, Any], log_fd: int, status_fd: int) -> int:
        if not self.imported:
            self.imported = True
            for name in SERVER_IMPORTS:
                with contextlib.suppress(Exception):
                    importlib.import_module(name)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _Server(request, log_fd, status_fd, self).run()
            finally:
                os._exit(code)
        self.servers[pid] = status_fd
        return pid


def fresh_state() -> None:
    """What a fresh interpreter would not share with the template: the temporary folder tempfile chose (read again
    from this environment's TMPDIR) and numpy's global random state (Python's own `random` reseeds itself at fork)."""
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        setattr(tempfile, "tempdir", None)  # noqa: B010 (a module the template may not have loaded)
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        with contextlib.suppress(Exception):
            numpy_random.seed()


def _stream(fd: int, old: Any) -> io.TextIOWrapper:
    """A fresh interpreter's stdout (fd 1: block-buffered to a file, unbuffered with PYTHONUNBUFFERED) or stderr
    (fd 2: line-buffered, backslashreplace), in the encoding the stream it replaces had."""
    raw = io.FileIO(fd, "w", closefd=False)
    encoding = getattr(old, "encoding", None) or "utf-8"
    if fd == 2:
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors="backslashreplace",
                                line_buffering=True)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors=getattr(old, "errors", None),
                            write_through=bool(os.environ.get("PYTHONUNBUFFERED")))


class _Server:
    """In the fork: what `python -m MODULE` would be, then its exit."""

    def __init__(self, request: dict[str, Any], log_fd: int, status_fd: int, template: _Template):
        self.request, self.log_fd, self.status_fd, self.template = request, log_fd, status_fd, template

    def run(self) -> int:
        os.setsid()
        _name(SERVER_NAME)
        _on_parent_death(signal.SIGKILL)  # the forker killed outright: its servers with it
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(self.log_fd, 1)
        os.dup2(self.log_fd, 2)
        os.closerange(3, 1 << 16)  # the forker's socket, its other servers' pipes
        cwd, module = self.request["cwd"], self.request["module"]
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(self.request["env"])
        fresh_state()
        sys.stdout, sys.stderr = _stream(1, sys.stdout), _stream(2, sys.stderr)
        sys.path[:] = [*([] if sys.flags.safe_path else [cwd]), *self.template.path]  # as `-m` makes it
        sys.argv = [sys.argv[0] if sys.argv else ""]
        getattr(sys.modules.get("atexit"), "_clear", lambda: None)()  # the child's hooks are not the server's
        code = 0
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            traceback.print_exc()
            code = 128 + signal.SIGINT
        except BaseException:
            traceback.print_exc()
            code = 1
        return self.finish(code)

    def finish(self, code: int) -> int:
        """The interpreter's end: its non-daemon threads joined, its atexit hooks run, its streams flushed."""
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                with contextlib.suppress(RuntimeError):
                    thread.join()
        with contextlib.suppress(Exception):
            getattr(sys.modules.get("atexit"), "_run_exitfuncs", lambda: None)()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        return code

