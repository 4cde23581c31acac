"""How numbers and times are written, the same way in the terminal, the feedback and the reasons."""

from __future__ import annotations

import datetime as dt
from typing import Any

STAMP = "%Y%m%dT%H%M%S%fZ"


def number(value: Any, digits: int = 3) -> str:
    """A float to `digits` places, None as an en dash, anything else as text."""
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def mean_ci(stats: Any) -> str:
    """`0.406 [0.302, 0.510]`: a mean is never shown without its interval (ModelStats or None)."""
    if stats is None or stats.mean is None:
        return "–"
    if stats.ci:
        return f"{stats.mean:.3f} [{stats.ci[0]:.3f}, {stats.ci[1]:.3f}]"
    return f"{stats.mean:.3f}"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def stamp(when: dt.datetime | None = None) -> str:
    """A sortable UTC id for runs and folders: 20261123T071502123456Z."""
    return (when or utc_now()).strftime(STAMP)


def iso_now() -> str:
    """The ledger's timestamp: ISO 8601 UTC to the second."""
    return utc_now().isoformat(timespec="seconds")
