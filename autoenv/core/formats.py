"""How numbers and times are written, the same way in the terminal, the feedback and the reasons."""

from __future__ import annotations

import datetime as dt
import json
import re
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


DECORATION = re.compile(r"^[\s|+\-=^~]*$")
"""A line of only box drawing or carets (an exception group's `+----`, a traceback's `^^^^`)."""


def excerpt(text: str | None, limit: int = 500) -> str:
    """An error or a traceback in about `limit` characters, both ends kept: its first line (the error's type and
    message) and its last lines whole, where a traceback says what finally went wrong (`httpx.ConnectError:
    [Errno -3] Temporary failure in name resolution`), with `…` between. Lines of only box drawing or carets
    are dropped, and an exception group's `| ` margin is taken off. Text that fits is returned whole."""
    text = (text or "").strip()
    if len(text) <= limit:
        return text
    lines = [line.strip().lstrip("|").strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not DECORATION.match(line)]
    if len(lines) == 1:  # one long line: its start and its end, cut at spaces
        start, end = lines[0][: limit // 3], lines[0][-(limit * 2 // 3):]
        start = start[: start.rfind(" ")] if " " in start else start
        end = end[end.find(" ") + 1:] if " " in end else end
        return f"{start} … {end}"
    tail: list[str] = []
    room = limit * 2 // 3
    for line in reversed(lines[1:]):
        if tail and sum(len(t) + 1 for t in tail) + len(line) > room:
            break
        tail.insert(0, line if len(line) <= room else "… " + line[-room:])
    first = lines[0]
    left = max(limit - sum(len(t) + 1 for t in tail) - 3, 40)
    head = first if len(first) <= left else first[:left].rsplit(" ", 1)[0] + " …"
    skipped = len(lines) - 1 - len(tail)
    return "\n".join([head, *(["…"] if skipped else []), *tail])


def idx_list(values: object) -> str:
    """Task indices as `6, 111, 118` (groups as `0 = 35 = 60`), never a Python list repr."""
    if not isinstance(values, (list, tuple)):
        return str(values)
    return ", ".join(" = ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for v in values)
