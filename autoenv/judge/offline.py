"""The offline judge: what a careful reader would flag from the numbers alone.

Deterministic, free and always available: it is the judge of `--offline` runs, the
fallback whenever a model judge fails, and the floor the model judges build on. It
reads the entry (statistics, readiness, gates) and the sampled rollout ids.
"""

from __future__ import annotations

from autoenv.config import Bands, Judge
from autoenv.judge.base import JudgeCall
from autoenv.record import (DatasetQuality, Entry, Findings, GateReport, Hack, JudgeResult, Priority,
                            RewardFaithfulness, RlAssessment, SpecFidelity)
from autoenv.verdict import reference_missing

DATASET_GATES = ("exact duplicates", "near duplicates", "dataset size", "answer balance", "task keys")
BLOCKING_GATES = ("oracle", "reward errors", "modules", "deterministic", "pyproject", "readme")


def available(cfg: Judge) -> bool:
    return True


def judge(call: JudgeCall) -> JudgeResult:
    return JudgeResult(backend="offline", findings=offline_findings(call.entry, call.bands, call.rollout_ids))


def offline_findings(entry: Entry, bands: Bands, rollout_ids: list[str]) -> Findings:
    gates = entry.gates or GateReport()
    target, strong = entry.stats.get("target"), entry.stats.get("strong")
    no_reference = reference_missing(entry.stats, entry.candidate, entry.offline)
    hacks: list[Hack] = []
    rl: list[str] = []
    data: list[str] = []
    priorities: list[Priority] = []

    for name, probe in gates.probes.items():
        failed = any(f.startswith(f"probe {name}:") for f in gates.failed)
        if failed and name != "oracle":
            hacks.append(Hack(description=f"the {name} probe ({probe.description}) earned mean "
                                          f"{probe.mean}; harvested {probe.harvested}",
                              evidence=[f"probe {name}, task idx {b.idx}" for b in probe.best[:2]]))
            priorities.append(Priority(issue=f"reward can be harvested by the {name} probe",
                                       fix="make the reward depend on the task's content, not on its form or length"))
    for item in gates.failed:
        if item.startswith(DATASET_GATES):
            data.append(item)
            priorities.append(Priority(issue=item.split(":")[0],
                                       fix="generate more distinct tasks (vary content, not wording)"))
        elif item.startswith(BLOCKING_GATES):
            priorities.insert(0, Priority(issue=item, fix="fix this before anything else: the gate failed"))
    data += [f"{f.name}: {f.message}" for f in gates.findings if f.status == "warn"]

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
    by_level = target.by_difficulty if target else {}
    order = [level for level in ("easy", "medium", "hard") if level in by_level]
    means = [by_level[level].mean for level in order]
    if len(means) >= 2 and any(a is not None and b is not None and b > a + 0.1 for a, b in zip(means, means[1:])):
        rl.append("difficulty labels do not predict reward: " + ", ".join(f"{l} {m}" for l, m in zip(order, means)))

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
