"""`passed` only where something could earn: a reward no reply earned offline has tested nothing.

The exploit probes pass when they earn little of the reward's range. Where every reply the audit
scored (every probe's, the reward search's, and no reference reply at all) sits on the reward's floor,
a probe's "little" is no evidence: nothing could earn, so nothing could be harvested either. Rewards
that need a bash call's result, a web search's citation or a rollout's runtime look like that offline.
Unless the env declares its reward's range (then the floor is a stated fact, and a probe on it is a
real measurement), this finding makes the gates `untested` (autoenv.gates.coverage), naming what the
reward seems to need and what would let the audit see a reply earn.
"""

from __future__ import annotations

from autoenv.gates import coverage
from autoenv.gates.audit_record import AuditRecord
from autoenv.gates.findings import Gates
from autoenv.gates.rows import Row

NAME = "earnable"
EPS = 1e-9


def needs(audit: AuditRecord) -> str:
    """What the reward seems to need that no offline probe gave, from what the audit saw of the env."""
    parts = []
    if audit.runtime_rewards:
        parts.append("what a rollout's runtime holds (" + ", ".join(f"`{r}`" for r in audit.runtime_rewards[:4])
                     + " read it)")
    if audit.has_tools:
        parts.append("a tool call or an action whose result the reward checks (the probes played through the env's "
                     "tools; none of their rollouts earned)")
    if audit.custom_env and not audit.has_tools:
        parts.append("turns of the env's own protocol that the probes did not play")
    return "; or ".join(parts) or "a reply that none of the probes wrote"


def judge_earnable(report: Gates, audit: AuditRecord, by_probe: dict[str, list[Row]], floor: float | None,
                   reference: str) -> bool:
    """Add the `earnable` finding (untested) where no scored reply earned above the floor and no reference reply
    was scored; whether it was added. `floor`: the total at the bottom of the reward's documented range, None when
    the range is only observed (then every reply scoring the same is the floor). `reference`: why there is no
    reference reply, in words."""
    played = [(name, r.weighted()) for name, rows in by_probe.items() for r in rows if r.played]
    if not played:
        return False  # nothing scored at all: `probes tested` already says so
    values = [v for _, v in played]
    low, high = min(values), max(values)
    if high - low > EPS or (floor is not None and high > floor + EPS):
        return False
    probes = sorted({name for name, _ in played})
    needed = needs(audit)
    searched = (f", the reward search's {audit.search.templates} templates" if audit.search and audit.search.templates
                else "")
    report.add(NAME, "skip", f"untested: no reply could earn this reward offline: all {len(values)} scored probe "
               f"replies ({len(probes)} probes{searched}) scored {high:g}, and {reference}; it needs "
               f"{needed}. A probe that earns nothing of a reward nothing earns shows nothing, so these gates do "
               "not show the reward resists cheap tricks. Add an oracle hook to the task class, "
               "`def oracle(self, messages)`, whose reply or actions earn the reward, so the probes have something "
               "to fall short of",
               coverage=coverage.UNTESTED, replies=len(values), probes=probes, floor=high, needs=needed)
    return True
