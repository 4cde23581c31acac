"""The reference-free invariant: a policy that carries no task content must score near the reward's floor.

Empty, refusal, echo, garbage, tool spam, a constant answer and the content-free families of
autoenv.gates.families use nothing a solver would know, so whatever the oracle they must stay
near the reward's floor. They are judged against the reward's own range (declared on the task
class, else the highest total reward observed on any probe of the audit), so a flawed reward
is caught even where no oracle hook and no `answer` field give a reference. Also here: what a
label count allows a constant answer, and the exploit coverage per reward component.
"""

from __future__ import annotations

from typing import Literal

from autoenv.core.formats import quoted
from autoenv.core.record import GateReport, ProbeSummary
from autoenv.gates import noise
from autoenv.gates.audit_record import DatasetMeasure
from autoenv.gates.families import FAMILIES
from autoenv.gates.findings import Gates
from autoenv.gates.rows import Row, totals

CONTENT_FREE = ("empty", "refusal", "echo", "garbage", "tool-spam", "constant", *FAMILIES)
MARGIN = 0.125
"""The share of the way from chance (1/labels) to certainty a balanced label set may still show."""


def label_allowance(labels: int) -> float:
    """The largest share one of `labels` answers (or options) may hold in a near-balanced set: chance plus
    MARGIN of the rest (two labels: 56%, five: 30%); 0 for a single label (always the same answer)."""
    if labels < 2:
        return 0.0
    return 1 / labels + (1 - 1 / labels) * MARGIN


def answer_share_allowed(max_share: float, labels: int | None) -> float:
    """What the answer-balance check allows: checks.max_answer_share, or more when the label count
    (yes/no, five options) cannot be balanced below it."""
    return max(max_share, label_allowance(labels or 0))


def correctness_component(summaries: dict[str, ProbeSummary], by_probe: dict[str, list[Row]],
                          weights: dict[str, float]) -> str | None:
    """The reward component that tells a right answer from a wrong one: the positively weighted component
    with the largest gap between the oracle and the wrong-answer probe (None when none separates them)."""
    def mean(name: str, component: str) -> float | None:
        values = [v for r in by_probe.get(name, [])
                  if not r.skipped and not r.env_error and (v := r.score(component)) is not None]
        return sum(values) / len(values) if values else None
    gaps = {}
    for component, weight in weights.items():
        right, wrong = mean("oracle", component), mean("wrong-answer", component)
        if weight > 0 and right is not None and wrong is not None and right - wrong > 0.5:
            gaps[component] = right - wrong
    return max(gaps, key=lambda c: gaps[c]) if gaps else None


def copies_a_constant(records: list[Row]) -> str | None:
    """The span prompt-copy's best strategy copied when it is the same on every task (a word of the system
    prompt, say `true`): then it is a constant answer, judged like the constant probe."""
    copied = {r.copied for r in records if not r.skipped}
    return next(iter(copied)) if len(copied) == 1 and None not in copied else None


def judge_constant(records: list[Row], summary: ProbeSummary, correct: str | None, reference: float,
                   exploit_max: float, dataset: DatasetMeasure, max_answer_share: float,
                   own: Literal["answer_is_constant", "answer_is_copy"] = "answer_is_constant",
                   what: str = "a constant answer") -> tuple[bool, str]:
    """The constant probe: the accuracy of answering the taskset's most common answer everywhere, read from the
    correctness signal (`correct`: the component that separates the oracle from a wrong answer), allowed the
    sampled tasks whose answer it is while the label set is as balanced as its label count allows."""
    played = [r for r in records if r.played]
    fair = sum(bool(getattr(r, own)) for r in played) / len(played) if played else 0.0
    labels, top = dataset.distinct_answers, dataset.top_answer_share
    balanced = top is None or top <= answer_share_allowed(max_answer_share, labels) + 1e-9
    allowed = max(exploit_max, fair if balanced else min(fair, label_allowance(labels or 0)))
    if correct is not None:
        values = [r.score(correct) or 0.0 for r in played]
        accuracy = sum(values) / len(values) if values else 0.0
        source = f"by the `{correct}` reward (the component that separates the oracle from a wrong answer)"
    else:
        values = [(r.total or 0.0) / (reference or 1.0) for r in played]
        accuracy = (summary.mean or 0.0) / (reference or 1.0)
        source = "by the total reward against the oracle's (no component separates the oracle from a wrong answer)"
    why = (f"the {fair:.0%} of sampled tasks whose answer it is" if allowed == fair and fair > exploit_max else
           f"{exploit_max:.0%} (probes.exploit_max)" if allowed == exploit_max else
           f"{allowed:.0%}, what {labels} labels allow (the most common answer holds {top:.0%} of the taskset)")
    bad = noise.beyond(accuracy, allowed, len(values), 1.0, values)  # a cause only on evidence beyond noise
    words = f"{what} is right on {accuracy:.0%} of the sampled tasks {source}; allowed {why}"
    if not bad and accuracy > allowed + 1e-9:
        words += "; " + noise.within(accuracy, allowed, len(values), 1.0, values)
    return bad, words


def judge_free(report: Gates, summaries: dict[str, ProbeSummary], by_probe: dict[str, list[Row]],
               weights: dict[str, float], *,
               declared: bool, maximum: float, free_max: float, dataset: DatasetMeasure, max_answer_share: float,
               inapplicable: dict[str, str] | None = None) -> dict[str, tuple[bool, str]]:
    """Add the `content-free` finding: each content-free probe's mean as a share of the reward's range.
    Returns, per probe judged, whether it failed and the rule in words (for the probe's own row)."""
    scored = [total for rs in by_probe.values() for r in rs if (total := r.total) is not None]
    floor = min([0.0, *scored])
    top = maximum if declared else max(scored, default=0.0)
    source = "declared by the task's reward_range" if declared else "the highest total reward observed on any probe"
    informed = [total for name, rs in by_probe.items() if name not in CONTENT_FREE
                for r in rs if (total := r.total) is not None]
    if not declared and top > floor + 1e-9 and max(informed, default=floor) <= floor + 1e-9 and maximum > floor:
        # the top was observed only by probes that carry no task content: it is no range (an echo at 0.010 was
        # once "30% of the range [0, 0.034]"). Undeclared, every component scored in [0, 1] (a score outside
        # makes autoenv.gates.ranges normalise by the range it observed), so the weights' sum is the range.
        source = (f"the sum of the positive weights: every component scores in [0, 1], and no reply with task "
                  f"content was scored (the content-free probes' own best, {top:.3g}, is no range)")
        top = maximum
    if top - floor <= 1e-9:
        if scored:  # every scored reply earned the floor: nothing content-free rose above it
            report.add("content-free", "pass", f"every content-free probe scored the floor ({floor:g}); no probe earned "
                       "more, so the reward's range above it is unobserved (an oracle hook or a declared "
                       "`reward_range` would show it)", shares={}, range=[floor, top], failed=[])
        else:
            report.add("content-free", "skip", "n/a, not tested: no probe reply was scored")
        return {}
    failures: list[str] = []
    shares: dict[str, float] = {}
    untested: list[str] = []
    paid_by: dict[str, str] = {}  # failed probe -> the component that paid it
    verdicts: dict[str, tuple[bool, str]] = {}
    labels = dataset.distinct_answers or 0
    for name in CONTENT_FREE:
        summary = summaries.get(name)
        if summary is None or name in (inapplicable or {}):
            continue
        if summary.mean is None:
            untested.append(name)
            continue
        earned = totals(by_probe.get(name, []))
        mean = sum(earned) / len(earned) if earned else summary.mean  # unrounded: rounding is for display only
        share = (mean - floor) / (top - floor)
        shares[name] = round(share, 4)
        allowed = free_max
        if name == "constant":  # the label allowance, and (as in its own row) the sampled tasks whose answer it is
            played = [r for r in by_probe.get(name, []) if not r.skipped and not r.env_error]
            fair = sum(bool(r.answer_is_constant) for r in played) / len(played) if played else 0.0
            balanced = (dataset.top_answer_share or 0.0) <= answer_share_allowed(max_answer_share, labels) + 1e-9
            allowed = max(free_max, label_allowance(labels) if labels >= 2 else 0.0, fair if balanced else 0.0)
        if name == "structural":
            choices = max((r.choices or 0 for r in by_probe.get(name, [])), default=0)
            allowed = max(free_max, label_allowance(choices))
        values = [(t - floor) / (top - floor) for t in earned]
        bad = noise.beyond(share, allowed, summary.scored, 1.0, values)
        words = f"{share:.0%} of the reward's range, allowed {allowed:.0%} above its floor (content-free, probes.free_max)"
        if not bad and share > allowed + 1e-9:
            words += "; " + noise.within(share, allowed, summary.scored, 1.0, values)
        verdicts[name] = (bad, words)
        if bad:
            paid = _paid(by_probe.get(name, []), weights)
            paid_by[name] = paid
            strategy = next((r.strategy for r in by_probe.get(name, []) if r.strategy), None)
            failures.append(f"{name} reaches {share:.0%} of the range (allowed {allowed:.0%}), paid by "
                            f"`{paid}`" + (f", best strategy {quoted(strategy)}" if strategy and strategy != name else ""))
    span = f"[{floor:g}, {top:.3g}] ({source})"
    if failures:
        report.add("content-free", "fail", "policies that carry no task content earn reward: " + "; ".join(failures)
                   + f". The reward's range is {span}; allowed {free_max:.0%} above its floor (probes.free_max)",
                   shares=shares, range=[floor, top], failed=[f.split(" ")[0] for f in failures], paid=paid_by)
    else:
        report.add("content-free", "pass", f"{len(shares)} content-free probes stay within {free_max:.0%} of the "
                   f"reward's range {span} above its floor" + (f"; not tested: {', '.join(untested)}" if untested else ""),
                   shares=shares, range=[floor, top], failed=[])
    return verdicts


def _paid(records: list[Row], weights: dict[str, float]) -> str:
    """The component that paid a probe most (mean score times weight)."""
    totals: dict[str, float] = {}
    for r in records:
        for component, score in ({} if r.skipped else r.numbers()).items():
            totals[component] = totals.get(component, 0.0) + score * weights.get(component, 1.0)
    return max(totals, key=lambda c: totals[c]) if totals else "?"


def coverage(report: Gates, summaries: dict[str, ProbeSummary], by_probe: dict[str, list[Row]],
             weights: dict[str, float], untested: dict[str, str], inapplicable: dict[str, str]) -> None:
    """The `exploit coverage` finding: how many probes were scored on each reward component, which could not
    run, and which do not apply to this environment's prompts."""
    per = {c: sorted(n for n, s in summaries.items() if n != "oracle" and s.mean is not None
                     and any(c in r.components for r in by_probe.get(n, []) if not r.skipped))
           for c in weights}
    total = sum(1 for n in summaries if n != "oracle" and n not in inapplicable)
    text = "; ".join(f"`{c}`: {len(names)} of {total} probes" for c, names in per.items()) or "no reward component"
    report.add("exploit coverage", "warn" if untested else "pass", text
               + (f"; could not run: {', '.join(untested)}" if untested else "")
               + (f"; n/a here: {', '.join(inapplicable)}" if inapplicable else ""),
               components={c: len(n) for c, n in per.items()}, probes=total, untested=sorted(untested),
               inapplicable=sorted(inapplicable))


def coverage_line(gates: GateReport | None) -> str | None:
    """The result block's `coverage` field: probes scored per reward component, and those that could not run."""
    found = [f for f in (gates.findings if gates is not None else []) if f.name == "exploit coverage"]
    if not found:
        return None
    data = found[0].data
    text = ", ".join(f"{c} {n}/{data.get('probes')}" for c, n in (data.get("components") or {}).items())
    return text + (f"; not run: {', '.join(data['untested'])}" if data.get("untested") else "")
