"""Rows from git notes alone, for a run whose ledger is missing (deleted, or a fresh clone).

The note `autoenv.evaluation.recording.note_text` attaches to each evaluated commit reads
`autoenv: keep | gates failed: 1 | target 0.4375 (model) | strong 1.0 (model) | offline`
and then the verdict's reason. It keeps no intervals, learnable share, cost or
description: those show as "–", and the commit's subject stands in for the description.
"""

from __future__ import annotations

import re

from autoenv.review.rows import Point, Row
from autoenv.run.gitrepo import Annotated

HEAD = re.compile(r"^autoenv: (?P<verdict>[a-z]+)")
MODEL = re.compile(r"^(?P<role>target|strong) (?P<mean>\S+) \((?P<model>.*)\)$")
GATES = re.compile(r"^gates failed: (?P<count>\d+)$")


def row_from_note(commit: Annotated, number: int, branch: str | None) -> Row | None:
    """The row a commit's autoenv note describes; None when the note is not the harness's."""
    first, _, reason = commit.note.partition("\n")
    head = HEAD.match(first)
    if head is None:
        return None
    points: dict[str, Point] = {}
    gates, offline = None, False
    for part in first.split(" | ")[1:]:
        part = part.strip()
        if part == "offline":
            offline = True
        elif GATES.match(part):
            gates = "fail"
        elif m := MODEL.match(part):
            points[m["role"]] = Point(model=m["model"], mean=_float(m["mean"]))
    return Row(number=number, commit=commit.commit, time=commit.time, description=commit.subject,
               verdict=head["verdict"], reason=reason.strip(), target=points.get("target"),
               strong=points.get("strong"), gates=gates, offline=offline, branch=branch, source="git note")


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "–" for a model without scored rollouts
        return None
