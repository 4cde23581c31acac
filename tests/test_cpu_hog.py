"""The load check's CPU hog: it really keeps every core busy, and stops when asked."""

from __future__ import annotations

import time
from pathlib import Path

from cpu_hog import cores, cpu_hog, slack


def cpu_ticks(pid: int) -> int:
    """User + system clock ticks the process has run (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_the_hog_runs_a_busy_loop_per_core_and_stops():
    with cpu_hog() as procs:
        assert len(procs) == cores() and all(p.is_alive() for p in procs)
        deadline = time.time() + slack(60)
        while time.time() < deadline and not all(cpu_ticks(p.pid) >= 20 for p in procs):  # 0.2 s of CPU each
            time.sleep(0.05)
        assert all(cpu_ticks(p.pid) >= 20 for p in procs), "a busy loop never ran"
    assert not any(p.is_alive() for p in procs)


def test_limits_scale_with_the_load_and_never_shrink():
    assert 10 <= slack(10) <= 80
