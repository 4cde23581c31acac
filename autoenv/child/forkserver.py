"""The warm child's server: verifiers imported once, a fresh child forked for each evaluation.

Run as `python -m autoenv.child.forkserver LISTEN_FD TOKEN_FD IDLE_SECONDS SANDBOXED` by
autoenv.sandbox.warmchild, inside the same bubblewrap sandbox a cold child gets, with its listening
Unix socket (an abstract name, bound by the harness, out of reach of a network namespace
of the sandbox's own) and a pipe holding its token inherited on those descriptors. It imports
verifiers and the child's stages (never the candidate), then serves one evaluation at a
time:

1. a connection from outside the sandbox (SO_PEERCRED reports pid 0 for a process
   outside its pid namespace; the candidate's processes are inside it) sends the
   token it was started with, the child's job file, environment, working folder and
   process limit, and its stdin, stdout, stderr and event pipe as file descriptors;
2. it checks that no module it imported has changed on disk since it started (an install
   upgraded a package): if one has, it answers `stale` and exits, and the harness starts a
   new server;
3. the server forks; the fork takes those descriptors, that environment and folder, and
   runs autoenv.child.main's stage loop: the candidate is imported there, once, as in a cold
   child, and writes only to the job's output folder (the one folder the sandbox lets it
   write besides its private /tmp and $HOME);
4. when the fork ends, or the harness says `kill` or hangs up, or the sandbox holds more
   processes than the limit (counted here, outside the candidate's reach: `exit -9 processes`),
   every other process in the sandbox is killed (a candidate's daemon does not outlive its
   evaluation), /tmp and $HOME are emptied, and the harness gets the exit status.

The server is not dumpable, so nothing in the sandbox can read or patch its memory; it
exits after IDLE_SECONDS without a request.
"""

from __future__ import annotations

import contextlib
import ctypes
import hmac
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from pathlib import Path

from autoenv.child import main as child  # the stages' code, never the candidate's
from autoenv.sandbox.childio import descendants
from autoenv.sandbox.confine import private_folders
from autoenv.sandbox.warmchild import empty

REQUEST_BYTES = 1 << 20
REQUEST_SECONDS = 10.0
PR_SET_DUMPABLE = 4
WARM_IMPORTS = ("verifiers.v1.tasksets", "verifiers.v1.envs", "verifiers.v1.utils.trace_store", "openai",
                "openai.resources", "openai.types.chat", "mcp.client.session", "mcp.client.stdio",
                "mcp.client.streamable_http", "mcp.server", "mcp.server.mcpserver", "httpx", "anyio",
                "starlette.applications", "uvicorn", "sse_starlette", "numpy")
"""What verifiers imports only once an evaluation needs it (loading a taskset, a chat client, tool servers):
a second of imports every evaluation's child would pay again, paid once here instead. Third-party and verifiers'
own modules only, never the candidate's."""
SWEEP_ROUNDS = 50


def not_dumpable() -> None:
    """No ptrace, no /proc/<pid>/mem from the sandbox's other processes."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def from_outside(conn: socket.socket, sandboxed: bool) -> bool:
    """The peer is this user's, and (sandboxed) outside the sandbox: SO_PEERCRED reports pid 0 for a process
    outside this pid namespace, and every process of the candidate is inside it."""
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid == os.getuid() and (pid == 0 or not sandboxed)


CHILD_FDS = 4  # stdin, stdout, stderr and the event pipe (autoenv.core.events)
COUNT_SECONDS = 0.1  # how often the sandbox's processes are counted against the limit


def read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: a JSON line and CHILD_FDS descriptors."""
    conn.settimeout(REQUEST_SECONDS)
    data, fds, _, _ = socket.recv_fds(conn, REQUEST_BYTES, CHILD_FDS)
    while not data.endswith(b"\n") and len(data) < REQUEST_BYTES:
        more = conn.recv(REQUEST_BYTES)
        if not more:
            break
        data += more
    conn.settimeout(None)
    return json.loads(data), fds


CHILD_NAME = b"autoenv-child"  # the fork's process name (its command line stays the server's)
PR_SET_NAME = 15


def run_fork(request: dict, fds: list[int], closing: list[int]) -> int:
    """In the fork: become the evaluation's child (autoenv.child.main) with the harness's descriptors."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(CHILD_NAME), 0, 0, 0)
    for fd in closing:
        os.close(fd)
    *stdio, events = fds
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    importlib.invalidate_caches()  # the candidate's files changed since the server started
    sys.argv = [child.__file__, request["job"]]  # as `python -m autoenv.child.main JOB` has it
    return child.forked(Path(request["job"]), started=time.time(), events_fd=events)


def sweep(own: set[int]) -> None:
    """Kill every process of the sandbox's pid namespace but the server and its init."""
    for _ in range(SWEEP_ROUNDS):
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in own]
        if not others:
            return
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reap()
        time.sleep(0.01)


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def imported() -> dict[str, int]:
    """The file of every module the server has imported, with its mtime: the code every fork inherits."""
    stamps = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            with contextlib.suppress(OSError):
                stamps[path] = os.stat(path).st_mtime_ns
    return stamps


def changed(stamps: dict[str, int]) -> str | None:
    """A module file replaced or removed since the server imported it (an install upgraded a package), or None."""
    for path, mtime in stamps.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return path
        except OSError:
            return path
    return None


def serve_one(conn: socket.socket, listener: socket.socket, token: str, sandboxed: bool, stamps: dict[str, int]
              ) -> bool:
    """One request served; True when the server should exit (asked to stop, or its imported code changed)."""
    request, fds = read_request(conn)
    if not hmac.compare_digest(str(request.get("token", "")), token) or len(fds) != CHILD_FDS:
        for fd in fds:
            os.close(fd)
        if request.get("stop") and hmac.compare_digest(str(request.get("token", "")), token):
            conn.sendall(b"stopping\n")
            return True
        return False
    stale = changed(stamps)
    if stale:  # a fork would run the old code: the harness starts a new server
        for fd in fds:
            os.close(fd)
        print(f"stale: {stale} changed since the server started", flush=True)
        conn.sendall(b"stale\n")
        return True
    pid = os.fork()
    if pid == 0:  # the fork: never returns into the server's loop
        code = 1
        try:
            code = run_fork(request, fds, [listener.fileno(), conn.fileno()])
        except BaseException:  # noqa: BLE001 (reported on the child's stderr, which is the harness's file)
            traceback.print_exc()
        finally:
            child.leave(code)  # the candidate's buffered stdout and stderr flushed, then no teardown
    for fd in fds:
        os.close(fd)
    conn.sendall(f"started {pid}\n".encode())
    limit = request.get("processes")
    status, why = watch(pid, conn, limit if isinstance(limit, int) else None, sandboxed)
    if sandboxed:
        sweep({1, os.getpid()})
        for folder in (Path("/tmp"), Path.home(), *private_folders()):  # uv's private cache root
            if folder.is_dir():
                empty(folder)
    try:
        conn.sendall(f"exit {status}{' ' + why if why else ''}\n".encode())
    except OSError:
        pass
    return False


def watch(pid: int, conn: socket.socket, processes: int | None = None, sandboxed: bool = True) -> tuple[int, str]:
    """Wait for the fork to end; kill its session when the harness says so or hangs up, or when the sandbox holds
    more than `processes` processes besides the server and its init (unsandboxed: the fork and its descendants).
    Its exit code, and `processes` if that limit ended it."""
    pidfd = os.pidfd_open(pid)
    why = ""
    try:
        while True:
            ready, _, _ = select.select([pidfd, conn.fileno()], [], [], COUNT_SECONDS if processes else None)
            if pidfd in ready:
                break
            if not ready:
                if processes and (counted({1, os.getpid()}) if sandboxed else descendants(pid)) > processes:
                    why = "processes"
                    kill_session(pid)
                    break
                continue
            try:
                said = conn.recv(64)
            except OSError:
                said = b""
            if not said or b"kill" in said:
                kill_session(pid)
                break
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status), why
    finally:
        os.close(pidfd)


def kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def counted(own: set[int]) -> int:
    """The processes of the sandbox's pid namespace but `own` (threads are not processes)."""
    return sum(1 for p in os.listdir("/proc") if p.isdigit() and int(p) not in own)


def main(argv: list[str]) -> int:
    listen_fd, token_fd, idle, sandboxed = int(argv[0]), int(argv[1]), float(argv[2]), argv[3] == "1"
    with os.fdopen(token_fd) as stream:
        token = stream.read().strip()
    not_dumpable()
    listener = socket.socket(fileno=listen_fd)
    started = time.time()
    child.import_verifiers(*WARM_IMPORTS)  # deferred to here, the point of the server: paid once, not per evaluation
    stamps = imported()
    print(f"ready in {time.time() - started:.2f} s", flush=True)
    while True:
        ready, _, _ = select.select([listener], [], [], idle)
        if not ready:
            return 0
        conn, _ = listener.accept()
        with conn:
            if not from_outside(conn, sandboxed):  # a candidate's process, or another user's
                continue
            try:
                if serve_one(conn, listener, token, sandboxed, stamps):
                    return 0
            except (OSError, ValueError, json.JSONDecodeError) as e:
                print(f"request refused: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
