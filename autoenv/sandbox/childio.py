"""The child's output, seen from the harness: its event pipe, its stdout and stderr kept as capped logs, its limits.

The child (autoenv.child.main) sends its events on a pipe of their own (autoenv.core.events);
its stdout and stderr are the candidate's to print on, so they are only logs: a thread per
stream copies at most LOG_BYTES of each into `worker.stdout` / `worker.stderr` in the outputs
folder, notes where it stopped, and reads the rest away, so a candidate printing without end
neither blocks on a full pipe nor fills the disk or the harness's memory.

The limits of [limits] (autoenv.child.rlimits sets the kernel's in the child) show up as the
candidate's failures: `limit_hit` names the limit behind an error the child reported or died of,
and `ProcessWatch` counts a cold child's processes from outside, as the warm server
(autoenv.child.forkserver) counts a warm child's.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from autoenv.core.job import ResourceLimits

LOG_BYTES = 4 << 20
CHUNK = 1 << 16
JOIN_SECONDS = 5.0
COUNT_SECONDS = 0.1


class CappedLog:
    """A pipe whose read end a thread copies into `path`, at most `limit` bytes, then a note, then nothing."""

    def __init__(self, path: Path, limit: int = LOG_BYTES, append: bool = False):
        self.path, self.limit, self.mode = path, limit, "ab" if append else "wb"
        self.read_fd, self.write_fd = os.pipe()
        self.written = self.dropped = 0
        self._thread = threading.Thread(target=self._copy, name=f"autoenv-log-{path.name}", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        with open(self.path, self.mode) as log, os.fdopen(self.read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(CHUNK):
                keep = chunk[:max(0, self.limit - self.written)]
                if keep:
                    log.write(keep)
                    log.flush()
                    self.written += len(keep)
                if len(keep) < len(chunk):
                    if not self.dropped:
                        log.write(f"\n[autoenv: {self.path.name} capped at {self.limit} bytes; the rest of what "
                                  "the child wrote is dropped]\n".encode())
                        log.flush()
                    self.dropped += len(chunk) - len(keep)

    def close_writer(self) -> None:
        """The harness's copy of the write end, closed once the child holds its own."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def join(self, timeout: float = JOIN_SECONDS) -> None:
        """Wait until the child's side is closed and everything read (a daemon still holding it: not longer)."""
        self.close_writer()
        self._thread.join(timeout)


class ChildPipes:
    """The three pipes of one child: events (read here), stdout and stderr (capped logs in `out`)."""

    def __init__(self, out: Path, append: bool = False):
        self.stdout = CappedLog(out / "worker.stdout", append=append)
        self.stderr = CappedLog(out / "worker.stderr", append=append)
        read_fd, self.events_fd = os.pipe()
        self.events: IO[str] = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")

    def child_fds(self) -> tuple[int, int, int]:
        """The write ends the child gets: stdout, stderr, events."""
        return self.stdout.write_fd, self.stderr.write_fd, self.events_fd

    def started(self) -> None:
        """The child holds its ends: the harness's copies closed, so the child's end is the pipes' end."""
        self.stdout.close_writer()
        self.stderr.close_writer()
        if self.events_fd >= 0:
            os.close(self.events_fd)
            self.events_fd = -1

    def close(self) -> None:
        self.started()
        self.stdout.join()
        self.stderr.join()
        self.events.close()


def limit_hit(limits: ResourceLimits, said: str) -> str | None:
    """The limit behind a failure the child reported (`said`: its error's type, message and traceback), or None."""
    if limits.memory_mb and ("MemoryError" in said or os.strerror(errno.ENOMEM) in said):
        return f"memory limit {limits.memory_mb} MB exceeded ([limits] memory_mb)"
    if limits.file_mb and os.strerror(errno.EFBIG) in said:
        return f"file size limit {limits.file_mb} MB exceeded ([limits] file_mb)"
    if limits.processes and ("can't start new thread" in said or (
            os.strerror(errno.EAGAIN) in said and ("fork" in said or "Popen" in said or "spawn" in said))):
        return f"process limit {limits.processes} exceeded ([limits] processes)"
    return None


def processes_exceeded(limits: ResourceLimits) -> str:
    return f"process limit {limits.processes} exceeded ([limits] processes): the child and the programs it " \
           "started were more, and were stopped"


class ProcessWatch:
    """Counts a cold child's processes (`root` and every descendant but bubblewrap's own) every COUNT_SECONDS;
    calls `exceeded` once when they pass `limit`. Threads are not counted."""

    def __init__(self, root: int, limit: int, exceeded: Callable[[], None]):
        self.root, self.limit, self.exceeded = root, limit, exceeded
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autoenv-process-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(COUNT_SECONDS):
            if descendants(self.root) > self.limit:
                self.exceeded()
                return

    def stop(self) -> None:
        self._stop.set()


def descendants(root: int) -> int:
    """Processes under `root` (itself included), bubblewrap's own not counted: the sandbox's outer process and its
    init, `root` and its child (a candidate's process named bwrap lies deeper, and counts). Read from each
    process's `children` list, so the cost is the tree's, not the machine's."""
    count, todo = 0, [(root, 0)]
    while todo:
        pid, depth = todo.pop()
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone meanwhile
            continue
        count += depth > 1 or name != "bwrap"
        for tid in threads:
            try:
                kids = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            todo += [(int(kid), depth + 1) for kid in kids]
    return count
