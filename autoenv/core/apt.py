"""apt-get as setup runs it: a held package lock is waited for (bounded), and told apart from an unreachable archive.

On a fresh machine an `apt-get` or unattended-upgrades started at boot often holds
/var/lib/apt/lists/lock or the dpkg lock for minutes. Each command is tried again while its
error says a lock is held, every LOCK_POLL_SECONDS up to LOCK_WAIT_SECONDS, with a line saying
which process holds it; past that, the error names the lock and its holder. Any other failure
is reported as the package archive's (unreachable, or the package unknown).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable

from autoenv.core.errors import AutoEnvError

LOCK_WAIT_SECONDS = 300.0
LOCK_POLL_SECONDS = 5.0
HELD = re.compile(r"Could not get lock (\S+?)\.? It is held by process (\d+)(?: \(([^)]+)\))?|"
                  r"Could not get lock (\S+)|Unable to acquire the dpkg frontend lock")


def held_lock(stderr: str) -> str | None:
    """`LOCK (held by process PID NAME)` when apt's error says a lock is held, else None."""
    found = HELD.search(stderr)
    if found is None:
        return None
    path, pid, name, bare = found.groups()
    if pid:
        return f"{path} (held by process {pid}" + (f", {name})" if name else ")")
    return bare or "the dpkg frontend lock"


def apt_get(*args: str, wait: float = LOCK_WAIT_SECONDS, poll: float = LOCK_POLL_SECONDS,
            note: Callable[[str], None] = print) -> None:
    """Run `apt-get ARGS` non-interactively; wait out a held lock up to `wait` seconds; AutoEnvError otherwise."""
    cmd = ["apt-get", *args]
    deadline = time.monotonic() + wait
    said = False
    while True:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if proc.returncode == 0:
            return
        lock = held_lock(proc.stderr)
        if lock is None:
            raise AutoEnvError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()[-800:]}",
                               fix="check that Debian's package archive is reachable (apt-get update works) and "
                                   "the package exists there, then run setup again")
        if time.monotonic() >= deadline:
            raise AutoEnvError(f"{' '.join(cmd)} could not run: the package lock {lock} was still held after "
                               f"{wait:.0f} s", where=lock.split(" ")[0],
                               fix="another apt-get, or unattended-upgrades, is installing packages: wait until it "
                                   "ends (or stop it), then run setup again")
        if not said:
            note(f"waiting for the package lock {lock} (up to {wait:.0f} s): another apt-get or "
                 "unattended-upgrades is running")
            said = True
        time.sleep(poll)
