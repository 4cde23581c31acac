"""Coverage as a gate: where fewer than half of the exploit probes could be played, the gates are untested.

A gate report whose probes mostly could not be played (no oracle reply to build them from, a seat
no reference policy could face, a shape the probes cannot reach) has not shown that the reward
resists cheap tricks: it says `untested`, with what was missing and what to add, never `passed`,
and the verdict cannot be `keep` on that model-free evidence (autoenv.evaluation.verdict).
"""

from __future__ import annotations

from collections.abc import Iterable

from autoenv.core.record import GateFinding

UNTESTED = "untested"
"""`data["coverage"]` of the `probes tested` finding when the gates could not play enough probes."""
MIN_SHARE = 0.5

REMEDIES = (
    ("oracle", "an oracle hook (`def oracle(self, messages)` on the task class, program.md) so the probes built "
     "from the reference reply can be played"),
    ("seat", "a reference seat policy: an oracle hook that plays every seat, or moves the fixed policy `choice` "
     "can read (`[a] or [b]`, `one word: a or b`) in each seat's message"),
    ("in-process", "a task scored without a custom Env or tools, or an oracle hook (the many-strategy probes are "
     "scored in-process only)"),
    ("never", "a reference policy at the seats that play first, so the probed seat gets a turn"),
    ("network", "the data or service the env fetches to the package, or evaluate it where the network is allowed "
     "(see the `network` finding)"),
    ("grader", "a verdict form the offline grader can read in the judge's prompt, or a real grader (see the "
     "`grader` finding)"),
    ("rejected", "replies the env can score: it rejected the probes' off-contract replies by raising, so score such a "
     "reply 0 instead (then the probes measure the reward), or accept that these probes cannot be played"),
)


def too_thin(tested: int, total: int) -> bool:
    """Fewer than half of the exploit probes were tested (no probe at all counts as none tested)."""
    return total == 0 or tested < MIN_SHARE * total


def untested_text(tested: int, total: int, untested: dict[str, str]) -> str:
    """The `untested` verdict's opening: what was missing and what to add."""
    reasons = " ".join(untested.values()).lower()
    adds = [remedy for key, remedy in REMEDIES if key in reasons] or [REMEDIES[0][1]]
    return (f"untested: only {tested} of {total} exploit probes could be played (at least {MIN_SHARE:.0%} wanted), "
            "so these gates do not show the reward resists cheap tricks; add " + "; or ".join(adds) + ". ")


def untested(findings: Iterable[GateFinding]) -> list[str]:
    """`name: message` of the findings that say the gates are untested."""
    return [f"{f.name}: {f.message}" for f in findings if (f.data or {}).get("coverage") == UNTESTED]
