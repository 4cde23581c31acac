"""The `grader` gate: a judged reward whose grader and parser disagree offline is untested, never the env's error.

Offline, a model-graded reward (a `vf.Judge`, a judge client of its own) is answered by the scripted grader
(autoenv.endpoint.grader), which answers in the verdict form the judge's prompt names. Where it can read no form
(it answers 422, GRADER_UNSURE) or the reward cannot parse its answer (verifiers' `judge returned no yes/no
verdict`), the reply says nothing about the reward: each such probe reply is left out as untested with the reason
`UNGRADED`, never failed, never passed, and one `grader` finding says so with what to do. Its coverage is
`untested`, so the verdict cannot be `keep` on judged rewards the gates could not verify.
"""

from __future__ import annotations

from autoenv.core.formats import excerpt
from autoenv.core.traces import grader_mismatch
from autoenv.gates import coverage
from autoenv.gates.audit_record import ProbeRecord
from autoenv.gates.findings import Gates

UNGRADED = "judged reward not verifiable offline: the grader's verdict form and the reward's parser disagree"
"""A probe's untested reason when its reward's grader and parser disagreed on the verdict's form."""


def left_ungraded(records: list[ProbeRecord]) -> tuple[list[ProbeRecord], int, str | None]:
    """The records with each grader/format mismatch turned into an untested record (`UNGRADED`); how many; the
    first such error."""
    out, count, first = [], 0, None
    for r in records:
        if not (r.error and grader_mismatch(r.error)):
            out.append(r)
            continue
        count += 1
        first = first or r.error
        out.append(r.model_copy(update={"skipped": True, "reason": UNGRADED, "error": None, "components": {},
                                        "outcome": "ok", "rejected": None, "other_failed": False}))
    return out, count, first


def ungraded(why: str | None) -> bool:
    """Whether an untested reason is a grader/format mismatch's."""
    return why == UNGRADED


def judge_ungraded(report: Gates, count: int, total: int, first: str | None) -> None:
    """The one `grader` finding for the replies a grader/format mismatch left ungraded (none: no finding)."""
    if not count:
        return
    report.add("grader", "warn",
               f"{count} of {total} probe replies could not be graded offline, so the judged reward is untested "
               f"there, not failed: {excerpt(first, 300)}. Name the verdict form in the judge's prompt (`Respond "
               "either \"yes\" or \"no\"`, `BLOCK or ALLOW`, `Score: N/10`, lettered options) so the offline grader "
               "can answer in it, or verify the judged reward with a real grader (evaluate online)",
               coverage=coverage.UNTESTED, replies=count)
