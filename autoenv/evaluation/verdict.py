"""The verdict: against the last *kept* iteration of the same run, on distance to the wanted state.

The wanted state: target mean inside [target_min, target_max], strong mean at or above
strong_min. Its distance is how far the target mean sits outside the band plus how far
the strong mean sits below its floor (0 inside). A change is judged by the bootstrap
interval of the *difference* in distance (tasks resampled jointly, paired where the two
evaluations share tasks):

- baseline: the first evaluation of a run (for these models, in this mode): nothing to
  compare with, so it is kept as the reference the next evaluations are judged against,
  and the reason says where it stands against the wanted state;
- keep: the interval lies below zero (reliably closer), or both sit in the wanted state
  and the share of tasks whose rollouts disagree (GRPO's learning signal) reliably rose;
- discard: reliably farther (or reliably less learnable while in the wanted state), or a
  gate failed: checks or probes, or too many environment errors;
- inconclusive: the difference is inside the noise at this budget (the reason says how
  big a change the budget can resolve), too many provider errors, or the scripted
  reference could not play (offline, a candidate without an oracle hook), or the provider
  was unavailable (the smoke rollout failed at the provider after its retries: the reason
  starts with "provider unavailable", and the candidate is not blamed);
- crash: the evaluation failed because of the candidate;
- tampered: protected files differ from the run's base (autoenv.run.runbase): no model was
  called and the entry is never kept.

The baseline is looked up only within the run (`same_run`): several `autoenv/<tag>`
branches can share one clone and one ledger, and comparing one environment with
another's kept entry once called a first evaluation "inconclusive" against a stranger.

Noise-driven verdicts are what sent the seed's agent in circles: `bench/verdict.py`
measures this rule next to the seed's on simulated environments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoenv.core.config import Bands
from autoenv.core.formats import mean_ci
from autoenv.core.record import Entry, ModelStats, Readiness, Role, Verdict
from autoenv.core.resample import interval, joint_draws
from autoenv.evaluation.stats import sums
from autoenv.run.ledger import last_kept
from autoenv.run.runbase import same_run

Stats = Mapping[Role, ModelStats]


def band_distance(target_mean: Any, strong_mean: Any, bands: Bands) -> Any:
    """Distance to the wanted state; works on floats and on numpy arrays of replicates."""
    if target_mean is None or strong_mean is None:
        return None
    below = np.maximum(0.0, bands.target_min - np.asarray(target_mean, dtype=float))
    above = np.maximum(0.0, np.asarray(target_mean, dtype=float) - bands.target_max)
    short = np.maximum(0.0, bands.strong_min - np.asarray(strong_mean, dtype=float))
    total = below + above + short
    return round(float(total), 4) if np.ndim(total) == 0 else total


def rl_readiness(stats: Stats, bands: Bands) -> Readiness:
    target, strong = stats.get("target"), stats.get("strong")
    t_mean = target.mean if target else None
    s_mean = strong.mean if strong else None
    in_band = t_mean is not None and bands.target_min <= t_mean <= bands.target_max
    solvable = s_mean is not None and s_mean >= bands.strong_min
    learnable = target.disagree_share if target else None
    return Readiness(
        target_in_band=in_band,
        strong_above_floor=solvable,
        target_std=target.std if target else None,
        learnable_share=learnable,
        distance=band_distance(t_mean, s_mean, bands),
        ready=bool(in_band and solvable and (learnable or 0) >= bands.learnable_min),
    )


def error_rates(stats: ModelStats) -> dict[str, float]:
    return {kind: stats.error_rate(kind) for kind in ("provider_error", "timeout", "env_error")}




def baseline_of(entries: list[Entry], stats: Stats, *, branch: str | None, offline: bool,
                run_base: str | None = None) -> Entry | None:
    """The entry an evaluation is judged against: the newest kept entry of the same run,
    with the same models, in the same mode (offline or not)."""
    return last_kept(entries, lambda e: same_run(e, branch, run_base) and comparable(e, stats, offline))








@dataclass(frozen=True)
class TaskChange:
    """How an evaluation's tasks relate to the kept one's. Tasks are keyed by their content (the
    prompt), so a change to the dataset or its prompts leaves few or none shared: the two are
    then compared unpaired, each on its own tasks, and a keep or discard stays possible."""

    shared: int
    new: int
    """Tasks scored in this evaluation."""
    old: int
    """Tasks scored in the kept one."""
    kept: str

    @classmethod
    def between(cls, target: ModelStats, kept: Entry) -> TaskChange:
        new, old = set(target.per_task or {}), set(kept.stats["target"].per_task or {})
        return cls(shared=len(new & old), new=len(new), old=len(old), kept=kept.commit)

    def unpaired(self, min_tasks: int) -> bool:
        """Too few shared tasks for a paired comparison: each side is judged on its own tasks."""
        return self.shared < max(min_tasks, 2)

    def note(self) -> str:
        return (f"the tasks changed ({self.shared} of this evaluation's {self.new} shared with {self.kept[:8]}'s "
                f"{self.old}: a new dataset or new prompts), so the two are compared unpaired, each on its own tasks: "
                "this tells whether the new tasks put the models closer to the wanted state, not how the scores of "
                "the same tasks moved, and it resolves only bigger changes than a paired comparison")


def comparable(entry: Entry, stats: Stats, offline: bool) -> bool:
    """Only evaluations of the same models can be compared."""
    if entry.offline != bool(offline):
        return False
    for role in ("target", "strong"):
        old, new = entry.stats.get(role), stats.get(role)
        if old is None or old.per_task is None:  # entries from before per-task tables cannot be paired
            return False
        if old.model != (new.model if new else None):
            return False
    return True


def decide(
    stats: Stats,
    bands: Bands,
    kept: Entry | None,
    *,
    eval_success: bool = True,
    error: str | None = None,
    gates_failed: list[str] | None = None,
    no_reference: str | None = None,
    run: str | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    tampered: list[str] | None = None,
    provider_unavailable: bool = False,
    recover: str | None = None,
    min_tasks: int = 0,
    gates_untested: list[str] | None = None,
) -> Verdict:
    """The verdict for an evaluation with `stats` on branch `run`, against the `kept` entry of
    the same run (None: this is the run's first); `no_reference` says why the scripted
    models could not play (see `reference_missing`); `tampered` names protected files that
    differ from the run base."""
    if tampered:
        return Verdict(verdict="tampered", reason=(
            "protected files differ from the run base, so this commit is not judged by the run's rules and no "
            "model was called: " + "; ".join(tampered) + ". Revert them" + (f" ({recover})" if recover else "")
            + " and evaluate again (edit only candidate/); a deliberate change of rules is the person's: "
            "`autoenv rebase-rules -m 'why'`, a commit of its own"))
    if provider_unavailable:
        return Verdict(verdict="inconclusive", reason=error or "provider unavailable")
    if not eval_success:
        return Verdict(verdict="crash", reason=f"the evaluation failed: {error or 'see the report'}")
    if gates_failed:
        return Verdict(verdict="discard", reason="failed gates: " + "; ".join(gates_failed))
    for role in ("target", "strong"):
        s = stats.get(role)
        if s is None:
            continue
        env_rate = s.error_rate("env_error")
        if env_rate > bands.max_env_error_rate:
            return Verdict(verdict="discard", reason=(
                f"{env_rate:.0%} of {role} rollouts ended in environment errors "
                f"(allowed {bands.max_env_error_rate:.0%}): fix the candidate's errors first"))
        bad = s.error_rate("provider_error") + s.error_rate("timeout")
        if bad > bands.max_provider_error_rate:
            return Verdict(verdict="inconclusive", reason=(
                f"{bad:.0%} of {role} rollouts failed at the provider or timed out "
                f"(allowed {bands.max_provider_error_rate:.0%}): too few scored rollouts to judge"))
    if no_reference:
        return Verdict(verdict="inconclusive", reason=(
            f"{no_reference}: {'the scores say nothing about the environment' if stats else 'no rollout was run'}. "
            "Add `def oracle(self, messages)` "
            "to the task class (program.md, \"The oracle hook\") or evaluate on the real models"))
    t, s = stats.get("target"), stats.get("strong")
    if t is None or s is None or t.mean is None or s.mean is None:
        return Verdict(verdict="discard", reason="no scored rollouts for one of the models")
    untested = (f"; the gates are untested ({gates_untested[0][:300]}): this reference rests on no model-free "
                "evidence that the reward resists cheap tricks, and no later evaluation is kept while they stay "
                "untested") if gates_untested else ""
    if kept is None:
        return Verdict(verdict="baseline", reason=f"{_first_of(run, t, s)}. {standing(t, s, bands)}{untested}")
    changed = TaskChange.between(t, kept)
    if changed.unpaired(min_tasks) and changed.new < min_tasks:
        return Verdict(verdict="inconclusive", compared_to=kept.commit, reason=(
            f"too few tasks to compare: this evaluation scored {changed.new} task(s) and shares {changed.shared} with "
            f"{kept.commit[:8]}; a comparison needs at least {min_tasks} (stats.min_tasks). If the dataset offers "
            f"fewer distinct tasks than that, give it more. {standing(t, s, bands)}"))
    if changed.unpaired(min_tasks) and changed.old < min_tasks:
        return Verdict(verdict="baseline", compared_to=kept.commit, reason=(
            f"the kept {kept.commit[:8]} scored only {changed.old} task(s), too few to compare with "
            f"(stats.min_tasks = {min_tasks}), and shares {changed.shared} with this evaluation: this one, on "
            f"{changed.new} tasks, becomes the reference the run's next evaluations are compared with. "
            f"{standing(t, s, bands)}{untested}"))
    verdict = _compare(t, s, kept, bands, confidence, seed, changed if changed.unpaired(min_tasks) else None)
    if verdict.verdict == "keep" and gates_untested:  # model-free evidence the gates do not have
        verdict = Verdict(verdict="inconclusive", reason=(
            f"{verdict.reason}; but not kept: the gates are untested ({gates_untested[0][:300]}), so nothing shows "
            "the gain is not a harvested reward"))
    return verdict.model_copy(update={"compared_to": kept.commit})


def _first_of(run: str | None, t: ModelStats, s: ModelStats) -> str:
    models = f"target {t.model} and strong {s.model}"
    if run is None:
        return (f"first evaluation with {models} on a detached HEAD, which belongs to no run: nothing is compared "
                "with it (check out the run's branch autoenv/<tag> to have evaluations compared)")
    return (f"first evaluation of the run {run} with {models}: kept as the reference its next evaluations "
            "are compared with")


def standing(t: ModelStats, s: ModelStats, bands: Bands) -> str:
    """Where an evaluation stands against the wanted state, in words."""
    assert t.mean is not None and s.mean is not None
    band = f"{bands.target_min}–{bands.target_max}"
    t_low, t_high = t.ci or (t.mean, t.mean)
    s_low, _ = s.ci or (s.mean, s.mean)
    if t_high < bands.target_min:
        target = f"{bands.target_min - t.mean:.3f} below its band {band} (too hard to learn from)"
    elif t_low > bands.target_max:
        target = f"{t.mean - bands.target_max:.3f} above its band {band} (too easy to learn from)"
    elif t_low >= bands.target_min and t_high <= bands.target_max:
        target = f"inside its band {band}"
    else:  # the interval crosses an edge: the mean's side of it is not established
        side = "mean inside" if bands.target_min <= t.mean <= bands.target_max else \
            f"mean {'below' if t.mean < bands.target_min else 'above'}"
        target = f"overlapping its band {band} ({side}, its interval crosses the edge)"
    if s_low >= bands.strong_min:
        strong = f"at or above its floor {bands.strong_min}"
    elif s.mean >= bands.strong_min:
        strong = f"overlapping its floor {bands.strong_min} (mean above, its interval reaches below)"
    else:
        strong = f"{bands.strong_min - s.mean:.3f} below its floor {bands.strong_min} (tasks unsolvable or misscored)"
    distance = band_distance(t.mean, s.mean, bands)
    where = "in the wanted state" if distance == 0 else f"distance to the wanted state {distance:.3f}"
    if distance == 0 and "overlapping" in target + strong:
        where = "in the wanted state by the means, not yet by their intervals"
    return f"Target {mean_ci(t)} is {target}; strong {mean_ci(s)} is {strong}: {where}"


def _compare(t: ModelStats, s: ModelStats, kept: Entry, bands: Bands, confidence: float, seed: int,
             changed: TaskChange | None = None) -> Verdict:
    """Keep, discard or inconclusive on the interval of the change in distance: paired over shared tasks,
    or unpaired (`changed`: too few tasks shared) with each evaluation resampled over its own tasks."""
    old_t, old_s = kept.stats["target"], kept.stats["strong"]
    tables = [sums(m.per_task or {}) for m in (t, s, old_t, old_s)]
    if changed is None:
        new_tr, new_sr, old_tr, old_sr = joint_draws(*tables, seed=seed)
        clusters = len(set().union(*tables))
    else:  # independent resamples; the smaller side sets the small-sample widening
        new_tr, new_sr = joint_draws(tables[0], tables[1], seed=seed)
        old_tr, old_sr = joint_draws(tables[2], tables[3], seed=seed + UNPAIRED_SEED)
        clusters = min(changed.new, changed.old)
    delta = band_distance(new_tr, new_sr, bands) - band_distance(old_tr, old_sr, bands)
    low, high = interval(delta, confidence, clusters)
    d_new = band_distance(t.mean, s.mean, bands)
    d_old = band_distance(old_t.mean, old_s.mean, bands)
    label = "the run's baseline" if kept.verdict.verdict == "baseline" else "last kept"
    where = f"{label} {kept.commit[:8]} on {kept.branch or 'a detached HEAD'}"
    summary = (f"distance to the wanted state {d_new:.3f} vs {d_old:.3f} at {where} "
               f"(difference {d_new - d_old:+.3f}, {confidence:.0%} interval [{low:+.3f}, {high:+.3f}]); "
               f"target {mean_ci(t)} vs {mean_ci(old_t)}")
    if changed is not None:
        summary = f"{summary}; {changed.note()}"
    if high < 0:
        return Verdict(verdict="keep", reason="closer to the wanted state: " + summary)
    if low > 0:
        return Verdict(verdict="discard", reason="farther from the wanted state: " + summary)
    if d_new == 0 and d_old == 0:
        learn = _learnable_comparison(t, old_t, confidence, seed, unpaired=changed is not None)
        if learn is not None:
            return learn.model_copy(update={"reason": f"{learn.reason}; {changed.note()}"}) if changed else learn
    return Verdict(verdict="inconclusive", reason=(
        f"the difference is inside the noise: {summary}. At this budget only changes in the target "
        f"mean beyond about {resolvable(t, old_t):.2f} can be told apart: a smaller effect needs a bigger "
        "evaluation budget, which is the person's to set"))


UNPAIRED_SEED = 7919
"""Offsets the kept side's resampling seed in an unpaired comparison, so the two sides' draws are independent."""


def resolvable(new: ModelStats, old: ModelStats) -> float:
    """The smallest change in the target mean this budget can tell apart: the two means'
    interval half-widths combined (a paired difference can look sharper than that when
    the two runs happen to agree task by task, which says nothing about the budget)."""
    halves = [(m.ci[1] - m.ci[0]) / 2 for m in (new, old) if m.ci]
    return float(np.sqrt(sum(h * h for h in halves))) if halves else float("nan")


def _learnable_comparison(new: ModelStats, old: ModelStats, confidence: float, seed: int,
                          unpaired: bool = False) -> Verdict | None:
    """Both in the wanted state: did the share of tasks with disagreeing rollouts change?"""
    def flags(model: ModelStats) -> dict[str, tuple[float, float]]:
        # a table of (disagree, 1) per task with >= 2 scored rollouts: its "mean" is the share
        return {k: (float(row.disagree), 1.0) for k, row in (model.per_task or {}).items() if row.n >= 2}

    new_f, old_f = flags(new), flags(old)
    if not new_f or not old_f:
        return None
    if unpaired:
        (new_r,), (old_r,) = joint_draws(new_f, seed=seed + 1), joint_draws(old_f, seed=seed + 1 + UNPAIRED_SEED)
        clusters = min(len(new_f), len(old_f))
    else:
        new_r, old_r = joint_draws(new_f, old_f, seed=seed + 1)
        clusters = len(set(new_f) | set(old_f))
    low, high = interval(new_r - old_r, confidence, clusters)
    detail = (f"both in the wanted state; learnable share {new.disagree_share} vs "
              f"{old.disagree_share} ({confidence:.0%} interval of the difference "
              f"[{low:+.3f}, {high:+.3f}])")
    if low > 0:
        return Verdict(verdict="keep", reason="more tasks with a learning signal: " + detail)
    if high < 0:
        return Verdict(verdict="discard", reason="fewer tasks with a learning signal: " + detail)
    return None
