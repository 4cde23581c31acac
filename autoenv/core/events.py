"""The channel between the evaluation's child and the harness: one JSON event per line, on a pipe of its own.

The child used to print its events on stdout, which the candidate's code shares: a candidate
that printed a forged `smoke` event once ended an offline evaluation `inconclusive: provider
unavailable` (not its fault). Now the harness hands the child a pipe (a descriptor number on
its command line, or the fourth descriptor the warm server passes on) that the child opens
before it imports the candidate, and marks it not inheritable, so nothing the candidate prints
or starts reaches it; stdout and stderr are the candidate's logs, nothing more.

The candidate runs in the child's interpreter, so its code *can* find the descriptor (and
any secret the child holds: a nonce would be readable too). The harness therefore reads the
channel as the child's word, not as fact: an event that would change who is at fault (a
smoke rollout failing at the provider) is checked against what the harness knows
(autoenv.sandbox.rollouts), and a `note` is shown as the child's, never as the harness's.
Both sides import only this module of each other, so the harness never imports the child's code.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

MAX_EVENT_BYTES = 8 << 20  # one event line (an error's traceback is the largest); a longer line is dropped

_channel: IO[str] | None = None


def open_channel(fd: int) -> None:
    """Send every later event to descriptor `fd` (the harness's pipe), which no program started later inherits."""
    global _channel
    os.set_inheritable(fd, False)
    _channel = os.fdopen(fd, "w", encoding="utf-8", closefd=True)


def emit(kind: str, **fields: Any) -> None:
    """Send one event to the harness (stdout where no channel was opened: a stage run by hand)."""
    stream = _channel if _channel is not None else sys.stdout
    stream.write(json.dumps({"event": kind, **fields}) + "\n")
    stream.flush()


def parse(line: str) -> dict[str, Any] | None:
    """The event on `line`, or None for anything else (a partial or garbled line)."""
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # garbled, or nested past what the parser follows
        return None
    return event if isinstance(event, dict) and isinstance(event.get("event"), str) else None


def read_events(stream: IO[str]):
    """The events on `stream` until its end; a line over MAX_EVENT_BYTES is skipped, never held whole."""
    while True:
        line = stream.readline(MAX_EVENT_BYTES)
        if not line:
            return
        if not line.endswith("\n") and len(line) >= MAX_EVENT_BYTES:
            while (rest := stream.readline(MAX_EVENT_BYTES)) and not rest.endswith("\n"):
                pass
            continue
        event = parse(line)
        if event is not None:
            yield event
