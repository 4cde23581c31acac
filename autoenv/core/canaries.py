"""Canary rollouts: content-free replies served in the rollouts stage as the model's own, on sessions picked at random.

The in-process probes and the blind probes are scored outside the rollouts; a reward that can tell
where it is scored could still pay the rollouts alone. So some of the rollouts themselves are
canaries: whoever answers the seat's requests (the built-in endpoint offline, the model forwarder
online, which then sends nothing to the provider) picks, when a rollout's first request arrives,
whether this rollout is a canary, with a system random draw no seed repeats, so that exactly
`planned` of the `sessions` rollouts still to come are (as far as they arrive). A canary's every
turn is answered with one content-free reply (empty, a refusal, an abstention, in turn), in the same
response format, usage and latency as a model's. The rollout runs through the candidate's code like
any other: same model name, sampling, runtime and trace.

verifiers sends each rollout's trace id as `X-Session-ID`; each canary's id and probe is appended to
`canaries.jsonl` in the evaluation's outputs as it is picked, and the harness moves those rollouts out
of the models' traces before any statistic is computed (autoenv.evaluation.canary_split), after checking
that each one's replies are the canary's, so a record written by anyone else cannot move a model's rollout.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


REFUSAL = "I'm sorry, but I can't help with that request."
"""The refusal probe's reply (autoenv.gates.probes plays the same)."""
ABSTAIN = "I don't know"
"""The abstain family's first reply (autoenv.gates.families: the first phrase, bare)."""
CANARY_FILE = "canaries.jsonl"
"""Where the sessions picked as canaries are appended, in the evaluation's outputs folder."""
REPLIES = {"empty": "", "refusal": REFUSAL, "abstain": ABSTAIN}
"""The content-free replies the canaries give, in turn: the in-process probes' own."""
PROBES = tuple(REPLIES)


def canary_text(probe: str) -> str:
    """The reply a canary of `probe` gives."""
    return REPLIES[probe]


def first_request(messages: list[dict[str, Any]]) -> bool:
    """A rollout's first request: no assistant turn yet."""
    return not any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages)


class Canaries:
    """Which rollouts are canaries: `planned` of the next `sessions` rollouts once armed, picked as they arrive."""

    def __init__(self, planned: int, sessions: int, record: Path | None = None,
                 rng: random.Random | None = None, role: str = "") -> None:
        self.left, self.sessions_left = max(0, planned), max(0, sessions)
        self.planned = self.left
        self.record, self.role = record, role
        self.rng = rng or random.SystemRandom()
        self.armed = False
        self.started = 0
        """Rollouts begun since arming."""
        self.seen: set[str] = set()
        self.served: dict[str, str] = {}
        """Session id -> the probe its canary plays."""

    def arm(self) -> None:
        """From now on a rollout's first request may start a canary (the smoke rollout has run)."""
        self.armed = True

    def expect(self, sessions: int) -> None:
        """The rollouts the stage plays in all (the child's plan, smoke excluded): those not yet begun are what
        the canaries still left are drawn among."""
        self.sessions_left = max(0, sessions - self.started)

    def probe(self, session: str | None, messages: list[dict[str, Any]]) -> str | None:
        """The probe this request's rollout plays as a canary, or None (a model's rollout)."""
        if not session:
            return None
        if session in self.served:
            return self.served[session]
        if session in self.seen or not self.armed or not first_request(messages):
            self.seen.add(session)
            return None
        self.seen.add(session)
        self.started += 1
        if self.left <= 0:
            return None
        pick = self.sessions_left <= self.left or self.rng.random() < self.left / max(self.sessions_left, 1)
        self.sessions_left = max(0, self.sessions_left - 1)
        if not pick:
            return None
        probe = PROBES[len(self.served) % len(PROBES)]
        self.served[session] = probe
        self.left -= 1
        if self.record is not None:
            with self.record.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"session": session, "probe": probe, "role": self.role}) + "\n")
        return probe


def served_before(path: Path, role: str) -> int:
    """Canaries of `role` already in the record (an interrupted evaluation's, when it is resumed)."""
    if not path.is_file():
        return 0
    count = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            count += json.loads(line).get("role") == role
        except (ValueError, AttributeError):
            continue
    return count


def read_record(path: Path) -> dict[str, str]:
    """Session id -> probe from `canaries.jsonl` (lines that are not a record are skipped)."""
    served: dict[str, str] = {}
    if not path.is_file():
        return served
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("session"), str) and row.get("probe") in PROBES:
            served[row["session"]] = row["probe"]
    return served
