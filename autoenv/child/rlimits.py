"""The kernel's limits on the child, set before the candidate is imported ([limits] in config.toml).

Memory is RLIMIT_DATA, not RLIMIT_AS: the address space of a child with verifiers imported is
far larger than what it uses (threads' stacks, allocator arenas reserved and never touched,
runtimes that reserve gigabytes up front), while RLIMIT_DATA counts what a process can write
to: a candidate allocating past it gets MemoryError. Files are RLIMIT_FSIZE (CPython ignores
SIGXFSZ, so the write fails with "File too large" instead of killing the child). Hard limits
equal soft ones: the candidate, in this process, cannot raise them again.

Processes are counted by the harness (autoenv.sandbox.childio, autoenv.child.forkserver), which
sees the sandbox from outside: RLIMIT_NPROC counts a user's processes *and threads*, and
counts nothing at all for root. It is set here only as a backstop against a fork bomb, well
above the limit, and only in a sandbox of its own (outside one it would count every process of
the user on the machine).
"""

from __future__ import annotations

import resource

from autoenv.core.job import ResourceLimits

MB = 1 << 20
TASKS_PER_PROCESS = 8  # the backstop's room for threads


def apply(limits: ResourceLimits) -> None:
    """Set the limits on this process; every process it starts inherits them."""
    if limits.memory_mb:
        _set(resource.RLIMIT_DATA, limits.memory_mb * MB)
    if limits.file_mb:
        _set(resource.RLIMIT_FSIZE, limits.file_mb * MB)
    if limits.processes and limits.confined:
        _set(resource.RLIMIT_NPROC, limits.processes * TASKS_PER_PROCESS + 256)


def _set(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))
