"""The paired comparison of a rescored evaluation: each task's mean reward before and after the reward edit.

The same stored replies, scored by the source evaluation's rewards and by this commit's
(autoenv.evaluation.rescore): the entry keeps every task's pair, the feedback shows the tasks whose
score changed, largest change first, which is what the agent needs after a reward edit.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from autoenv.core.record import ROLES, Entry, RescoredTask
from autoenv.core.traces import read_rollouts

TABLE_ROWS = 20


def paired(source: Path, out: Path) -> list[RescoredTask]:
    """Per role and task, the mean reward of the source's rollouts and of the same rollouts rescored."""
    rows = []
    for role in ROLES:
        old, new = _means(source / role), _means(out / role)
        for key in old.keys() | new.keys():
            idx, before = old.get(key, (None, None))
            idx2, after = new.get(key, (None, None))
            rows.append(RescoredTask(role=role, key=key, idx=idx if idx is not None else idx2, old=before, new=after))
    return sorted(rows, key=lambda r: (r.role, r.idx if r.idx is not None else -1, r.key))


def _means(directory: Path) -> dict[str, tuple[int | None, float | None]]:
    rewards: dict[str, list[float]] = defaultdict(list)
    idx: dict[str, int | None] = {}
    for rollout in read_rollouts(directory):
        idx[rollout.task_key] = rollout.idx
        if rollout.outcome == "ok" and rollout.reward is not None:
            rewards[rollout.task_key].append(rollout.reward)
    return {key: (idx[key], sum(rewards[key]) / len(rewards[key]) if rewards[key] else None) for key in idx}


def paired_markdown(entry: Entry) -> list[str]:
    """The feedback's section: which tasks' scores the reward edit changed, and by how much."""
    if not entry.rescored_from:
        return []
    rows = entry.rescored
    changed = [r for r in rows if r.old != r.new]
    lines = [f"## Rescored from {entry.rescored_from[:12]} (same replies, old vs new reward; no model called)", "",
             (f"Only rewards, metrics or docs changed since `{entry.rescored_from[:12]}`, and the sampled tasks are "
              "identical, so its stored rollouts were scored again by this commit's rewards. "
              f"{len(changed)} of {len(rows)} task scores changed (mean over each task's rollouts)."), ""]
    for role in ROLES:
        mine = [r for r in rows if r.role == role]
        olds, news = [r.old for r in mine if r.old is not None], [r.new for r in mine if r.new is not None]
        if mine:
            lines.append(f"- {role}: mean {_num(sum(olds) / len(olds) if olds else None)} -> "
                         f"{_num(sum(news) / len(news) if news else None)} over {len(mine)} tasks, "
                         f"{sum(1 for r in mine if r.old != r.new)} changed")
    if changed:
        shown = sorted(changed, key=lambda r: -abs((r.new or 0.0) - (r.old or 0.0)))[:TABLE_ROWS]
        lines += ["", "| role | task idx | task key | old reward | new reward | change |", "|---|---|---|---|---|---|"]
        for r in shown:
            delta = None if r.old is None or r.new is None else r.new - r.old
            key = r.key[:60].replace("|", "/")
            lines.append(f"| {r.role} | {r.idx if r.idx is not None else '–'} | `{key}` | {_num(r.old)} | "
                         f"{_num(r.new)} | {'–' if delta is None else f'{delta:+.3f}'} |")
        if len(changed) > TABLE_ROWS:
            lines.append(f"\n({len(changed) - TABLE_ROWS} more changed tasks: outputs/<commit>/<role>/traces.jsonl)")
    return lines


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
