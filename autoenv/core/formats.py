"""How numbers and times are written, the same way in the terminal, the feedback and the reasons."""

from __future__ import annotations

import datetime as dt
import json
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


def quoted(text: object, limit: int | None = None) -> str:
    """A reply or a value quoted for people and agents: JSON string syntax ("a\\nb"), never a Python repr."""
    value = str(text) if text is not None else ""
    if limit is not None and len(value) > limit:
        value = value[:limit] + "…"
    return json.dumps(value, ensure_ascii=False)


def shorten(text: str, limit: int) -> str:
    """`text` on one line, whole when it fits in `limit` characters; else cut where a clause ends (". ", "; ",
    ": ", ", ") or, failing that, at the last space, with " …" after it. Never inside a word or a number: text
    with no space to cut at is returned whole."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    room = text[: max(1, limit - 2)]
    for marks, least in (((". ", "; ", ": "), limit // 2), ((", ",), limit // 2), ((" ",), 1)):
        end = max(room.rfind(mark) for mark in marks)
        if end >= least:
            return text[: end + (0 if marks == (" ",) else 1)].rstrip(" ,;:") + " …"
    return text


def idx_list(values: object) -> str:
    """Task indices as `6, 111, 118` (groups as `0 = 35 = 60`), never a Python list repr."""
    if not isinstance(values, (list, tuple)):
        return str(values)
    return ", ".join(" = ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for v in values)
