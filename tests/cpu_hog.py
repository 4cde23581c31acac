"""A CPU hog for the load check: one busy loop per core, so the suite can be run beside it.

`pytest --cpu-hog` starts it for the whole session (in the controlling process only, not in
each xdist worker); `python tests/cpu_hog.py` runs it on its own until Ctrl-C. The suite must
stay green under it: tests wait for events (a stage line, a file, a port), never for a
guessed number of seconds, and their start-up limits scale with the load (`slack`).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager


def busy() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    while True:
        pass


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def cpu_hog(workers: int | None = None) -> Iterator[list[multiprocessing.Process]]:
    """`workers` busy loops (one per core by default) for the duration of the block."""
    context = multiprocessing.get_context("spawn")  # no copy of the test process's threads or state
    procs = [context.Process(target=busy, daemon=True, name=f"cpu-hog-{i}") for i in range(workers or cores())]
    for proc in procs:
        proc.start()
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.join()


def slack(seconds: float, cap: float = 8.0) -> float:
    """A start-up or shutdown limit scaled by how loaded the machine is now (load per core, at least 1)."""
    load = os.getloadavg()[0] / cores()
    return seconds * min(cap, max(1.0, load))


if __name__ == "__main__":
    with cpu_hog() as hogs:
        print(f"{len(hogs)} busy loops running; Ctrl-C stops them", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
