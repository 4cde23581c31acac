"""Can the scripted models play this candidate? Their reference policy replays an oracle hook or an inferred answer field.

Asked by the verdict (an offline evaluation whose reference policy cannot play is
`inconclusive`) and by the offline judge (which must not blame the reward for empty replies).
"""

from __future__ import annotations

from collections.abc import Mapping

from autoenv.core.record import CandidateInfo, GateReport, ModelStats, Role
from autoenv.endpoint.policies import plays_the_oracle

Stats = Mapping[Role, ModelStats]


def reference_missing(stats: Stats, candidate: CandidateInfo, offline: bool, inferred: bool = False) -> str | None:
    """Why the scripted models could not play the candidate, or None when they could.

    Offline, the scripted models replay the candidate's oracle hook (`oracle`,
    `noisy-oracle:P`). For a task without one, `OracleBook.next_message` answers with an
    empty reply, so both models score about 0 whatever the reward does: such numbers say
    nothing about the candidate. The install stage records whether the hook exists.
    """
    return no_reference_policy({role: s.model for role, s in stats.items()}, candidate, offline, inferred)


def oracle_inferred(report: GateReport | None) -> bool:
    """The gates inferred an answer-field oracle (no hook): the scripted models replay it."""
    oracle = next((f for f in report.findings if f.name == "oracle"), None) if report else None
    return bool(oracle and oracle.status == "pass" and str(oracle.data.get("source") or "").startswith("inferred:"))


def no_reference_policy(models: dict[str, str], candidate: CandidateInfo, offline: bool,
                        inferred: bool = False) -> str | None:
    """Why the scripted `models` (role -> policy name) cannot play the candidate, or None when they can.

    The pipeline asks before any rollout: an offline evaluation whose reference policy cannot
    play ends `inconclusive` without spending rollouts on empty replies. `inferred`: the gates
    inferred an answer-field oracle, which the scripted models replay instead of a hook.
    """
    if not offline or candidate.oracle_hook is not False or inferred:
        return None
    players = [f"{role} {model}" for role, model in models.items() if plays_the_oracle(model)]
    if not players:
        return None
    return (f"no reference policy: the candidate's task has no oracle hook, so the scripted models that replay it "
            f"({', '.join(players)}) could only send empty replies")
