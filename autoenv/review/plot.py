"""`autoenv plot`: the run's course in one PNG, also written after every evaluation.

Top panel: the target and strong means with their 95% intervals per iteration, the
target band shaded and the strong floor dashed, each target point marked by its verdict,
and the running best (the last kept target mean, which every verdict compares against)
as a step line. Iterations without scores (crashes, failed gates) sit on a strip below
zero so they are seen, not dropped. Bottom panel: the learnable share (tasks whose
rollouts disagree) against the RL-ready floor.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from autoenv.core.config import Bands
from autoenv.review import figures
from autoenv.review.rows import Point, Row
from autoenv.review.run import Run

NO_SCORES = -0.1


def plot_run(run: Run, bands: Bands, out: Path) -> Path:
    """Draw `run` against `bands` into the PNG `out`; returns `out`."""
    run.require_rows("plot")
    if any(r.environment is None for r in run.rows):  # `--env` evaluations are another environment's
        run = dataclasses.replace(run, rows=[r for r in run.rows if r.environment is None])
    with figures.drawing(760) as figure:
        grid = figure.add_gridspec(2, 1, height_ratios=[3, 1.25], hspace=0.08, left=0.07, right=0.79,
                                   top=0.9, bottom=0.13 if len(run.rows) > 12 else 0.1)
        means = figure.add_subplot(grid[0])
        share = figure.add_subplot(grid[1], sharex=means)
        _means_panel(means, run.rows, bands)
        _share_panel(share, run.rows, bands)
        _ticks(share, run.rows)
        means.tick_params(labelbottom=False)
        figure.suptitle(_title(run), x=0.07, ha="left", fontsize=14, fontweight="bold")
        figure.text(0.07, 0.925, _subtitle(run, bands), ha="left", va="bottom", fontsize=10, color="#444444")
        legend = means.legend(handles=_legend(run.rows, bands), loc="upper left", bbox_to_anchor=(1.01, 1.0),
                              frameon=False, borderaxespad=0)
        figures.fit_right(figure, legend, grid)  # the legend's labels as drawn decide where the axes end
        return figures.save(figure, out)


def _values(points: list[Point | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = np.array([p.mean if p and p.mean is not None else np.nan for p in points], dtype=float)
    low = np.array([p.ci[0] if p and p.mean is not None and p.ci else np.nan for p in points], dtype=float)
    high = np.array([p.ci[1] if p and p.mean is not None and p.ci else np.nan for p in points], dtype=float)
    return mean, np.nan_to_num(mean - low), np.nan_to_num(high - mean)


def _means_panel(ax, rows: list[Row], bands: Bands) -> None:
    xs = np.array([r.number for r in rows])
    ax.axhspan(bands.target_min, bands.target_max, color=figures.BAND, alpha=0.12, lw=0)
    ax.axhline(bands.strong_min, color=figures.STRONG, ls="--", lw=1.2, alpha=0.8)
    ax.axhspan(NO_SCORES - 0.06, NO_SCORES + 0.06, color="#dddddd", alpha=0.6, lw=0)
    ax.text(0.005, NO_SCORES, " no scores", transform=ax.get_yaxis_transform(), va="center", fontsize=9,
            color="#555555")
    strong, s_low, s_high = _values([r.strong for r in rows])
    ax.errorbar(xs + 0.08, strong, yerr=[s_low, s_high], color=figures.STRONG, marker="s", ms=5, lw=1.3,
                capsize=3, elinewidth=1, alpha=0.9, zorder=3)
    target, t_low, t_high = _values([r.target for r in rows])
    ax.errorbar(xs, target, yerr=[t_low, t_high], color=figures.TARGET, lw=1.6, capsize=3, elinewidth=1.2,
                zorder=4)
    best = running_best(rows)  # held to the right edge: it is the baseline of the next evaluation
    ax.step(np.append(xs, xs[-1] + 0.5), np.append(best, best[-1]), where="post", color=figures.BAND, ls=":",
            lw=2.2, zorder=2)
    for row, y in zip(rows, target):
        marker, colour = figures.VERDICTS.get(row.verdict, ("o", figures.OTHER))
        if math.isnan(y):
            y = NO_SCORES
            ax.text(row.number, NO_SCORES + 0.035, "gates" if row.gates == "fail" else row.verdict, ha="center",
                    va="bottom", fontsize=8, color=colour)
        size = 220 if marker == "*" else 90 if row.kept else 70  # a star reads small
        ax.scatter([row.number], [y], marker=marker, s=size, color=colour, edgecolor="white",
                   linewidth=0.8, zorder=6)
        if row.tampered:
            ax.scatter([row.number], [y], marker="o", s=300, facecolor="none", edgecolor=figures.TAMPERED,
                       linewidth=2, zorder=7)
    top = np.nanmax(np.concatenate([target + t_high, strong + s_high, [1.0]]))
    ax.set_ylim(NO_SCORES - 0.08, max(1.05, float(top) + 0.05))
    ax.set_yticks([t / 10 for t in range(0, int(max(1.0, float(top)) * 10) + 1, 2)])
    ax.set_ylabel("mean reward (95% CI)")
    ax.grid(axis="y", alpha=0.3)


def running_best(rows: list[Row]) -> np.ndarray:
    """The target mean of the last kept evaluation at each iteration (NaN before the first)."""
    best, out = np.nan, []
    for row in rows:
        if row.kept and row.target and row.target.mean is not None:
            best = row.target.mean
        out.append(best)
    return np.array(out, dtype=float)


def _share_panel(ax, rows: list[Row], bands: Bands) -> None:
    xs = [r.number for r in rows]
    shares = [r.learnable if r.learnable is not None else 0.0 for r in rows]
    colours = [figures.VERDICTS.get(r.verdict, ("o", figures.OTHER))[1] for r in rows]
    ax.bar(xs, shares, width=0.6, color=colours, alpha=0.75)
    for row in rows:
        if row.learnable is None:  # no data, which a zero-height bar would pass off as a share of 0
            ax.text(row.number, 0.04, "no\ndata", ha="center", va="bottom", fontsize=7, color="#777777",
                    linespacing=0.9)
    ax.axhline(bands.learnable_min, color="#444444", ls="--", lw=1)
    ax.set_ylim(0, 1.0)
    ax.set_yticks([0, 0.5, 1.0])
    ax.set_ylabel("learnable share")
    ax.grid(axis="y", alpha=0.3)


def _ticks(ax, rows: list[Row]) -> None:
    step = max(1, math.ceil(len(rows) / 40))
    shown = rows[::step]
    ax.set_xticks([r.number for r in shown])
    if len(rows) <= 12:
        ax.set_xticklabels([f"{r.number}\n{r.commit[:7]}" for r in shown])
    else:
        ax.set_xticklabels([f"{r.number} {r.commit[:7]}" for r in shown], rotation=55, ha="right",
                           rotation_mode="anchor", fontsize=8)
    # a short run keeps the width of six iterations, so its first points are not stretched across the page
    ax.set_xlim(rows[0].number - 0.6, max(rows[-1].number, rows[0].number + 5) + 0.6)
    ax.set_xlabel("iteration and commit")


def _title(run: Run) -> str:
    kept = sum(r.kept for r in run.rows)
    return f"Run {run.label}: {len(run.rows)} evaluation{'s' * (len(run.rows) != 1)}, {kept} kept"


def _subtitle(run: Run, bands: Bands) -> str:
    parts = []
    last = run.last_kept
    if last and last.target and last.target.mean is not None:
        parts.append(f"last kept: #{last.number} {last.commit[:7]}, target mean {last.target.mean:.3f}")
    models = [f"{role} {p.model}" for role, p in (("target", _last(run.rows, "target")),
                                                     ("strong", _last(run.rows, "strong"))) if p and p.model]
    if models:
        parts.append(" vs ".join(models))
    if run.rows and all(r.offline for r in run.rows):
        parts.append("offline (scripted policies)")
    parts.append(f"wanted: target {bands.target_min:g}–{bands.target_max:g}, strong ≥ {bands.strong_min:g}")
    return " · ".join(parts)


def _last(rows: list[Row], role: str) -> Point | None:
    return next((getattr(r, role) for r in reversed(rows) if getattr(r, role)), None)


def _legend(rows: list[Row], bands: Bands) -> list:
    def mark(marker: str, colour: str, label: str, **kw):
        return figures.line(ls="none", marker=marker, color=colour, label=label, **{"markersize": 8, **kw})

    handles = [
        figures.line(color=figures.TARGET, lw=1.6, label="target mean (95% CI)"),
        figures.line(color=figures.STRONG, marker="s", lw=1.3, label="strong mean (95% CI)"),
        figures.line(color=figures.BAND, ls=":", lw=2.2, label="running best\n(last kept target mean)"),
        figures.patch(color=figures.BAND, alpha=0.25, label=f"target band {bands.target_min:g}–{bands.target_max:g}"),
        figures.line(color=figures.STRONG, ls="--", lw=1.2, label=f"strong floor {bands.strong_min:g}"),
        figures.line(color="#444444", ls="--", lw=1, label=f"RL-ready share {bands.learnable_min:g}"),
    ]
    handles += [mark(m, c, v) for v, (m, c) in figures.VERDICTS.items()]
    handles.append(figures.patch(color="#999999", alpha=0.75, label="learnable share bars:\ncoloured by verdict "
                                 "as above;\n\"no data\": not measured"))
    if any(r.tampered for r in rows):
        handles.append(mark("o", figures.TAMPERED, "tampered (ledger\nchain broken here)", markerfacecolor="none",
                            markeredgewidth=2, markersize=12))
    return handles
