"""Which hosts outside this machine the candidate's code tried to reach, seen from inside the child.

An error's text often names no host: `httpx.ConnectError: [Errno -3] Temporary failure in name resolution`
says that a name did not resolve, not which. The child watches Python's own audit events for name
lookups and connections (`socket.getaddrinfo`, `socket.connect`, PEP 578) and keeps the hosts outside
loopback, first first, so the gates can say `needs network: HOST` (autoenv.sandbox.network). Every thread
of the child is seen (rewards run in worker threads, autoenv.child.limits); a hook cannot be removed, and
it only records a name: it never blocks or changes a call.
"""

from __future__ import annotations

import sys
from typing import Any

from autoenv.sandbox.network import loopback

LIMIT = 20
_hosts: dict[str, None] = {}
_watching = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not event.startswith("socket.") or len(_hosts) >= LIMIT:
        return
    if event == "socket.getaddrinfo":
        host = args[0] if args else None
    elif event == "socket.connect" and len(args) > 1 and isinstance(args[1], tuple) and args[1]:
        host = args[1][0]
    else:
        return
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if isinstance(host, str) and not loopback(host):
        _hosts.setdefault(host, None)


def watch() -> None:
    """Start recording (once per process; a forked child keeps its parent's hook)."""
    global _watching
    if not _watching:
        sys.addaudithook(_hook)
        _watching = True


def reached() -> list[str]:
    """The hosts outside loopback the code tried to reach since the process started watching, first first."""
    return list(_hosts)
