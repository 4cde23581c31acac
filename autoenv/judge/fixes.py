"""A cause's own fix, written from what was found: the reply that earned, how it was built, the component it paid.

The probe families each have a defence (autoenv.gates.probes.DEFENCES), but the reward search finds flaws no family
names, and one generic sentence for all of them ("score what the reply says about this task ...") leaves the agent
to guess which of its parts applies. Here the search's finding is read for what made it pay, and the fix names that
and only that:
- a value that is not a number (NaN, inf) earned: the tolerance check compares operands that are not finite;
- a reply listing many items earned: recall is paid without precision;
- the reference never earns the component in full (the `ceiling` finding) while a reply built without the task
  does: the component pays for something other than the task (a phrase, a style): drop it or gate it;
- a value some tool returned earned: the reward accepts what a tool returned, not this task's answer;
- a rule-breaking action plan earned (autoenv.gates.action_calls): the stated rule it broke is not enforced;
- a grader-attack program earned (autoenv.gates.grader_attacks): what that program reached (the grader's frames, a
  file beside it, its exit status, its own object's `__eq__`) is named and taken away;
- a shape-fill strategy earned (autoenv.gates.shapes): the comparison that accepted that filling is named.
None when nothing specific was found: the probe's own defence stands.
"""

from __future__ import annotations

import re

from autoenv.core.record import GateFinding, GateReport

NOT_FINITE = re.compile(r"(?i)(?<![a-z])(?:nan|[+-]?inf(?:inity)?|1e308)(?![a-z])")
ITEMS = re.compile(r"[,;\n]")
MANY = 8
"""Items in a reply that make it a list of everything rather than an answer."""
UNEARNED = 0.5
"""A reference whose best on a component stays under this share earns it only in part at most: the component pays for
something other than the task (a reference at 0.96 of a format check only falls short of it)."""
PLANS = {
    "tried in one turn": "count the tries and pay nothing past the limit the instructions state (the tools "
                         "answered every value of the argument, so trying them all found the answer)",
    "just below the range": "refuse every argument outside the range the rules state, on both sides (an index below "
                            "0 read from the end of a Python list shows what is meant to stay hidden)",
    "just above the range": "refuse every argument outside the range the rules state, on both sides (an amount or "
                            "an index past the stated limit was accepted)",
    "the rules order": "refuse a step whose prerequisite was not taken, in the tool itself (check the state: the "
                       "approval, the review, the earlier step), never only in the instructions",
    "entries the results": "pay for the answer the task asks for, never for reading or searching as such (reading "
                           "any entries earned it)",
}
"""What an action plan's description says -> the fix for the rule it broke."""
ATTACK_FIXES = {
    "expected value read from the grader": "run the program in an interpreter of its own that is handed the inputs "
                                           "only, and compare its results (as plain data, e.g. JSON) in the grader: "
                                           "a program called in the grader's process walks the call stack "
                                           "(`sys._getframe`) to the expected value the grader holds",
    "results equal to everything": "compare results as plain data of the expected type (`type(got) is type(want)` "
                                   "first, or values that crossed a process boundary as JSON): an object of the "
                                   "program's own says it equals anything",
    "exit 0 at once": "pass a test only when the output equals the expected value, never on the exit status alone: a "
                      "program that exits at once with status 0 passed",
    "report success": "pass a test only when the output equals the expected value, never on words it printed: a "
                      "program that prints \"All tests passed\" passed",
    "expected output read from its surroundings": "run the program where no expected value can be read: a folder "
                                                  "holding its input only, and nothing expected in its environment "
                                                  "or arguments (it printed the expected output it found beside it)",
}
"""A grader-attack strategy -> the fix for what it reached."""
SHAPE_FIXES = {
    "superset": "score precision as well as recall: items that are not in the answer must cost (an exact set, or F1)",
    "whole domain": "score precision as well as recall: a list of every possible item must not earn it",
    "repeated item": "check membership item by item: a list of the right length holding one item repeated must not "
                     "earn it",
    "unknown items": "check membership item by item: items of the right count that no answer holds must not earn it",
    "leading digits": "compare the whole number (parsed, then `==` or a stated tolerance), never a prefix or `in`",
    "a tenth": "compare the whole value within the tolerance the task states: a tenth of the answer passed",
    "far above": "compare for equality (or within the stated tolerance), never with a one-sided bound: a number far "
                 "above every answer passed",
    "far below": "compare for equality (or within the stated tolerance), never with a one-sided bound: a number far "
                 "below every answer passed",
    "keys only": "compare each key's value with the answer's, not only which keys are there: empty values passed",
    "one value for every key": "compare each key's value with the answer's, not only its type: one value under "
                               "every key passed",
}
"""A shape-fill strategy -> the fix for the comparison that accepted it."""


def finding(gates: GateReport, name: str) -> GateFinding | None:
    return next((f for f in gates.findings if f.name == name), None)


def specific_fix(gates: GateReport, component: str, leading: str) -> str | None:
    """The fix for what the reward search or a grader-attack program (when it names the cause) found on `component`,
    or None."""
    if leading in ("grader-attack", "shape-fill"):
        found = finding(gates, f"probe {leading}")
        fixes = ATTACK_FIXES if leading == "grader-attack" else SHAPE_FIXES
        fix = fixes.get(str((found.data.get("strategy") if found else "") or ""))
        return f"`{component}`: {fix}" if fix else None
    if leading != "search":
        return None
    found = finding(gates, "probe search")
    strategy = str((found.data.get("strategy") if found else "") or "")
    summary = gates.probes.get("search")
    reply = summary.best[0].reply if summary and summary.best else ""
    for said, fix in PLANS.items():
        if said in strategy:
            return f"`{component}`: {fix}"
    if "value the tools returned" in strategy:
        reading = (" and never pay for the calls or the entries read as such (it read a new one each round)"
                   if "a new entry each round" in strategy else "")
        return (f"`{component}`: compare the reply with this task's own answer (computed from the task's data), never "
                f"with any value a tool returned during the episode{reading}: echoing a looked-up value must earn "
                "nothing")
    if NOT_FINITE.search(reply):
        return (f"`{component}`: parse the number and reject it unless it is finite (`math.isfinite`) before any "
                "comparison: NaN compares false with everything, so a check written `not abs(x - want) > tol` (or "
                "`x >= low`, with inf) passes it")
    if len([part for part in ITEMS.split(reply) if part.strip()]) >= MANY:
        return (f"`{component}`: score precision as well as recall (items that are not in the answer cost, e.g. F1 "
                "or an exact set): a list of every candidate must not earn it")
    if component in ceiling_components(gates, below=UNEARNED):
        return (f"`{component}`: the reference never earns it in full, and a reply built without the task does: it "
                "pays for something other than the task (a phrase, a style). Drop it, or pay it only when the "
                "answer is right")
    return None


def ceiling_components(gates: GateReport, below: float = 1.0) -> set[str]:
    """The components the `ceiling` finding says the reference never earns in full (its best under `below`)."""
    found = finding(gates, "ceiling")
    best = (found.data.get("components") or {}) if found else {}
    return {c for c, value in best.items() if not isinstance(value, (int, float)) or value < below}


def ceiling_evidence(gates: GateReport, component: str) -> str | None:
    """The ceiling finding's words on `component`, as a line of the cause it explains."""
    found = finding(gates, "ceiling")
    if found is None or component not in ceiling_components(gates):
        return None
    part = next((p for p in found.message.split("; ") if f"`{component}`" in p), None)
    return f"ceiling: {part.removeprefix('components the reference never earns in full: ')}" if part else None
