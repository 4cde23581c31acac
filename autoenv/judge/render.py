"""The judge's section of the feedback file, in markdown."""

from __future__ import annotations

from autoenv.core.record import JudgeResult


def render(result: JudgeResult) -> str:
    """The judge's section; never raises (a judge must not cost the evaluation its feedback)."""
    try:
        return _render(result)
    except Exception as e:
        return f"## Judge\n\nits findings could not be rendered ({type(e).__name__}: {e})"


def _render(result: JudgeResult) -> str:
    f = result.findings
    shown_model = result.model and result.backend != "offline"
    head = f"## Judge ({result.backend}" + (f", {result.model}" if shown_model else "") + ")"
    lines = [head, ""]
    if not result.ok:
        lines += [f"**The {result.backend} judge failed: {result.error}. Below is the offline review instead.**", ""]
    lines += [f.summary, ""]
    if f.priorities:
        lines += ["### Fix first", ""] + [f"{i}. {p.issue} — {p.fix}" for i, p in enumerate(f.priorities, 1)] + [""]
    hacks = f.reward_faithfulness.suspected_hacks
    lines += ["### Reward faithfulness", ""] + ([f"- {h.description} (evidence: {', '.join(h.evidence) or '–'})"
                                                 for h in hacks] or ["- no suspected hack"]) + [""]
    spec = f.spec_fidelity
    lines += [f"### Spec fidelity: {f'{spec.score}/10' if spec.score is not None else 'not scored'}", ""]
    lines += [f"- {g}" for g in spec.gaps] + [""]
    rl = f.rl_readiness
    lines += ["### RL readiness", "", rl.assessment] + [f"- {c}" for c in rl.concerns] + [""]
    data = f.dataset_quality
    lines += ["### Dataset quality", "", data.assessment] + [f"- {i}" for i in data.issues]
    if result.cost_usd is not None or result.turns is not None:
        lines += ["", f"_judge: {result.turns} turns, {result.input_tokens} in / {result.output_tokens} out tokens, "
                      f"${result.cost_usd or 0:.4f}, {result.seconds} s_"]
    return "\n".join(lines)
