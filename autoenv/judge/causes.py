"""The failed gates grouped by cause: one item per cause, with one fix and the evidence folded under it.

A reward component that pays without the task being done is one cause however many probes
harvest it: `formatted` paying for any well-formed tag is caught by wrong-answer, first-number,
last-line, injection, constant and prompt-copy alike, and has one fix. The probe that names the
cause is the most basic one that harvested it (CAUSE_ORDER): when a reply with the wrong answer
in the right format is paid, every probe built on a wrong answer is paid too, so their own
defences (balance the answers, never address a grader) would name causes that are absent.
An oracle that falls short on a component that probes also harvest (a length reward the oracle's
short reply misses) is the same cause. Every other failed check is a cause of its own, with its
fix from autoenv.judge.offline.CHECK_FIXES; a passed check never gets one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autoenv.core.formats import idx_list, quoted
from autoenv.core.record import GateFinding, GateReport
from autoenv.gates import noise
from autoenv.gates.probes import DEFENCES
from autoenv.judge.fixes import ceiling_evidence, specific_fix

CAUSE_ORDER = ("padding", "empty", "refusal", "garbage", "echo", "tool-spam", "wrong-answer", "format-only",
               "swap-answer", "abstain", "stub", "grader-attack", "stall", "valid-tool-spam", "structural", "typical-value",
               "kitchen-sink", "first-number", "last-line", "injection", "self-report", "prompt-copy", "constant",
               "surface", "near-miss", "shape-fill", "field-copy", "whitespace", "search")
"""Which probe names a component's cause when several harvest it: the most basic first."""
CAUSE_TITLES = {
    "padding": "grows with the reply's length: filler text earns it",
    "empty": "pays a reply that holds no answer",
    "refusal": "pays a reply that holds no answer",
    "garbage": "pays random text: no answer is needed",
    "echo": "pays text copied from the prompt",
    "tool-spam": "pays tool calls, not what they lead to",
    "wrong-answer": "pays the format whatever the answer: a wrong answer in the right format earns it",
    "format-only": "pays the format whatever the answer: a wrong answer in the right format earns it",
    "swap-answer": "pays the format whatever the answer: a wrong answer in the right format earns it",
    "kitchen-sink": "finds the answer anywhere in the reply: a list of guesses earns it",
    "first-number": "reads the answer from the reply's first number, not where the format puts it",
    "last-line": "reads the answer from the reply's last line, not where the format puts it",
    "injection": "believes the reply's note to the grader: a wrong answer that claims to be right earns it",
    "prompt-copy": "is earned by copying from the prompt: the answer leaks into the prompt",
    "constant": "is earned by one answer given to every task: the answers are unbalanced",
    "whitespace": "changes with whitespace alone",
    "abstain": "pays a reply that declines to answer (\"I don't know\", unsure, an empty answer)",
    "stub": "pays code that defines the requested names and does nothing: its tests cannot fail",
    "grader-attack": "pays a program that acts on its grader (an object equal to everything, the expected value read "
                     "from the grader's frames or files, an early exit with status 0, a printed report of success) "
                     "instead of solving the task",
    "stall": "pays turns survived: repeating one valid move until the turn limit earns it",
    "valid-tool-spam": "pays valid tool calls whatever they lead to: a wrong answer after them earns it",
    "structural": "can be earned from the options' structure alone (a position, the median or longest option)",
    "typical-value": "pays closeness to a typical value: one guess at the usual magnitude earns it",
    "self-report": "believes what the reply says about itself (a confidence, `verified: true`, a score)",
    "surface": "pays one constant reply on every task (an empty format, a word or example from the instructions)",
    "search": "pays a reply the reward search built without the task, on tasks it was not found on",
    "near-miss": "accepts a number that is not the answer: its sign dropped, times ten, two digits swapped or a "
                 "count off by one",
    "shape-fill": "accepts the answer's shape filled wrongly: a superset of the answer, the whole domain, one item "
                  "repeated or unknown items of the right count, a number's leading digits, a tenth of it or a value far "
                  "beyond every answer, or a mapping's keys without their values",
    "field-copy": "pays another field of the task's data written where the answer goes: it compares with the wrong "
                  "field, or with more than the answer",
}
BLOCKING_FIRST = ("modules", "reward errors", "time limits", "load time", "deterministic load", "deterministic scoring",
                  "oracle", "gold validation", "pyproject", "readme")
PROBE_CHECKS = ("content-free", "plain channel")
"""Checks that judge probes, not the candidate's build: a failure is a hack, listed after the components' causes."""
DATASET = ("dataset size", "task keys", "exact duplicates", "conflicting labels", "near duplicates", "answer balance")


@dataclass
class Cause:
    """One thing to fix: a reward component, a check, or a probe whose harvest names no component."""

    issue: str
    fix: str
    evidence: list[str] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)
    """The probes that caught it (empty for a check)."""
    component: str | None = None
    kind: str = "check"
    """`component`, `check` (blocking), `dataset`, or `probe`."""


def causes(gates: GateReport | None, check_fix: Callable[[GateFinding], str | None]) -> list[Cause]:
    """The failed findings of `gates`, grouped: blocking checks, reward components, probes, dataset checks."""
    if gates is None:
        return []
    failed = [f for f in gates.findings if f.status == "fail"]
    weights = gates.matrix.weights if gates.matrix else {}
    by_component: dict[str, list[tuple[str, GateFinding]]] = {}
    loose: list[Cause] = []
    errored: list[str] = []
    for f in failed:
        if not f.name.startswith("probe "):
            continue
        name = f.name.removeprefix("probe ")
        if f.data.get("errors"):
            errored.append(name)
            continue
        components = paying_components(gates, name, f)
        for component in components:
            by_component.setdefault(component, []).append((name, f))
        if not components:
            loose.append(Cause(issue=f"{f.name}: {f.message}",
                               fix=DEFENCES.get(name, "make the reward depend on the task's content"),
                               evidence=[probe_evidence(gates, name, None)], probes=[name], kind="probe"))
    result: list[Cause] = []
    component_causes = [component_cause(gates, component, hits, weights) for component, hits in by_component.items()]
    for f in failed:
        if f.name.startswith("probe "):
            continue
        if f.name == "oracle" and fold_oracle(f, component_causes):
            continue
        if f.name == "content-free" and fold_content_free(f, component_causes):
            continue
        fix = check_fix(f) or f"fix this before anything else: the {f.name} check failed"
        result.append(Cause(issue=f"{f.name}: {f.message}", fix=fix,
                            kind="dataset" if f.name in DATASET else "probe" if f.name in PROBE_CHECKS else "check"))
    if errored:
        result.append(Cause(issue=f"the replies of the {', '.join(errored)} probe(s) hit reward errors",
                            fix="fix the reward errors first (see reward errors): a probe must be scored to be judged",
                            probes=errored, kind="check"))
    blocking = sorted((c for c in result if c.kind == "check"),
                      key=lambda c: BLOCKING_FIRST.index(c.issue.split(":")[0])
                      if c.issue.split(":")[0] in BLOCKING_FIRST else len(BLOCKING_FIRST))
    ordered = sorted(component_causes, key=lambda c: CAUSE_ORDER.index(lead(c.probes)))
    return blocking + ordered + loose + [c for c in result if c.kind in ("probe", "dataset")]


def paying_components(gates: GateReport, probe: str, f: GateFinding) -> list[str]:
    """The reward components the probe was paid by; for padding only those where it beats the oracle."""
    summary = gates.probes.get(probe)
    harvested = list((f.data.get("harvested") or (summary.harvested if summary else {})).keys())
    scores = gates.matrix.scores if gates.matrix else {}
    if base(probe) == "padding" and scores.get("oracle") and scores.get(probe):
        oracle, padded = scores["oracle"], scores[probe]
        harvested = [c for c in harvested if padded.get(c, 0.0) > oracle.get(c, 0.0) + 1e-9] or harvested
    elif scores.get(probe) and summary is not None:
        # a component is a cause only where this probe harvested it beyond noise: a keyword component that fails
        # prompt-copy must not name `correct`, which prompt-copy earned on 3 tasks in 100 as it always did
        column, limit = scores[probe], gates.matrix.limit if gates.matrix else 0.1
        reference = scores.get("derived reference" if probe.startswith("derived ") else "oracle", {})
        harvested = [c for c in harvested if c in column and noise.beyond(
            column[c], limit * max(reference.get(c, 1.0), 1e-9), summary.scored)] or harvested
    return harvested


def base(probe: str) -> str:
    return probe.removeprefix("derived ")


def lead(probes: list[str]) -> str:
    known = [base(p) for p in probes if base(p) in CAUSE_ORDER]
    return min(known, key=CAUSE_ORDER.index) if known else CAUSE_ORDER[-1]


def component_cause(gates: GateReport, component: str, hits: list[tuple[str, GateFinding]],
                    weights: dict[str, float]) -> Cause:
    probes = [name for name, _ in hits]
    leading = lead(probes)
    if searched_more(gates, component, probes, leading):
        leading = "search"
    weight = weights.get(component)
    named = f"reward component `{component}`" + (f" (weight {weight:g})" if weight is not None else "")
    title = CAUSE_TITLES.get(leading, f"is harvested by the {leading} probe")
    leader = next(name for name in probes if base(name) == leading) if leading in map(base, probes) else probes[0]
    fix = DEFENCES.get(leader, DEFENCES.get(leading, ""))
    if leading in ANSWER_BLIND and pays_wording(gates, component):
        title, fix = WORDING_TITLE, WORDING_FIX
    elif leading in ANSWER_BLIND and pays_closeness(gates, component):
        title, fix = CAUSE_TITLES["typical-value"], DEFENCES["typical-value"]
    shown = sorted(probes, key=lambda name: name != leader)  # the probe that names the cause shows its reply first
    evidence = [probe_evidence(gates, name, component) for name in shown]
    if (ceiling := ceiling_evidence(gates, component)) is not None:
        evidence.append(ceiling)  # the ceiling that explains this cause is part of it, not a dataset warning
    return Cause(issue=f"{named} {title}", fix=specific_fix(gates, component, leading) or f"`{component}`: {fix}",
                 evidence=evidence, probes=probes, component=component, kind="component")


def searched_more(gates: GateReport, component: str, probes: list[str], leading: str) -> bool:
    """Whether the reward search harvested `component` at least twice what the most basic probe did: then the
    search's reply shows the flaw (a list of every number earning full recall) and the basic probe only a corner of
    it (another task's list earning the overlap), so the search names the cause."""
    scores = gates.matrix.scores if gates.matrix else {}
    if "search" not in probes or leading == "search":
        return False
    found = scores.get("search", {}).get(component)
    basic = max((scores.get(p, {}).get(component) or 0.0 for p in probes if base(p) == leading), default=None)
    return found is not None and basic is not None and basic < 0.5 * found


ANSWER_BLIND = ("wrong-answer", "format-only", "swap-answer")
"""Probes that keep the reference's reply and only spoil its answer: what they harvest pays whatever the answer."""
WORDING_TITLE = ("pays the reply's wording whatever the answer (words or a style the reply can always show): "
                 "a wrong answer in the reference's words earns it")
WORDING_FIX = ("remove it, or gate it on correctness (pay it only when the answer is right); words or a style that "
               "any reply can show must never earn reward by themselves")


def pays_wording(gates: GateReport, component: str) -> bool:
    """Whether an answer-blind component pays the reference's words rather than the answer's format: the
    reference's reply with a wrong answer earns it, while a bare answer in the expected format (typical-value's
    reply, built from nothing but a number in each common format) does not. A format component (a well-formed
    tag) pays both. Without a bare-format column to compare, False: the format's fix stands."""
    scores = gates.matrix.scores if gates.matrix else {}
    blind = max((scores[p][component] for p in (*ANSWER_BLIND, *(f"derived {b}" for b in ANSWER_BLIND))
                 if component in scores.get(p, {})), default=None)
    bare = [scores["typical-value"][component]] if component in scores.get("typical-value", {}) else []
    if blind is None or not bare or blind <= 0:
        return False
    return max(bare) < 0.5 * blind


def pays_closeness(gates: GateReport, component: str) -> bool:
    """Whether an answer-blind component pays a wrong answer only in part: graded closeness (a ratio, a distance),
    not the format. A format component pays another task's answer what it pays the right one; a closeness
    component pays it less, by how far it is (reverse_text's LCS ratio: 0.37 of 1.0)."""
    scores = gates.matrix.scores if gates.matrix else {}
    blind = max((scores[p][component] for p in (*ANSWER_BLIND, *(f"derived {b}" for b in ANSWER_BLIND))
                 if component in scores.get(p, {})), default=None)
    right = scores.get("oracle", {}).get(component)
    return blind is not None and right is not None and 0 < blind < CLOSENESS_SHARE * right


CLOSENESS_SHARE = 0.9
"""Below this share of the reference's score, what a wrong answer earns is partial credit (closeness), not the
format's full pay."""


def probe_evidence(gates: GateReport, probe: str, component: str | None) -> str:
    """`wrong-answer: mean 0.600 (component 1.00); task idx 6: "<answer>305</answer>"`."""
    summary = gates.probes.get(probe)
    scores = (gates.matrix.scores.get(probe) or {}) if gates.matrix else {}
    parts = [f"{probe}: mean {summary.mean:.3f}" if summary and summary.mean is not None else probe]
    if component is not None and component in scores:
        parts[0] += f" ({component} {scores[component]:.2f})"
    best = summary.best[0] if summary and summary.best else None
    found = next((f for f in gates.findings if f.name == f"probe {probe}"), None)
    plan = str(found.data.get("strategy") or "") if found and probe == "search" else ""
    if plan and ("tool" in plan or "turn" in plan):  # an action plan: what it did earned the reply, not the words
        parts.append(f"played: {plan}")
    if best is not None:
        parts.append(f"task idx {best.idx}: {quoted(best.reply, 70)}")
    return "; ".join(parts)


def _joined(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def fold_content_free(f: GateFinding, found: list[Cause]) -> bool:
    """Fold the content-free rule's failure into the component causes of the probes it names (the same
    harvest seen against the reward's range); True when every probe it names has such a cause."""
    failed = set(f.data.get("failed") or [])
    paid = {probe: component for probe, component in (f.data.get("paid") or {}).items() if probe in failed}
    targets = [c for c in found if failed & {base(p) for p in c.probes} or c.component in paid.values()]
    covered = {base(p) for c in targets for p in c.probes} | {p for p, c in paid.items()
                                                               if c in {t.component for t in targets}}
    if not failed or not failed <= covered:
        return False
    shares = f.data.get("shares") or {}
    for cause in targets:
        mine = [n for n in sorted(failed) if n in {base(p) for p in cause.probes} or paid.get(n) == cause.component]
        by_share: dict[str, list[str]] = {}  # probes that reach the same share are said once: "a and b reach 25%"
        for n in mine:
            by_share.setdefault(f"{shares[n]:.0%}" if n in shares else "", []).append(n)
        cause.evidence.append("content-free: " + "; ".join(
            (f"{_joined(names)} {'reach' if len(names) > 1 else 'reaches'} {share} of the reward's range" if share
             else _joined(names)) for share, names in by_share.items())
            + " (probes.free_max; the rule needs no reference)")
    return True


def fold_oracle(f: GateFinding, found: list[Cause]) -> bool:
    """Fold an oracle shortfall into the component cause it comes from; True when it was folded."""
    short = set((f.data.get("components") or {}).keys())
    targets = [c for c in found if c.component in short]
    for cause in targets:
        tasks = f.data.get("tasks") or []
        cause.evidence.append(f"oracle: its own reply scores {f.data['components'][cause.component]} of 1 on "
                              f"`{cause.component}`" + (f" (task idx {idx_list(tasks[:6])})" if tasks else "")
                              + ": the oracle is held to the same reward")
    return bool(targets) and short <= {c.component for c in targets}
