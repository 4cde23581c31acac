"""The offline judge: what a careful reader would flag from the numbers alone.

Deterministic, free and always available: it is the judge of `--offline` runs, the
fallback whenever a model judge fails, and the floor the model judges build on. It
reads the entry (statistics, readiness, gates) and the sampled rollout ids.
"""

from __future__ import annotations


def offline_findings(entry: dict, bands, rollout_ids: list[str]) -> dict:
    stats = entry.get("stats") or {}
    gates = entry.get("gates") or {}
    target, strong = stats.get("target") or {}, stats.get("strong") or {}
    hacks, rl, data, priorities = [], [], [], []

    for name, probe in (gates.get("probes") or {}).items():
        failed = any(f.startswith(f"probe {name}:") for f in gates.get("failed", []))
        if failed and name != "oracle":
            best = probe.get("best") or [{}]
            hacks.append({"description": f"the {name} probe ({probe.get('description')}) earned mean "
                                         f"{probe.get('mean')}; harvested {probe.get('harvested')}",
                          "evidence": [f"probe {name}, task idx {b.get('idx')}" for b in best[:2] if b]})
            priorities.append({"issue": f"reward can be harvested by the {name} probe",
                               "fix": "make the reward depend on the task's content, not on its form or length"})
    for item in gates.get("failed", []):
        if item.startswith(("exact duplicates", "near duplicates", "dataset size", "answer balance", "task keys")):
            data.append(item)
            priorities.append({"issue": item.split(":")[0], "fix": "generate more distinct tasks (vary content, not wording)"})
        elif item.startswith(("oracle", "reward errors", "modules", "deterministic", "pyproject", "readme")):
            priorities.insert(0, {"issue": item, "fix": "fix this before anything else: the gate failed"})
    for f in gates.get("findings", []):
        if f.get("status") == "warn":
            data.append(f"{f['name']}: {f['message']}")

    t_mean, s_mean = target.get("mean"), strong.get("mean")
    for role, s in (("target", target), ("strong", strong)):
        errors = s.get("errors") or {}
        if errors.get("env_error"):
            rl.append(f"{errors['env_error']} {role} rollouts ended in environment errors")
            priorities.insert(0, {"issue": f"{role} rollouts hit environment errors",
                                  "fix": "read the errored transcripts and fix the candidate's code"})
    if s_mean is not None and s_mean < bands.strong_min:
        low = [r for r in rollout_ids if r.startswith("strong-")][:2]
        rl.append(f"strong model mean {s_mean:.3f} is below {bands.strong_min}: some tasks may be unsolvable "
                  f"or wrongly scored (see {', '.join(low) or 'the strong rollouts'})")
        priorities.append({"issue": "the strong model cannot solve the tasks reliably",
                           "fix": "check the rewards against correct answers; make instructions and answer format unambiguous"})
    if t_mean is not None:
        if t_mean < bands.target_min:
            rl.append(f"target mean {t_mean:.3f} is below the band {bands.target_min}–{bands.target_max}: too hard to learn from")
            priorities.append({"issue": "the target model rarely succeeds", "fix": "add easier tasks or partial credit the spec allows"})
        elif t_mean > bands.target_max:
            rl.append(f"target mean {t_mean:.3f} is above the band {bands.target_min}–{bands.target_max}: too easy to learn from")
            priorities.append({"issue": "the target model already succeeds", "fix": "add harder tasks (more steps, larger numbers, distractors)"})
    share = target.get("disagree_share")
    if share is not None and share < bands.learnable_min:
        rl.append(f"only {share:.0%} of tasks have rollouts that disagree: GRPO has little to learn from")
    by_level = target.get("by_difficulty") or {}
    order = [level for level in ("easy", "medium", "hard") if level in by_level]
    means = [by_level[level]["mean"] for level in order]
    if len(means) >= 2 and any(a is not None and b is not None and b > a + 0.1 for a, b in zip(means, means[1:])):
        rl.append("difficulty labels do not predict reward: " + ", ".join(f"{l} {m}" for l, m in zip(order, means)))

    readiness = entry.get("rl_readiness") or {}
    if not stats:
        assessment = "not evaluated on models (the evaluation stopped before the rollouts)"
    elif readiness.get("ready"):
        assessment = "ready: target in its band with disagreeing rollouts, strong model above its floor"
    else:
        assessment = "not ready: " + ("; ".join(rl[:2]) if rl else "see the statistics")
    summary_bits = [assessment]
    if hacks:
        summary_bits.append(f"{len(hacks)} suspected reward hack(s) from the probes")
    return {
        "summary": "Offline review from the numbers alone. " + "; ".join(summary_bits) + ".",
        "spec_fidelity": {"score": None, "gaps": ["not assessed offline: spec fidelity needs a model judge reading the code"]},
        "reward_faithfulness": {"suspected_hacks": hacks},
        "rl_readiness": {"assessment": assessment, "concerns": rl},
        "dataset_quality": {"assessment": "issues found" if data else "no issue found by the checks", "issues": data},
        "priorities": priorities[:8],
    }
