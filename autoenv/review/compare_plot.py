"""The PNG of `autoenv compare`: per-difficulty means side by side, and the per-task means.

Left: the mean reward of A and B over all shared tasks and per difficulty, each with its
own 95% interval, and above each pair the paired difference B - A with its interval
(green or red when the interval excludes zero). Right: how the per-task mean rewards are
distributed on each side, which shows whether a change moved every task a little or
some tasks a lot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autoenv.core.resample import mean_interval
from autoenv.review import figures
from autoenv.review.compare import TOO_FEW, Comparison, Difference, Side

A_COLOUR, B_COLOUR = "#8c8c8c", figures.TARGET


def plot_comparison(comparison: Comparison, out: Path) -> Path:
    with figures.drawing(560) as figure:
        grid = figure.add_gridspec(1, 2, width_ratios=[1.35, 1], wspace=0.2, left=0.07, right=0.98, top=0.74,
                                   bottom=0.14)
        _groups(figure.add_subplot(grid[0]), comparison)
        _distribution(figure.add_subplot(grid[1]), comparison)
        overall = comparison.overall
        title = f"{comparison.a.label}  →  {comparison.b.label}"
        figure.suptitle(title, x=0.07, ha="left", fontsize=13, fontweight="bold")
        if overall is not None:
            figure.text(0.07, 0.895, f"mean reward {overall.a:.3f} → {overall.b:.3f}, difference {_delta(overall)} "
                        f"({comparison.confidence:.0%} paired bootstrap over {overall.tasks} shared tasks)",
                        ha="left", fontsize=10.5, color="#333333")
        figure.legend(handles=[figures.patch(color=A_COLOUR, label="A: " + comparison.a.label),
                               figures.patch(color=B_COLOUR, label="B: " + comparison.b.label)],
                      loc="upper left", bbox_to_anchor=(0.065, 0.875), ncol=2, frameon=False)
        return figures.save(figure, out)


def _delta(d: Difference) -> str:
    return f"{d.delta:+.3f} ({TOO_FEW})" if d.too_few else f"{d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"


def _side_interval(side: Side, keys: list[str]) -> tuple[float, float] | None:
    return mean_interval({k: (side.tasks[k].sum, side.tasks[k].n) for k in keys})


def _groups(ax, c: Comparison) -> None:
    shared = sorted(set(c.a.tasks) & set(c.b.tasks))
    groups = ([("all tasks", shared, c.overall)] if c.overall else []) + [
        (d.name, [k for k in shared if (c.a.tasks[k].difficulty or c.b.tasks[k].difficulty) == d.name], d)
        for d in c.by_difficulty]
    xs = np.arange(len(groups))
    width = 0.38
    for offset, side, colour, pick in ((-width / 2, c.a, A_COLOUR, lambda d: d.a), (width / 2, c.b, B_COLOUR, lambda d: d.b)):
        means = np.array([pick(d) for _, _, d in groups])
        bounds = [_side_interval(side, keys) or (m, m) for (_, keys, _), m in zip(groups, means)]
        yerr = [[max(0.0, m - lo) for m, (lo, _) in zip(means, bounds)], [max(0.0, hi - m) for m, (_, hi) in zip(means, bounds)]]
        ax.bar(xs + offset, means, width=width, color=colour, yerr=yerr, capsize=4, error_kw={"elinewidth": 1.1})
    top = max([1.0] + [d.b for _, _, d in groups] + [d.a for _, _, d in groups])
    for x, (_, _, d) in zip(xs, groups):
        colour = {1: "#2ca02c", -1: "#d62728"}.get(d.direction, "#555555")
        ax.text(x, top * 1.04, f"Δ {d.delta:+.3f}\n" + ("too few tasks" if d.too_few else f"[{d.low:+.2f}, {d.high:+.2f}]"),
                ha="center", va="bottom",
                fontsize=9, color=colour, linespacing=1.1)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{name}\n({d.tasks} task{'s' * (d.tasks != 1)})" for name, _, d in groups])
    ax.set_ylim(0, top * 1.25)
    ax.set_yticks([t / 5 * top for t in range(6)])
    ax.set_ylabel("mean reward (95% CI)")
    ax.set_title("by difficulty", loc="left")
    ax.grid(axis="y", alpha=0.3)


def _distribution(ax, c: Comparison) -> None:
    a = np.array([t.a for t in c.tasks])
    b = np.array([t.b for t in c.tasks])
    values = sorted({round(float(v), 3) for v in np.concatenate([a, b])})
    if len(values) <= 12:  # few rollouts per task: means take few values, one pair of bars each
        gap = min([y - x for x, y in zip(values, values[1:])] + [0.25])
        centres = np.array(values)
        counts_a = np.array([np.sum(np.isclose(a, v, atol=5e-4)) for v in values])
        counts_b = np.array([np.sum(np.isclose(b, v, atol=5e-4)) for v in values])
        width = gap * 0.38
        ax.set_xticks(values)
        ax.set_xticklabels([f"{v:g}" for v in values])
    else:
        top = max(1.0, float(np.max(np.concatenate([a, b]))))
        edges = np.linspace(0, top, 11)
        counts_a, _ = np.histogram(a, bins=edges)
        counts_b, _ = np.histogram(b, bins=edges)
        centres = (edges[:-1] + edges[1:]) / 2
        width = (edges[1] - edges[0]) * 0.42
        ax.set_xticks(edges[::2])
    ax.bar(centres - width / 2, counts_a, width=width, color=A_COLOUR)
    ax.bar(centres + width / 2, counts_b, width=width, color=B_COLOUR)
    figures.integer_ticks(ax.yaxis)
    ax.set_xlabel("per-task mean reward")
    ax.set_ylabel("tasks")
    ax.set_title(f"per-task means over {len(c.tasks)} shared tasks\n"
                 f"{len(c.gained)} newly solved in B, {len(c.lost)} solved in A only", loc="left")
    ax.grid(axis="y", alpha=0.3)
