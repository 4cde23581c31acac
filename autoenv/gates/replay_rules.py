"""How replayed multi-turn and tool transcripts are judged (the derive stage's autoenv.child.replay plays them).

A judged mutation destroys the final answer (another task's swapped in, or none) and keeps the moves and tool
calls; keeping nearly all of the replayed reference's reward then means the final answer is not scored.
"""

from __future__ import annotations

from collections.abc import Callable

from autoenv.gates.findings import Gates
from autoenv.gates.rows import Row

REPLAY_MUTATIONS = {
    "swap-answer": "the reference transcript replayed with another task's final answer (its tool calls and moves kept)",
    "drop-answer": "the reference transcript replayed with its final answer emptied",
    "no-tools": "only the reference transcript's final answer, without the tool calls before it (measured)",
}
JUDGED = ("swap-answer", "drop-answer")
KEEP_MAX = 0.9
"""A judged mutation keeping more than this share of the reference's reward: the final answer is not scored."""


AddMatrix = Callable[..., None]
"""autoenv.gates.rules.add_matrix, passed in by the derived rules: this module stays light (the derive stage's record
imports its mutation names in the child)."""


def judge_replay(records: list[Row], exploit_max: float, report: Gates, add_matrix: AddMatrix) -> None:
    """Findings for the replayed transcripts: a judged mutation (the final answer swapped or dropped) fails when it
    keeps more than KEEP_MAX of the reference's reward; each is also a column of the exploit matrix."""
    def mean(name: str) -> tuple[float | None, list[Row]]:
        scored = [r for r in records if r.probe == f"replay {name}" and not r.skipped
                  and not r.env_error and not r.error and r.reward is not None]
        return (sum(r.reward or 0.0 for r in scored) / len(scored) if scored else None), scored
    base, references = mean("reference")
    if not base:
        report.add("probe replay reference", "skip", "n/a, not tested: no multi-turn transcript earned reward on "
                   "replay (" + (f"{len(references)} replayed" if references else "none replayed") + ")")
        return
    report.add("probe replay reference", "pass", f"{len(references)} best multi-turn or tool transcripts of the models "
               f"replayed through real rollouts: mean {base:.3f}", references=len(references))
    weights: dict[str, float] = {}
    for r in records:
        weights.update(r.weights)
    # a replayed reply that errored is already an environment error (autoenv.gates.derived_rules.judged_rows)
    by_probe = {name: [r for r in records if r.probe == f"replay {name}"] for name in ("reference", *REPLAY_MUTATIONS)}
    add_matrix(report, by_probe, weights, exploit_max, prefix="replay ")
    for name, what in REPLAY_MUTATIONS.items():
        value, scored = mean(name)
        if value is None:
            report.add(f"probe replay {name}", "skip", "n/a, not tested: does not apply to any replayed transcript")
            continue
        kept = value / base
        if name not in JUDGED:
            report.add(f"probe replay {name}", "pass", f"keeps {kept:.0%} of the reference's reward (measured, not "
                       f"judged: {what})", kept=round(kept, 4))
            continue
        bad = kept > KEEP_MAX + 1e-9
        best = max(scored, key=lambda r: r.reward or 0.0)
        report.add(f"probe replay {name}", "fail" if bad else "pass",
                   f"mean {value:.3f}, {kept:.0%} of the replayed reference (allowed {KEEP_MAX:.0%}: destroying the "
                   "final answer must cost reward)" + (f"; e.g. task idx {best.idx} kept {best.reward or 0.0:.2f}: the "
                                                       "final answer is not scored" if bad else ""), kept=round(kept, 4))
