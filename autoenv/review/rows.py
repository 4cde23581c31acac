"""One evaluation as the review commands show it: a row of the run's log.

A row comes from a typed ledger entry or, when the ledger is missing, from the commit's
git note (which keeps only the verdict, the means and the reason). Every field a row can
lack is None and is shown as "–": entries from older harness versions miss budgets,
gates, judges or intervals, and that must never stop a review.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from autoenv.core.record import KEPT, Entry, ModelStats

SPARKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Point:
    """One model's mean in one evaluation."""

    model: str | None
    mean: float | None
    ci: tuple[float, float] | None = None

    @classmethod
    def of(cls, stats: ModelStats | None) -> Point | None:
        return None if stats is None else cls(model=stats.model, mean=stats.mean, ci=stats.ci)


@dataclass(frozen=True)
class Row:
    """One evaluation of the run, oldest first; `number` is its place in the run (1-based)."""

    number: int
    commit: str
    time: str | None
    description: str
    verdict: str
    reason: str
    target: Point | None = None
    strong: Point | None = None
    learnable: float | None = None
    gates: str | None = None
    """pass, fail, or None when the gates did not run (or the source does not say)."""
    gates_failed: tuple[str, ...] = ()
    cost: float | None = None
    offline: bool | None = None
    branch: str | None = None
    source: str = "ledger"
    """ledger, or git note when the ledger is missing."""
    tampered: bool = False
    """The ledger's hash chain breaks right before this entry (a line was edited or removed)."""
    last_kept: bool = False
    cached_from: str | None = None
    """A cache hit: the commit whose evaluation this row points at (its numbers are that one's)."""
    rescored_from: str | None = None
    """The commit whose stored rollouts this evaluation scored again (a reward-only change), not rolled out anew."""
    environment: str | None = None
    """`<id>@<hash>` of an environment evaluated with `autoenv eval --env` (not the run's candidate)."""
    entry: Entry | None = field(default=None, compare=False, repr=False)
    """The evaluation behind the row's numbers: the entry itself, or the source a cache hit points at."""

    @property
    def short(self) -> str:
        return self.commit[:8]

    @property
    def kept(self) -> bool:
        """A reference for later evaluations of its run: kept, or the run's baseline."""
        return self.verdict in KEPT and self.cached_from is None and self.environment is None

    @classmethod
    def from_entry(cls, entry: Entry, number: int, tampered: bool = False, source: Entry | None = None) -> Row:
        """The row of `entry`; a cache hit shows the numbers of `source`, the evaluation it points at."""
        numbers = source or entry
        gates = numbers.gates
        readiness = numbers.rl_readiness
        return cls(
            number=number, commit=entry.commit, time=entry.timestamp or None, description=entry.description,
            verdict=entry.verdict.verdict, reason=entry.verdict.reason,
            target=Point.of(numbers.stats.get("target")), strong=Point.of(numbers.stats.get("strong")),
            learnable=readiness.learnable_share if readiness else None,
            gates=None if gates is None else ("pass" if gates.passed else "fail"),
            gates_failed=tuple(gates.failed) if gates else (),
            cost=None if entry.cached_from else entry_cost(entry), offline=entry.offline, branch=entry.branch,
            tampered=tampered, cached_from=entry.cached_from, rescored_from=entry.rescored_from,
            environment=entry.environment.key if entry.environment else None, entry=numbers,
        )

    def to_json(self) -> dict[str, Any]:
        """What `autoenv log --json` prints for the row: plain JSON an agent can read."""
        data = asdict(replace(self, entry=None))
        del data["entry"]
        data["kept"] = self.kept
        for role in ("target", "strong"):
            point = data[role]
            if point and point["ci"] is not None:
                point["ci"] = list(point["ci"])
        data["gates_failed"] = list(self.gates_failed)
        return data


def entry_cost(entry: Entry) -> float | None:
    """What the evaluation spent on models and the judge, None when nothing was priced."""
    parts = [s.cost_usd for s in entry.stats.values()] + [entry.judge.cost_usd if entry.judge else None]
    priced = [p for p in parts if p is not None]
    return round(sum(priced), 6) if priced else None


def mark_last_kept(rows: list[Row]) -> list[Row]:
    """The rows with the newest kept one marked (the baseline the next verdict compares with)."""
    last = next((r.number for r in reversed(rows) if r.kept), None)
    return [replace(r, last_kept=r.number == last) if r.last_kept != (r.number == last) else r for r in rows]


def sparkline(values: list[float | None], top: float = 1.0) -> str:
    """One character per value on a 0..top scale; a gap for a missing value (a crash)."""
    top = max([top] + [v for v in values if v is not None])
    chars = []
    for value in values:
        if value is None:
            chars.append(" ")
        else:
            level = 0 if top <= 0 else round(max(0.0, value) / top * (len(SPARKS) - 1))
            chars.append(SPARKS[level])
    return "".join(chars)


def short_time(iso: str | None) -> str:
    """`11-23 07:15` in UTC (an overnight run fits in a few days); "–" when unknown."""
    if not iso:
        return "–"
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso[:16]
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc)
    return when.strftime("%m-%d %H:%M")


def point_text(point: Point | None, digits: int = 3) -> str:
    """`0.438 [0.333, 0.535]`, or "–"."""
    if point is None or point.mean is None:
        return "–"
    mean = f"{point.mean:.{digits}f}"
    return f"{mean} [{point.ci[0]:.{digits}f}, {point.ci[1]:.{digits}f}]" if point.ci else mean


def money(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


def clip(text: str, width: int) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
