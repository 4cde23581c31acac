"""The offline judge: what a careful reader would flag from the numbers alone.

Deterministic, free and always available: it is the judge of `--offline` runs, the
fallback whenever a model judge fails, and the floor the model judges build on. It
reads the entry (statistics, readiness, gates) and the sampled rollout ids.

Each failed check has its own fix, built from the measurements the check recorded
(`CHECK_FIXES`): one generic line for every dataset problem once told an agent to "generate
more distinct tasks" when 90% of its answers were "no". Failed probes are grouped by the
reward component they harvested (autoenv.judge.causes): one item and one fix per cause.
"""

from __future__ import annotations

import math
from typing import Callable

from autoenv.core.config import Bands, Judge
from autoenv.core.formats import idx_list, quoted
from autoenv.core.record import (
    DatasetQuality,
    Entry,
    Findings,
    GateFinding,
    GateReport,
    Hack,
    JudgeResult,
    Priority,
    RewardFaithfulness,
    RlAssessment,
    SpecFidelity,
)
from autoenv.endpoint.reference import oracle_inferred, reference_missing
from autoenv.gates.probes import DEFENCES
from autoenv.judge.base import JudgeCall
from autoenv.judge.causes import causes

FOLDED_WARNINGS = ("exploit matrix",)
"""Warnings shown under the cause they belong to (the matrix's harvests), not as dataset issues."""


def available(cfg: Judge) -> bool:
    return True


def judge(call: JudgeCall) -> JudgeResult:
    return JudgeResult(backend="offline", findings=offline_findings(call.entry, call.bands, call.rollout_ids))


# --- one concrete fix per failed check, from the measurements the check recorded -------------


def _answer_balance(f: GateFinding) -> str:
    d = f.data
    answer, share, allowed = d.get("answer"), d.get("share"), d.get("allowed")
    if share is None or allowed is None:
        return "balance the answers: no single answer may be the answer of most tasks"
    distinct, tasks = d.get("distinct") or 0, d.get("tasks") or 0
    head = f"balance the answers: {quoted(answer)} is the answer of {share:.1%} of the tasks, allowed {allowed:.0%}"
    if distinct and 1 / distinct > allowed:
        return (f"{head}; with {distinct} distinct answers one of them holds at least {1 / distinct:.0%}, so widen "
                f"the answer space (more distinct answers, e.g. ask for the value rather than yes/no) until none "
                f"is the answer of more than {allowed:.0%}")
    swap = math.ceil((share - allowed) * tasks) if tasks else None
    return (f"{head}: bring it to at most {allowed:.0%}"
            + (f" by replacing about {swap} of its tasks with tasks whose answer differs" if swap else ""))


def _exact_duplicates(f: GateFinding) -> str:
    groups, repeated = f.data.get("examples") or [], f.data.get("repeated")
    shown = "; ".join(" = ".join(str(i) for i in group) for group in groups)
    count = f"{repeated} " if repeated else ""
    return (f"make the {count}repeated {f.data.get('unit') or 'prompts'} distinct (vary the content, not the wording) "
            "or drop the copies" + (f"; repeated task idx: {shown}" if shown else ""))


def _conflicting_labels(f: GateFinding) -> str:
    examples = f.data.get("examples") or []
    shown = "; ".join(f"idx {a} {quoted(x)} vs idx {b} {quoted(y)}" for a, x, b, y in examples)
    return ("give each prompt one answer in the candidate's loader: keep one task per prompt (dedupe), or fix "
            "the wrong label, or put what tells the tasks apart into the prompt"
            + (f"; e.g. {shown}" if shown else ""))


def _near_duplicates(f: GateFinding) -> str:
    pairs = f.data.get("examples") or []
    shown = "; ".join(f"{i} ~ {j} (similarity {sim})" for i, j, sim in pairs)
    return ("rewrite or drop one task of each near-duplicate pair: vary the content, not the wording"
            + (f"; e.g. task idx {shown}" if shown else ""))


def _dataset_size(f: GateFinding) -> str:
    size, wanted = f.data.get("size"), f.data.get("wanted")
    if size is None or wanted is None:
        return "generate more meaningfully different tasks (vary content, not wording)"
    return f"generate {wanted - size} more meaningfully different tasks (have {size}, wanted >= {wanted})"


def _task_keys(f: GateFinding) -> str:
    keys = f.data.get("keys") or []
    return ("give every task a unique `key`, built from what makes the task distinct"
            + (f"; repeated: {', '.join(map(quoted, keys))}" if keys else ""))


def _oracle(f: GateFinding) -> str:
    cause = f.data.get("cause")
    if cause == "unscored":
        return "make the oracle hook return a reply for every task and fix the reward errors it hit (see reward errors)"
    if cause == "no positive weight":
        return "give the reward that checks the answer a positive weight, e.g. @vf.reward(weight=1.0)"
    tasks = f.data.get("tasks") or []
    components = f.data.get("components") or {}
    where = (", ".join(f"`{name}` (mean {score} of 1)" for name, score in components.items())
             if components else "the reward")
    return (f"on task idx {idx_list(tasks[:8])} the oracle's reply fell short in {where}: score that reply by hand, then fix "
            "the reward if the reply is right, or the oracle or the task if it is wrong")


def _modules(f: GateFinding) -> str:
    modules = f.data.get("modules") or []
    first = modules[0] if modules else "candidate_env"
    return (f"make {', '.join(modules) or 'every module'} importable (`autoenv check` shows the import error of "
            f"{first}); a missing package goes in candidate/pyproject.toml [project].dependencies")


def _reward_errors(f: GateFinding) -> str:
    examples = f.data.get("examples") or []
    return ("make every reward return a finite score in [0, 1] on every reply, an empty or absurd one included"
            + (f"; e.g. {'; '.join(examples[:2])}" if examples else ""))


CHECK_FIXES: dict[str, Callable[[GateFinding], str]] = {
    "pyproject": lambda f: f"edit candidate/pyproject.toml [project]: {f.message}",
    "readme": lambda f: ("write candidate/README.md (200 characters or more): the task, each reward and the "
                         "hacks it defends against, the config knobs"),
    "modules": _modules,
    "dataset size": _dataset_size,
    "task keys": _task_keys,
    "exact duplicates": _exact_duplicates,
    "conflicting labels": _conflicting_labels,
    "near duplicates": _near_duplicates,
    "answer balance": _answer_balance,
    "deterministic load": lambda f: ("seed every random choice from the config (random.Random(seed)), never from "
                                     "the clock, a set's order or global state"
                                     + (f"; the loads first differ at position {f.data['position']}"
                                        if f.data.get("position") is not None else "")),
    "deterministic scoring": lambda f: ("make every reward a pure function of the trace and the task: no randomness, "
                                        "clock, network or state kept between calls"),
    "reward errors": _reward_errors,
    "oracle": _oracle,
    "time limits": lambda f: ("make the named call return within its limit: no blocking sleep, network wait or "
                              "unbounded loop in load(), a reward or a tool; cache what is slow to build"
                              + (f"; {'; '.join((f.data.get('breaches') or [])[:2])}" if f.data.get("breaches") else "")),
    "gold validation": lambda f: ("make the task's gold check pass on its own reference answer: fix the rows whose "
                                  "answer fails Task.validate, or the check itself"
                                  + (f" (task idx {idx_list(f.data['invalid'][:8])})" if f.data.get("invalid") else "")
                                  + (f"; it raised: {f.data['errors'][0]}" if f.data.get("errors") else "")),
    "content-free": lambda f: ("make every reward pay for the task's content only: "
                               + "; ".join(f"{n}: {DEFENCES[n]}" for n in (f.data.get("failed") or []) if n in DEFENCES)),
    "blind probes": lambda f: ("make every reward pay for the task's content only, whatever the trace around the "
                               "reply: a content-free reply on a real rollout's trace (its model calls, usage, model "
                               "and sampling) must earn what it earns as a probe"
                               + ("; the reward pays differently when audited: remove what reads the trace's calls, "
                                  "usage, timing, model, sampling or the call stack" if f.data.get("differs") else "")),
    "canaries": lambda f: ("make every reward pay for the task's content only, in every rollout: a content-free "
                           "reply served as the model's own in the rollouts stage must earn what it earns as a probe"
                           + ("; the reward pays differently when audited: remove what tells a rollout from a probe "
                              "(the trace's calls, usage, timing, model, sampling, the call stack, state kept "
                              "between calls)" if f.data.get("differs") else "")),
    "stored rewards": lambda f: ("make the reward a pure function of the reply and the task: the same reply on the "
                                 "same trace must earn what the rollout was paid"
                                 + (f" (task idx {f.data['tasks']})" if f.data.get("tasks") else "")),
    "plain channel": lambda f: ("enforce the rule the instructions state: a monitor (a rule, a model or a seat of "
                                "its own) reads every message, and one that gives the secret away, in digits or in "
                                "words, earns nothing for the seats that sent it; the decoded answer alone must not "
                                "pay" + (f" (the rule: {quoted(f.data['rule'], 100)})" if f.data.get("rule") else "")
                                + (f"; {f.data['example']}" if f.data.get("example") else "")),
    "load time": lambda f: ("make load() return within checks.max_load_seconds: build the dataset lazily or "
                            "from a file shipped with the candidate, never from the network"),
}
"""The fix for each check that can fail (gates/rules.py); `probe <name>` findings use DEFENCES."""


def offline_findings(entry: Entry, bands: Bands, rollout_ids: list[str]) -> Findings:
    gates = entry.gates or GateReport()
    target, strong = entry.stats.get("target"), entry.stats.get("strong")
    no_reference = reference_missing(entry.stats, entry.candidate, entry.offline, oracle_inferred(entry.gates))
    if no_reference is None and entry.verdict.reason.startswith("no reference policy"):  # stopped before rollouts
        no_reference = entry.verdict.reason.split(": no rollout was run")[0]
    hacks: list[Hack] = []
    rl: list[str] = []
    data: list[str] = []
    found = causes(gates, lambda f: CHECK_FIXES[f.name](f) if f.name in CHECK_FIXES else None)
    for cause in found:
        if cause.kind == "component":
            hacks.append(Hack(description=cause.issue, evidence=[f"probe {name}" for name in cause.probes]))
        elif cause.kind == "dataset":
            data.append(cause.issue)
        elif cause.issue.startswith("plain channel: "):
            hacks.append(Hack(description=cause.issue, evidence=["plain channel"]))
    priorities = [Priority(issue=c.issue, fix=c.fix) for c in found]
    explained = {c.component for c in found if c.kind == "component"}
    data += [f"{f.name}: {f.message}" for f in gates.findings if f.status == "warn" and f.name not in FOLDED_WARNINGS
             and not (f.name == "ceiling" and set(f.data.get("components") or {}) <= explained)]

    for role, s in (("target", target), ("strong", strong)):
        if s is not None and s.errors.env_error:
            rl.append(f"{s.errors.env_error} {role} rollouts ended in environment errors")
            priorities.insert(0, Priority(issue=f"{role} rollouts hit environment errors",
                                          fix="read the errored transcripts and fix the candidate's code"))
    if no_reference:
        rl.append(no_reference)
        priorities.insert(0, Priority(issue="the scripted models had nothing to play: " + no_reference,
                                      fix="add `def oracle(self, messages)` to the task class (program.md, "
                                          "\"The oracle hook\"), or evaluate on the real models"))
        target = strong = None  # their scores come from empty replies: advice on them would blame the rewards
    t_mean = target.mean if target else None
    s_mean = strong.mean if strong else None
    if s_mean is not None and s_mean < bands.strong_min:
        low = [r for r in rollout_ids if r.startswith("strong-")][:2]
        rl.append(f"strong model mean {s_mean:.3f} is below {bands.strong_min}: some tasks may be unsolvable "
                  f"or wrongly scored (see {', '.join(low) or 'the strong rollouts'})")
        priorities.append(Priority(issue="the strong model cannot solve the tasks reliably",
                                   fix="check the rewards against correct answers; "
                                       "make instructions and answer format unambiguous"))
    band = f"{bands.target_min}–{bands.target_max}"
    if t_mean is not None:
        if t_mean < bands.target_min:
            rl.append(f"target mean {t_mean:.3f} is below the band {band}: too hard to learn from")
            priorities.append(Priority(issue="the target model rarely succeeds",
                                       fix="add easier tasks or partial credit the spec allows"))
        elif t_mean > bands.target_max:
            rl.append(f"target mean {t_mean:.3f} is above the band {band}: too easy to learn from")
            priorities.append(Priority(issue="the target model already succeeds",
                                       fix="add harder tasks (more steps, larger numbers, distractors)"))
    share = target.disagree_share if target else None
    if share is not None and share < bands.learnable_min:
        rl.append(f"only {share:.0%} of tasks have rollouts that disagree: GRPO has little to learn from")
    by_level = target.by_difficulty if target else {}  # every level, easiest first (autoenv.evaluation.stats)
    if inverted_levels(by_level):
        rl.append("difficulty labels do not predict reward: " + ", ".join(
            f"{level} {g.mean:.2f} (n={g.n})" for level, g in by_level.items() if g.mean is not None))

    if not entry.stats:
        assessment = "not evaluated on models (the evaluation stopped before the rollouts)"
    elif entry.rl_readiness is not None and entry.rl_readiness.ready:
        assessment = "ready: target in its band with disagreeing rollouts, strong model above its floor"
    else:
        assessment = "not ready: " + ("; ".join(rl[:2]) if rl else "see the statistics")
    summary_bits = [assessment]
    if hacks:
        summary_bits.append(f"{len(hacks)} suspected reward hack(s) from the probes")
    return Findings(
        summary="Offline review from the numbers alone. " + "; ".join(summary_bits) + ".",
        spec_fidelity=SpecFidelity(
            score=None, gaps=["not assessed offline: spec fidelity needs a model judge reading the code"]),
        reward_faithfulness=RewardFaithfulness(suspected_hacks=hacks),
        rl_readiness=RlAssessment(assessment=assessment, concerns=rl),
        dataset_quality=DatasetQuality(assessment="issues found" if data else "no issue found by the checks",
                                       issues=data),
        priorities=priorities[:8],
    )


def inverted_levels(by_level: dict) -> bool:
    """Whether a harder difficulty level's mean reward beats an easier one's by over 0.1 and beyond noise (a
    one-sided 95% bound on the difference, from the rollout counts with the widest variance a reward in [0, 1]
    can have): a scripted target that ignores difficulty differs by chance alone, and is not claimed."""
    levels = [g for g in by_level.values() if g.mean is not None and g.n > 0]
    for easier, harder in zip(levels, levels[1:]):
        noise = 1.645 * math.sqrt(0.25 / easier.n + 0.25 / harder.n)
        if harder.mean - easier.mean > max(0.1, noise):
            return True
    return False
