"""The rules of the derive stage: the models' best replies, mutated, judged against the unmutated reply.

The derive stage (autoenv.child.derived) runs after the rollouts, in the evaluation's child:
it rescored each task's best reply of the models and its mutations (autoenv.gates.probes
DERIVED_MUTATIONS) and wrote `derived.json`; multi-turn and tool transcripts are replayed
instead (autoenv.gates.replay_rules). A mutation that keeps what only a correct answer
should earn fails; the variants that must not matter (whitespace) are measured.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from typing import Any

from autoenv.core.config import Config
from autoenv.core.formats import quoted
from autoenv.core.record import GateReport
from autoenv.gates.blind_record import REPRODUCE_FILE, read_reproduced
from autoenv.gates.blind_rules import judge_blind, judge_canaries, judge_reproduced
from autoenv.gates.derived_record import DerivedProbeRecord, DerivedRecord, parse_derived, read_derived
from autoenv.gates.findings import Gates
from autoenv.gates.matrix import Matrix
from autoenv.gates import noise
from autoenv.gates.probes import (
    DERIVED_COUNTERPARTS,
    DERIVED_FILE,
    DERIVED_MUTATIONS,
    DERIVED_RESAMPLED,
    DERIVED_VARIANTS,
    FEW_REFERENCES,
)
from autoenv.gates.ranges import max_reward
from autoenv.gates.replay_rules import judge_replay
from autoenv.gates.rows import Row, summarize, totals
from autoenv.gates.rules import add_matrix
from autoenv.sandbox.rollouts import Worker


def judge_derived(derived: DerivedRecord | dict[str, Any], config: Config, report: Gates) -> None:
    """Gate findings from the derive stage's derived.json (a dict is parsed and validated first)."""
    derived = derived if isinstance(derived, DerivedRecord) else parse_derived(derived)
    blind = [r for r in derived.records if r.probe.startswith("blind ")]
    judge_blind(blind, judged_rows(blind), config, report)
    derived = derived.model_copy(update={"records": [r for r in derived.records if not r.probe.startswith("blind ")]})
    replayed = [r for r in derived.records if r.probe.startswith("replay ")]
    if replayed:  # multi-turn and tool transcripts, replayed
        judge_replay(judged_rows(replayed), config.probes.exploit_max, report, add_matrix)
    records = [r for r in derived.records if not r.probe.startswith("replay ") and r.sample == 1]
    second: dict[str, list[Row]] = defaultdict(list)  # the second draw of the randomised mutations, where few
    for row in judged_rows([r for r in derived.records if not r.probe.startswith("replay ") and r.sample == 2]):
        second[row.probe].append(row)
    rows = judged_rows(records)
    references = [row for row in rows if row.probe == "reference" and not row.env_error]
    if not references:
        if not derived.replayed:
            report.add("derived probes", "skip", "n/a, not tested: " + (derived.reason or derived.replay_reason
                                                                        or "no single-turn reference reply"))
        return
    weights: dict[str, float] = {}
    for r in records:
        weights.update(r.weights)
    by_probe: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_probe[row.probe].append(row)
    reference = summarize("reference", references, weights, "the models' best reply per task, rescored")
    report.probes["derived reference"] = reference
    base = reference.mean or 0.0
    report.add("probe derived reference", "pass" if base > 0 else "warn",
               f"{reference.scored} best replies of the models rescored in-process: mean {base:.3f}",
               references=reference.scored)
    limit = config.probes.exploit_max
    scale = max_reward(weights) or 1.0
    add_matrix(report, {"reference": references, **{n: by_probe.get(n, []) for n in DERIVED_MUTATIONS}}, weights,
               limit, prefix="derived ")
    for name in DERIVED_MUTATIONS:
        summary = summarize(name, by_probe.get(name, []), weights, DERIVED_MUTATIONS[name])
        summary = summary.model_copy(update={
            "of_oracle": None if not base or summary.mean is None else round(summary.mean / base, 4)})
        report.probes[f"derived {name}"] = summary
        if summary.mean is None:
            report.add(f"probe derived {name}", "skip", f"n/a, not tested: does not apply to any of the "
                       f"{len(by_probe.get(name, []))} reference replies")
            continue
        best = summary.best[0] if summary.best else None
        evidence = f"; best task idx {best.idx} scored {best.reward:.2f}: {quoted(best.reply, 80)}" if best else ""
        if name in DERIVED_VARIANTS:
            kept = summary.of_oracle or 0.0
            status = "warn" if name == "whitespace" and kept < 0.5 else "pass"
            report.add(f"probe derived {name}", status, f"keeps {kept:.0%} of the reference's reward "
                       + ("(whitespace must not matter)" if status == "warn" else "(measured, not judged)"))
            continue
        if name == "padding":
            bad = summary.mean > base + 1e-9
            rule = "must not beat the reference"
        else:
            values = totals(by_probe.get(name, []))
            bad = noise.beyond(summary.mean, limit * base, summary.scored, scale, values)
            rule = f"allowed {limit:.0%} of the reference"
            if not bad and summary.mean > limit * base + 1e-9:
                rule += "; " + noise.within(summary.mean, limit * base, summary.scored, scale, values)
        if bad and summary.scored < FEW_REFERENCES:
            unconfirmed = unwitnessed(name, report, second.get(name, []), weights, limit * base, scale)
            if unconfirmed:
                bad, rule = False, f"{rule}; {unconfirmed}"
        harvested = ", ".join(f"{k}: {v}" for k, v in summary.harvested.items())
        report.add(f"probe derived {name}", "fail" if bad else "warn" if "not a cause" in rule else "pass",
                   f"mean {summary.mean:.3f} ({rule})" + (f"; harvested {harvested}{evidence}" if bad else ""),
                   harvested=summary.harvested if bad else {})


def unwitnessed(name: str, report: Gates, again: list[Row], weights: dict[str, float], allowed: float,
                scale: float) -> str | None:
    """Why a derived failure on few tasks is not confirmed (None: confirmed). Its witness is the in-process
    probe that tests the same on the oracle's reply; where that did not run, a second draw of the mutation."""
    counterpart = DERIVED_COUNTERPARTS.get(name)
    finding = next((f for f in report.findings if f.name == f"probe {counterpart}"), None) if counterpart else None
    played = report.probes.get(counterpart) if counterpart else None
    if finding is not None and played is not None and played.mean is not None:
        if finding.status == "fail":
            return None
        return (f"unconfirmed on few tasks: the in-process {counterpart} probe passed (mean {played.mean:.3f} on "
                f"{played.scored} tasks), so this is not a cause")
    if name in DERIVED_RESAMPLED:
        redrawn = summarize(name, again, weights, DERIVED_MUTATIONS[name])
        if redrawn.mean is not None and noise.beyond(redrawn.mean, allowed, redrawn.scored, scale, totals(again)):
            return None
        shown = "no second draw" if redrawn.mean is None else f"a second draw scored {redrawn.mean:.3f}"
        return f"unconfirmed on few tasks: {shown}, not beyond the limit, so this is not a cause"
    return None


def judged_rows(records: list[DerivedProbeRecord]) -> list[Row]:
    """The records judged: `env_error` set where scoring failed or a played reply's reward component is not a
    finite number (excluded from the means like the audit's environment errors, never multiplied)."""
    rows = []
    for r in records:
        problem = None if r.skipped else r.error
        for name, score in r.components.items():
            if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
                problem = problem or f"reward {name!r} returned {score!r}, not a finite number"
        rows.append(Row.judged(r, None if r.skipped else problem))
    return rows


def run_derived(config: Config, worker: Worker, gates: GateReport,
                canaries: tuple[list[tuple[str, str, float | None, dict[str, float]]], int, int] | None = None
                ) -> GateReport:
    """The derive stage in the evaluation's child, judged and added to the gate report; `canaries` (the canary
    rollouts' rows, planned, unmatched: autoenv.evaluation.canary_split) judged with it."""
    started = time.time()
    worker.run("derive")
    derived = read_derived(worker.job.audit_dir / DERIVED_FILE)
    report = Gates(findings=list(gates.findings), probes=dict(gates.probes),
                   mode=gates.mode, matrix=Matrix.thaw(gates.matrix, config.probes.exploit_max))
    judge_derived(derived, config, report)
    reproduced = worker.job.audit_dir / REPRODUCE_FILE
    judge_reproduced(read_reproduced(reproduced) if reproduced.is_file() else None, report)
    if canaries is not None:
        judge_canaries(*canaries, config, report)
    report.seconds = round((gates.seconds or 0) + time.time() - started, 2)
    out = report.report()
    (worker.job.audit_dir / "gates.json").write_text(out.model_dump_json(indent=1))
    return out
