"""The warm child, seen from the harness: an evaluation's child forked from a server that has verifiers imported.

A cold child pays for an interpreter and verifiers' import (about 3 s) before it can
import the candidate. The first evaluation of a run starts a server (autoenv.child.forkserver)
in the same bubblewrap sandbox a cold child would get, detached so that it outlives the
evaluation; each evaluation asks it for a fresh child, forked with verifiers already
imported, and imports the candidate there, once. The server exits after `[runtime]
warm_seconds` without a request (config.toml), and `AUTOENV_WARM=0` turns the warm child off.

The child writes only to a staging folder (the server's sandbox was set up once, so the
evaluation's own output folder cannot be shown to it): the harness seeds it with what the
output folder holds (a resumed evaluation's episodes), and after each stage copies the
files the child wrote or changed into the output folder (regular files only: a link the
candidate planted is never followed). When the child ends, every other process in the
sandbox is killed and its /tmp and $HOME emptied (autoenv.child.forkserver), so nothing one
evaluation's candidate leaves behind reaches the next.

Where a warm child cannot be had (the sandbox needs a per-evaluation folder: the
forwarder's socket for a real model; another evaluation holds the server; the server
cannot start), `start` returns None and the caller starts a cold child.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from autoenv.core.cachedir import cache_root
from autoenv.core.job import Job
from autoenv.core.paths import PROJECT
from autoenv.sandbox.candidatevenv import child_python
from autoenv.sandbox.confine import Sandbox
from autoenv.sandbox.forwarder import TOKEN_VAR, forward_root

WARM_VAR = "AUTOENV_WARM"
SERVER_MODULE = "autoenv.child.forkserver"
REPLY_SECONDS = 180.0  # the server's import on a loaded machine, before it answers the first request
STOP_SECONDS = 5.0
PARENT_FILES = {"job.json", "worker.stderr", "worker.stdout", "run.log"}  # the harness's own files in the output folder
NOT_SEEDED = ("previous", "judge")  # earlier evaluations' archives and the judge's files: never the child's to read


def wanted(job: Job) -> bool:
    """Whether this job may use a warm child: [runtime] warm_seconds > 0 and AUTOENV_WARM not off."""
    if os.environ.get(WARM_VAR, "").strip().lower() in ("0", "off", "no", "false"):
        return False
    if job.forward_socket and Path(job.forward_socket).parent.parent != forward_folder():
        return False  # a socket folder the server's sandbox cannot show
    if job.share_dir:
        return False  # a container runtime's guard and share folder are the evaluation's own
    return job.runtime.warm_seconds > 0


def forward_folder() -> Path | None:
    root = forward_root()
    return Path(root) if root else None


def source_stamp() -> list:
    """What the server's code is: every AutoEnv module's size and mtime, and verifiers' version. (A package the
    server imported that an install replaced since is the server's own to notice: autoenv.child.forkserver answers
    `stale` and exits, and a new server starts.)"""
    stamp: list = [sys.executable, importlib.metadata.version("verifiers")]
    for path in sorted((PROJECT / "autoenv").rglob("*.py")):
        st = path.stat()
        stamp.append([str(path.relative_to(PROJECT)), st.st_size, st.st_mtime_ns])
    return stamp


def server_key(job: Job, sandbox: Sandbox, env: dict[str, str], readable: list[Path], writable: list[Path],
               network: bool) -> str:
    """The server a job can use: same code, sandbox, folders, network and environment (the forwarder's token aside).
    The folders count by identity as well as by path: a run folder deleted and made again at the same path is
    another folder, and a server started before holds binds to the deleted one (its chdir would fail)."""
    folders = [Path(job.candidate_dir), *readable, *writable]
    described = {"source": source_stamp(), "sandbox": [sandbox.kind, sandbox.binary],
                 "identity": [_identity(p) for p in sorted(map(str, folders))],
                 "candidate": job.candidate_dir, "readable": sorted(map(str, readable)),
                 "writable": sorted(map(str, writable)), "network": network, "idle": job.runtime.warm_seconds,
                 "env": sorted((k, v) for k, v in env.items() if k != TOKEN_VAR)}
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()


def _identity(path: str) -> list[int] | None:
    """(device, inode) of a folder, None when it does not exist (yet)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def folder_of(job: Job, key: str) -> Path:
    """cache/warm/<candidate>-<key>: the server's socket, lock, log and the child's staging folder."""
    candidate = hashlib.sha256(job.candidate_dir.encode()).hexdigest()[:12]
    return cache_root() / "warm" / f"{candidate}-{key[:16]}"


class WarmChild:
    """A forked child, used like subprocess.Popen by autoenv.sandbox.rollouts.Worker: stdin, kill, wait. Its stdout,
    stderr and event pipe are the Worker's (autoenv.sandbox.childio)."""

    def __init__(self, conn: socket.socket, stdin: IO[str], pid: int, lock: IO[str],
                 slot: Path, out: Path, seen: dict[str, tuple[int, int]]):
        self.conn, self.stdin, self.pid = conn, stdin, pid
        self.returncode: int | None = None
        self.limit = ""  # the limit the server ended the child for ("processes"), if any
        self._lock, self.slot, self.out, self._seen = lock, slot, out, seen
        self._reply = b""
        self.unpublished: dict[str, str] = {}

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(OSError):
                self.conn.sendall(b"kill\n")

    def wait(self, timeout: float | None = None) -> int:
        """The child's exit code, as the server reports it once it has ended and the sandbox is swept."""
        if self.returncode is not None:
            return self.returncode
        self.conn.settimeout(timeout)
        try:
            while b"\n" not in self._reply:
                more = self.conn.recv(256)
                if not more:
                    break
                self._reply += more
        except TimeoutError:
            raise subprocess.TimeoutExpired(SERVER_MODULE, timeout or 0) from None
        except OSError:
            pass
        words = self._reply.decode(errors="replace").split()
        self.returncode = int(words[1]) if len(words) >= 2 and words[0] == "exit" else -9
        self.limit = words[2] if len(words) >= 3 and words[0] == "exit" else ""
        return self.returncode

    def publish(self) -> None:
        """Copy what the child wrote or changed in its staging folder into the evaluation's output folder: a file
        that grew past what was published, which it still ends as (traces, logs), gets its new bytes appended; any
        other is copied whole. Called after each stage and, throttled, while one runs, so the output folder follows
        the child as a cold child's would."""
        for rel, stamp in snapshot(self.slot).items():
            before = self._seen.get(rel)
            if before == stamp or rel in PARENT_FILES:
                continue
            target = self.out / rel
            try:
                if stamp == DIRECTORY:
                    target.mkdir(parents=True, exist_ok=True)
                elif stamp[0] > MAX_PUBLISHED_BYTES:
                    raise OSError(f"{stamp[0]} bytes, over the {MAX_PUBLISHED_BYTES} a file may have")
                elif before not in (None, DIRECTORY) and stamp[0] > before[0] and target.is_file() \
                        and target.stat().st_size == before[0] and grew_from(self.slot, rel, target, before[0]):
                    stamp = append_tail(self.slot, rel, target, before[0])
                else:
                    copy_file(self.slot, rel, target)
                self.unpublished.pop(rel, None)
            except FileNotFoundError:  # gone since the snapshot (a file written, then renamed): the next one sees
                continue
            except OSError as e:  # swapped for a link or a fifo, too large: not published
                self.unpublished[rel] = str(e)
            self._seen[rel] = stamp
        if self.unpublished or (self.out / UNPUBLISHED).is_file():
            (self.out / UNPUBLISHED).write_text(json.dumps(self.unpublished, indent=1))

    def release(self) -> None:
        """After the child has ended: its files published, the staging folder emptied, the server free."""
        self.publish()
        with contextlib.suppress(OSError):
            self.stdin.close()
        self.conn.close()
        empty(self.slot)
        self._lock.close()


DIRECTORY = (-1, -1)
MAX_PUBLISHED_BYTES = 2 << 30  # a sparse file of a terabyte costs the child nothing and a copy everything
UNPUBLISHED = "unpublished.json"  # what the child wrote that was not copied, and why


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every regular file (size, mtime) and folder under `root`, links never followed."""
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in dirs:
            if not (base / name).is_symlink():
                found[str((base / name).relative_to(root))] = DIRECTORY
        for name in files:
            st = os.lstat(base / name)
            if (st.st_mode & 0o170000) == 0o100000:  # a regular file; links, fifos and sockets are not copied
                found[str((base / name).relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return found


def open_beneath(root: Path, rel: str) -> int:
    """A descriptor of `root`/`rel` reached one folder at a time without following a link at any step, and only if
    it is a regular file: the child may swap a folder for a link to elsewhere between a snapshot and the copy."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        *folders, name = Path(rel).parts
        for part in folders:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        found = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(found).st_mode):
        os.close(found)
        raise OSError(f"{rel} is not a regular file")
    return found


def copy_file(slot: Path, rel: str, target: Path) -> None:
    """The staged `rel` (never through a link) to `target`, replaced whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    with os.fdopen(open_beneath(slot, rel), "rb") as src, open(partial, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.replace(partial, target)


BOUNDARY_BYTES = 4096


def grew_from(slot: Path, rel: str, target: Path, size: int) -> bool:
    """Whether the staged `rel` still holds, just before `size`, the bytes `target` ends with: appended to, not
    rewritten."""
    start = max(0, size - BOUNDARY_BYTES)
    try:
        fd = open_beneath(slot, rel)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as src, open(target, "rb") as dst:
        src.seek(start)
        dst.seek(start)
        return src.read(size - start) == dst.read(size - start)


def append_tail(slot: Path, rel: str, target: Path, offset: int) -> tuple[int, int]:
    """The staged `rel`'s bytes from `offset` on, appended to `target`; the stamp of what was read."""
    fd = open_beneath(slot, rel)
    with os.fdopen(fd, "rb") as src, open(target, "ab") as dst:
        st = os.fstat(src.fileno())
        src.seek(offset)
        size = offset + dst.write(src.read(st.st_size - offset))
    return (size, st.st_mtime_ns) if size == st.st_size else (size, -2)


def empty(folder: Path, device: int | None = None) -> None:
    """`folder` emptied, never removed, and nothing on another file system touched. The staging folder: the server's
    sandbox shows this very folder (a new one at the same path would not be the one it sees). The sandbox's private
    /tmp and $HOME (autoenv.child.forkserver): the Python install, the venv, caches and the staging folder are mounted into
    them, and their files are not the evaluation's to delete."""
    device = os.lstat(folder).st_dev if device is None else device
    for entry in os.scandir(folder):
        try:
            st = entry.stat(follow_symlinks=False)
            if st.st_dev != device:  # a mount point: left alone, with all below it
                continue
            if entry.is_dir(follow_symlinks=False):
                empty(Path(entry.path), device)
                os.rmdir(entry.path)  # fails, harmlessly, where a mount point lies below
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def seed(out: Path, slot: Path) -> dict[str, tuple[int, int]]:
    """The staging folder made to hold what the output folder holds (a resumed evaluation's episodes)."""
    empty(slot)
    for rel, stamp in snapshot(out).items():
        if rel in PARENT_FILES or rel.split(os.sep)[0] in NOT_SEEDED:
            continue
        if stamp == DIRECTORY:
            (slot / rel).mkdir(parents=True, exist_ok=True)
        else:
            copy_file(out, rel, slot / rel)
    return snapshot(slot)


def start(job: Job, sandbox: Sandbox, env: dict[str, str], readable: list[Path], writable: Iterable[Path],
          network: bool, fds: tuple[int, int, int]) -> WarmChild | None:
    """A child forked by this job's warm server (started now if none is running), or None: use a cold one. `fds`:
    the write ends of the child's stdout, stderr and event pipes (autoenv.sandbox.childio)."""
    if sandbox.kind not in ("bwrap", "none") or not wanted(job):
        return None
    forwarding = Path(job.forward_socket).parent if job.forward_socket else None
    others = [p for p in writable if Path(p) not in (job.out, forwarding)]
    if forwarding is not None:  # every evaluation's forwarder socket folder is made in this one (token-guarded)
        readable = [*readable, forwarding.parent]
    key = server_key(job, sandbox, env, readable, others, network)
    folder = folder_of(job, key)
    folder.mkdir(parents=True, exist_ok=True)
    lock = open(folder / "lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another evaluation holds this server: a cold child, not a wait
        lock.close()
        return None
    slot = folder / "slot"
    try:
        if not slot.is_dir():  # new, or removed under a running server (whose sandbox shows the old one)
            stop(folder)
            slot.mkdir()
        seen = seed(job.out, slot)
        conn = connect(folder)
        child = request(conn, job, slot, env, fds, folder) if conn is not None else STALE
        if child == STALE:  # none running, or one whose imported code was replaced since it started: a new one
            conn = launch(job, sandbox, env, readable, [slot, *others], network, folder, key)
            child = request(conn, job, slot, env, fds, folder)
    except (OSError, ValueError, TimeoutError) as e:
        (folder / "server.log").open("a").write(f"{time.ctime()}: no warm child: {type(e).__name__}: {e}\n")
        lock.close()
        return None
    if not isinstance(child, tuple):
        lock.close()
        return None
    conn_, stdin, pid = child
    return WarmChild(conn_, stdin, pid, lock, slot, job.out, seen)


def address(folder: Path) -> str:
    """The server's socket: an abstract name (no file to replace, no path length limit), which a candidate in
    a sandbox with a network namespace of its own cannot even reach."""
    return f"\0autoenv-warm-{folder.name}"


def connect(folder: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(address(folder))
    except OSError:  # no server (never started, idle, or gone)
        conn.close()
        return None
    return conn


def launch(job: Job, sandbox: Sandbox, env: dict[str, str], readable: list[Path], writable: list[Path],
           network: bool, folder: Path, key: str) -> socket.socket:
    """Start this key's server, detached, in the sandbox; stop the candidate's servers of older keys."""
    stop_others(folder)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + STOP_SECONDS
    while True:  # a server that has just said `stale` or `stopping` holds the name until its process is gone
        try:
            listener.bind(address(folder))
            break
        except OSError:
            if time.monotonic() > deadline:
                listener.close()
                raise
            time.sleep(0.05)
    listener.listen(8)
    token = secrets.token_hex(16)
    (folder / "token").unlink(missing_ok=True)
    with os.fdopen(os.open(folder / "token", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(token)
    read_end, write_end = os.pipe()
    os.write(write_end, token.encode())
    os.close(write_end)
    cmd = sandbox.wrap([child_python(Path(job.candidate_dir)), "-m", SERVER_MODULE, str(listener.fileno()), str(read_end),
                        str(job.runtime.warm_seconds), "1" if sandbox.kind == "bwrap" else "0"],
                       readable=readable, writable=writable, network=network, persist=True)
    with open(folder / "server.log", "a") as log:
        log.write(f"{time.ctime()}: starting the warm server for {job.candidate_dir} (key {key[:16]})\n")
        log.flush()
        subprocess.Popen(cmd, pass_fds=(listener.fileno(), read_end), stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, env={k: v for k, v in env.items() if k != TOKEN_VAR},
                         cwd=job.candidate_dir, start_new_session=True)
    os.close(read_end)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(address(folder))
    listener.close()
    return conn


STALE = "stale"


def request(conn: socket.socket, job: Job, slot: Path, env: dict[str, str], fds: tuple[int, int, int], folder: Path
            ) -> tuple[socket.socket, IO[str], int] | str | None:
    """Ask the server for a child running `job` with its output in `slot`; None if it does not start one, STALE if
    it has exited because code it imported has changed on disk."""
    staged = job.model_copy(update={"out_dir": str(slot)})
    staged.write(slot / "job.json")
    child_in, stdin_w = os.pipe()
    message = {"token": (folder / "token").read_text().strip(), "job": str(slot / "job.json"), "env": env,
               "cwd": job.candidate_dir, "processes": job.resources.processes}
    try:
        socket.send_fds(conn, [json.dumps(message).encode() + b"\n"], [child_in, *fds])
    finally:
        os.close(child_in)
    conn.settimeout(REPLY_SECONDS)
    reply = b""
    try:
        while b"\n" not in reply:
            more = conn.recv(256)
            if not more:
                break
            reply += more
    except OSError:
        reply = b""
    words = reply.decode(errors="replace").split()
    if len(words) < 2 or words[0] != "started":
        os.close(stdin_w)
        conn.close()
        return STALE if words[:1] == [STALE] else None
    conn.settimeout(None)
    return conn, os.fdopen(stdin_w, "w"), int(words[1])


def stop_others(folder: Path) -> None:
    """Servers of this candidate under another key (older code, other settings) stop now, not after their idle."""
    prefix = folder.name.split("-")[0]
    for other in folder.parent.glob(f"{prefix}-*"):
        if other != folder:
            stop(other)


def stop(folder: Path) -> bool:
    """Ask the server in `folder` to exit (it does between evaluations). False if none answered."""
    conn = connect(folder)
    if conn is None:
        return False
    with conn:
        try:
            token = (folder / "token").read_text().strip()
            conn.settimeout(STOP_SECONDS)
            conn.sendall(json.dumps({"token": token, "stop": True}).encode() + b"\n")
            conn.recv(64)
        except OSError:
            pass
    return True


def stop_all() -> int:
    """Every warm server of this user's cache asked to exit; how many answered."""
    root = cache_root() / "warm"
    return sum(stop(folder) for folder in sorted(root.iterdir())) if root.is_dir() else 0
