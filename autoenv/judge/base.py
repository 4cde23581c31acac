"""What every judge backend takes and the one error it raises."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoenv.core.config import Bands, Judge
from autoenv.core.record import Entry


class JudgeFailed(Exception):
    """A judge that could not deliver; `cost_usd` and `turns` record what it spent anyway."""

    def __init__(self, message: str, cost_usd: float | None = None, turns: int | None = None):
        super().__init__(message)
        self.cost_usd = cost_usd
        self.turns = turns


@dataclass(frozen=True)
class JudgeCall:
    """One judgement to make: the [judge] settings, the room to read, and what the harness knows."""

    cfg: Judge
    workspace: Path
    state_dir: Path
    entry: Entry
    bands: Bands
    rollout_ids: list[str]
