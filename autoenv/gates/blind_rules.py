"""The rules of the blind probes (content-free replies placed in the models' own rollout traces) and of the stored
rewards scored again in a fresh child.

The in-process probes hand a reward a trace no rollout has: no model call, no usage, no timing,
no seat's model or sampling. A reward can tell them apart and pay honestly only then. The
blind probes (autoenv.child.derived.score_blind) take stored rollouts of each model and put a
content-free reply (empty, a refusal, an abstention) in place of the model's, on the rollout's
own trace, so nothing in the trace says it is a probe. Two findings:

- `blind probes`: each content-free reply's mean as a share of the reward's range, per model,
  allowed probes.free_max above the floor (the in-process rule, with its noise rule). Where the
  in-process probe of the same name stayed within it, the failure says the reward pays
  differently when audited.
- `stored rewards` (from the reproduce stage, autoenv.child.reproduce_stage): every stored rollout
  scored again in a fresh child must earn what it was paid. A reward that does not reproduce on a
  single-turn rollout fails where scoring was found deterministic (the `deterministic scoring`
  check); otherwise, and on multi-turn or tool rollouts alone, it is a warning.
"""

from __future__ import annotations

from collections import defaultdict

from autoenv.core.config import Config
from autoenv.core.formats import idx_list
from autoenv.core.record import ROLES
from autoenv.gates import noise
from autoenv.gates.blind_record import ReproduceRecord
from autoenv.gates.derived_record import DerivedProbeRecord
from autoenv.gates.findings import Gates
from autoenv.gates.ranges import max_reward
from autoenv.gates.rows import Row

FREE = ("empty", "refusal", "abstain")
"""The blind probes, each judged as content-free."""


def judge_blind(records: list[DerivedProbeRecord], rows: list[Row], config: Config, report: Gates) -> None:
    """Add `blind probes` from the derive stage's blind records (`rows`: the same, judged)."""
    if not rows:
        return
    weights: dict[str, float] = {}
    for r in records:
        weights.update(r.weights)
    played = [row for row in rows if not row.skipped and not row.env_error and row.total is not None]
    floor = min([0.0, *(row.total for row in played if row.total is not None)])
    top = max([max_reward(weights), *(row.total for row in played if row.total is not None)])
    if top - floor <= 1e-9:
        report.add("blind probes", "pass", f"{len(played)} replies on the models' own rollout traces all scored the "
                   f"floor ({floor:g})", shares={}, failed=[])
        return
    limit = config.probes.free_max
    failures: list[str] = []
    shares: dict[str, float] = {}
    for name in FREE:
        by_role: dict[str, list[float]] = defaultdict(list)
        for row in played:
            if row.probe == f"blind {name}":
                by_role[row.role or "?"].append(((row.total or 0.0) - floor) / (top - floor))
        for role in [*ROLES, *sorted(set(by_role) - set(ROLES))]:
            values = by_role.get(role)
            if not values:
                continue
            share = sum(values) / len(values)
            shares[f"{name} {role}"] = round(share, 4)
            if noise.beyond(share, limit, len(values), 1.0, values):
                failures.append(f"{name} on the {role} model's traces reaches {share:.0%} of the range "
                                f"(over {len(values)} rollouts){_audited(report, name, limit)}")
    span = f"[{floor:g}, {top:.3g}]"
    if failures:
        report.add("blind probes", "fail", "content-free replies put in place of the models' own replies, on their "
                   "rollouts' traces (calls, usage, timing, model and sampling kept), earn reward: "
                   + "; ".join(failures) + f". The reward's range is {span}; allowed {limit:.0%} above its floor "
                   "(probes.free_max)", shares=shares, failed=sorted({f.split(" ")[0] for f in failures}),
                   differs=any("when audited" in f for f in failures))
    else:
        report.add("blind probes", "pass", f"content-free replies on {len({r.key for r in played})} of the models' own "
                   f"rollout traces stay within {limit:.0%} of the reward's range {span}",
                   shares=shares, failed=[])


def _audited(report: Gates, name: str, limit: float) -> str:
    """`; the reward pays differently when audited: ...` where the in-process probe of the same name passed."""
    free = next((f for f in report.findings if f.name == "content-free"), None)
    share = (free.data.get("shares") or {}).get(name) if free is not None else None
    if share is None or share > limit + 1e-9:
        return ""
    return (f"; the reward pays differently when audited: the same reply scored as an in-process probe (a trace "
            f"with no model call) reached {share:.0%}")


def judge_reproduced(record: ReproduceRecord | None, report: Gates) -> None:
    """The `stored rewards` finding from the reproduce stage's record (None: the stage did not run)."""
    if record is None:
        return
    if record.reason:
        report.add("stored rewards", "skip", f"n/a, not tested: {record.reason}", differ=[])
        return
    scored = record.checked - record.errors - record.unscored
    partial = "; stopped at its limit before the last rollout" if record.partial else ""
    errors = (f"; {record.errors} raised when scored again" if record.errors else "") + \
        (f"; {record.unscored} gave no number from the transcript alone (rewards that read state the rollout kept "
         "outside it)" if record.unscored else "")
    if not record.differ:
        status = "pass" if scored else "skip"
        report.add("stored rewards", status, (f"{scored} stored rollouts' rewards reproduced, each scored again in a "
                   f"fresh child process on its own trace" if scored else "n/a, not tested: no finished rollout "
                   "to score again") + errors + partial, differ=[])
        return
    deterministic = next((f.status == "pass" for f in report.findings if f.name == "deterministic scoring"), None)
    shown = "; ".join(f"{d.role} task idx {d.idx}: paid {d.stored:.3g}, scored again {d.again:.3g}"
                      for d in record.differ[:4])
    plain = any(d.single_turn for d in record.differ)  # a multi-turn or tool rollout may keep state outside
    report.add("stored rewards", "fail" if deterministic and plain else "warn",
               f"{len(record.differ)} of {scored} stored rollouts were paid what the same reply on the same trace does "
               f"not earn when scored again in a fresh child process ({shown}): the reward paid the rollouts "
               "differently from how it scores the same transcript" + errors + partial
               + ("" if deterministic else " (scoring was not found deterministic, so this is a warning)")
               + ("" if plain else " (multi-turn or tool rollouts only, whose rewards may read state the rollout "
                  "kept outside the transcript, so this is a warning)"),
               differ=[d.model_dump() for d in record.differ[:50]], tasks=idx_list([d.idx for d in record.differ]))


def judge_canaries(rows: list[tuple[str, str, float | None, dict[str, float]]], planned: int, unmatched: int,
                   config: Config, report: Gates) -> None:
    """The `canaries` finding: (role, probe, total, weights) of each canary rollout taken out of the models' traces
    (autoenv.evaluation.canary_split), judged per probe and model like the content-free probes."""
    if not planned and not rows:
        return
    note = (f"; {unmatched} recorded canary rollout(s) did not hold the canary's reply and stayed with the model's"
            if unmatched else "")
    scored = [(role, probe, total, weights) for role, probe, total, weights in rows if total is not None]
    if not scored:
        report.add("canaries", "skip", f"n/a, not tested: none of the {planned} planned canary rollouts was scored "
                   "(served as the rollouts started; a rollout that sent no request, or an error, plays none)" + note,
                   planned=planned, served=len(rows), shares={}, failed=[])
        return
    weights: dict[str, float] = {}
    for _, _, _, w in scored:
        weights.update(w)
    totals = [total for _, _, total, _ in scored if total is not None]
    floor, top = min([0.0, *totals]), max([max_reward(weights), *totals])
    limit = config.probes.free_max
    failures: list[str] = []
    shares: dict[str, float] = {}
    paid_all: set[str] = set()
    if top - floor > 1e-9:
        for role in ROLES:  # every canary reply is content-free: judged together per model, named per reply
            mine = [(probe, ((total or 0.0) - floor) / (top - floor)) for r, probe, total, _ in scored if r == role]
            if not mine:
                continue
            values = [value for _, value in mine]
            share = sum(values) / len(values)
            shares[role] = round(share, 4)
            if noise.beyond(share, limit, len(values), 1.0, values):
                paid = sorted({probe for probe, value in mine if value > limit + 1e-9}, key=FREE.index)
                paid_all.update(paid)
                audited = next((words for name in paid if (words := _audited(report, name, limit))), "")
                failures.append(f"{', '.join(paid)} as the {role} model's reply reach {share:.0%} of the range "
                                f"(over {len(values)} canary rollouts){audited}")
    counts = f"{len(rows)} of {planned} planned canary rollouts served"
    if failures:
        report.add("canaries", "fail", f"content-free replies served in the rollouts stage as the models' own (the "
                   f"seats' model, sampling, runtime and trace, picked at random as rollouts started) earn reward: "
                   + "; ".join(failures) + f". The reward's range is [{floor:g}, {top:.3g}]; allowed {limit:.0%} "
                   f"above its floor (probes.free_max); {counts}" + note, planned=planned, served=len(rows),
                   shares=shares, failed=sorted(paid_all, key=FREE.index),
                   differs=any("when audited" in f for f in failures))
    else:
        report.add("canaries", "warn" if unmatched else "pass",
                   f"{counts}; their content-free replies stay within {limit:.0%} of the reward's range above its "
                   f"floor; the statistics leave them out" + note, planned=planned, served=len(rows), shares=shares,
                   failed=[])
