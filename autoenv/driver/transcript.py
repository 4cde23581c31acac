"""One agent launch's transcript (stream-json lines) and what it says about tokens, cost and the session.

Claude Code prints one JSON object a line with `--output-format stream-json --verbose`: a
`system`/`init` line with the session id, `assistant` lines whose `message.usage` counts
tokens, and a final `result` line with `total_cost_usd`, `num_turns`, `subtype` and
`is_error`. The Codex CLI (`codex exec --json`) prints `thread.started` (the session's
`thread_id`) and `turn.completed` lines with `usage`, and no cost. A launch the driver
ends early has no result line: its cost is then priced from the tokens seen so far
([agent] input_price / output_price), so a budget never misses what a killed launch spent.
Lines that are not JSON (a plain `command` agent) are kept and otherwise ignored.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class LaunchStats:
    """What the transcript of one launch says so far."""

    session_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """The agent's own total_cost_usd (from its result line); None until it reports one."""
    turns: int | None = None
    subtype: str | None = None
    is_error: bool = False
    result: str = ""
    lines: int = 0
    permission_denials: list = field(default_factory=list)

    def priced(self, input_price: float, output_price: float) -> float:
        """The reported cost, or the tokens seen so far at the given prices (USD per million)."""
        if self.cost_usd is not None:
            return self.cost_usd
        return (self.input_tokens * input_price + self.output_tokens * output_price) / 1e6

    def to_dict(self) -> dict:
        return asdict(self)


class Transcript:
    """Reads a growing transcript file incrementally (the driver polls it while the agent runs)."""

    def __init__(self, path: Path):
        self.path = path
        self.stats = LaunchStats()
        self._offset = 0
        self._partial = b""

    def update(self) -> LaunchStats:
        """Parse the lines appended since the last call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return self.stats
        self._offset += len(chunk)
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        for raw in complete:
            self._line(raw)
        return self.stats

    def finish(self) -> LaunchStats:
        """Parse everything, including a last line without a newline."""
        self.update()
        if self._partial.strip():
            self._line(self._partial)
            self._partial = b""
        return self.stats

    def _line(self, raw: bytes) -> None:
        s = self.stats
        s.lines += 1
        try:
            event = json.loads(raw)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if isinstance(event.get("session_id"), str):
            s.session_id = event["session_id"]
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):  # codex
            s.session_id = event["thread_id"]
        if kind == "assistant":
            usage = (event.get("message") or {}).get("usage") or {}
            s.input_tokens += _int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens"))
            s.output_tokens += _int(usage.get("output_tokens"))
        elif kind == "turn.completed":  # codex
            usage = event.get("usage") or {}
            s.input_tokens += _int(usage.get("input_tokens"))
            s.output_tokens += _int(usage.get("output_tokens"))
        elif kind == "result":
            usage = event.get("usage") or {}
            # the result's usage is the launch's total: it replaces the running sum
            if usage:
                s.input_tokens = _int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens"))
                s.output_tokens = _int(usage.get("output_tokens"))
            cost = event.get("total_cost_usd")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                s.cost_usd = float(cost)
            s.turns = event.get("num_turns") if isinstance(event.get("num_turns"), int) else s.turns
            s.subtype = event.get("subtype") if isinstance(event.get("subtype"), str) else None
            s.is_error = bool(event.get("is_error"))
            s.result = str(event.get("result") or "")[:2000]
            denials = event.get("permission_denials")
            s.permission_denials = denials if isinstance(denials, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
