"""The line protocol between a worker process and the harness: one `AUTOENV-EVENT {json}` per event.

Workers print events on stdout (everything verifiers logs goes to a file); the parent
follows them for progress bars and results. Both sides import only this module of each
other, so the harness never imports the worker's code.
"""

from __future__ import annotations

import json
import sys
from typing import Any

EVENT_PREFIX = "AUTOENV-EVENT "


def emit(kind: str, **fields: Any) -> None:
    """Print one event for the parent."""
    sys.stdout.write(EVENT_PREFIX + json.dumps({"event": kind, **fields}) + "\n")
    sys.stdout.flush()


def parse(line: str) -> dict[str, Any] | None:
    """The event on `line`, or None for any other output."""
    if not line.startswith(EVENT_PREFIX):
        return None
    event: dict[str, Any] = json.loads(line[len(EVENT_PREFIX):])
    return event
