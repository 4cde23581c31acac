"""Per-seat probing of a multi-seat env: who plays the other seats, and who failed first in an episode.

Each exploit probe plays one seat while verifiers' per-seat `AgentConfig.model` pins the other seats
to a reference policy the built-in endpoint serves (the oracle hook when the task has one, else the
fixed policy `choice`). An episode whose reference seat did not play measures the reference, not the
probe, and is left out; but a reference seat that never got a turn because the probed seat failed
first (a forfeit, a rejected reply) did not fail: the probed seat's loss is its own. A probed seat
that never played at all (a solver seat after a rejected proposal) is recorded as untested.
"""

from __future__ import annotations

from typing import Any

from autoenv.gates.oracle import has_hook
from autoenv.gates.probes import REFUSAL

FIXED_REFERENCE = "choice"
"""The reference policy at the other seats of a multi-seat env whose tasks have no oracle hook (endpoint policy
`choice`: a seeded pick among the moves the seat's last message offers, in the form it offers them)."""

NEVER_PLAYED = ("the probed seat never got a turn: the episode ended before it (an earlier seat's reply was "
                "rejected or the game was over), so this probe measured nothing at that seat")


def seat_reference(seats: list[str], task: Any) -> dict[str, Any] | None:
    """Who plays the seats a per-seat probe does not: the oracle hook when the task has one, else a fixed policy."""
    if len(seats) < 2:
        return None
    if has_hook(task):
        return {"policy": "oracle", "why": "the task's oracle hook (`oracle`)"}
    return {"policy": FIXED_REFERENCE, "why": "the fixed policy `choice` (no oracle hook: a seeded pick among the "
            "moves each message offers, in the offered form; a refusal when it offers none)"}


def turns(trace: Any) -> int:
    """How many replies the seat of `trace` sent (0: it never got a turn)."""
    return len(trace.assistant_messages) if trace is not None else 0


def reference_failed(outcome: str, reply: str, played: int = 1) -> bool:
    """A reference seat that took a turn and did not play: an error, an empty reply, or a refusal (the fixed
    policy found no move). A seat that never got a turn (the probed seat failed first) did not fail."""
    if played == 0 and outcome == "ok":
        return False
    return outcome != "ok" or not reply.strip() or reply.strip() == REFUSAL
