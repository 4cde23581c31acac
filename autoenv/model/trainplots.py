"""The training figures: the reward curve (per component, untrained baseline, hack fraction) and the before/after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoenv.review.figures import BAND, OTHER, STRONG, TARGET, drawing, integer_ticks, save

COMPONENT_COLOURS = ["#2ca02c", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def reward_curve(steps: list[dict[str, Any]], baseline: float, path: Path, temperature: float = 1.0) -> Path:
    """x "Training step", y "Reward": the overall reward, each component, the untrained baseline (the base
    model's mean on the held-out tasks, measured through the harness), the truth score where the env has a strict
    scorer, the hack fraction and the content-free share."""
    with drawing(560) as figure:
        axes = figure.add_axes((0.07, 0.11, 0.58, 0.8))  # the legend to the right, off the lines
        xs = [row["step"] for row in steps]
        axes.plot(xs, [row["reward"] for row in steps], color=TARGET, linewidth=2, label="reward (weighted total)")
        names = sorted({name for row in steps for name in row.get("components", {})})
        for colour, name in zip(COMPONENT_COLOURS, names):
            ys = [row["components"].get(name) for row in steps]
            axes.plot(xs, [y if y is not None else float("nan") for y in ys], color=colour, linewidth=1,
                      linestyle="--", label=f"component: {name}")
        axes.axhline(baseline, color=STRONG, linestyle=":", linewidth=2,
                     label=f"untrained baseline (held-out, harness): {baseline:.3f}")
        truth = [row.get("truth") for row in steps]
        if any(t is not None for t in truth):
            # above the reward (where the two agree it must still show) and dashed, so both stay readable
            axes.plot(xs, [t if t is not None else float("nan") for t in truth], color="black", linewidth=1.5,
                      linestyle=(0, (5, 3)), zorder=4, label="truth (strict scorer, never rewarded)")
        hack = [row.get("hack_fraction") for row in steps]
        if any(h is not None for h in hack):
            axes.plot(xs, [h if h is not None else float("nan") for h in hack], color=OTHER, linewidth=1,
                      label="hack fraction (exploit detectors)")
        free = [row.get("content_free_fraction") for row in steps]
        if any(f is not None for f in free):  # drawn at zero too: a share measured and found nil is a result
            axes.plot(xs, [f if f is not None else float("nan") for f in free], color=OTHER, linewidth=1,
                      linestyle=":", label="content-free share (pays on another task)")
        axes.set_xlabel("Training step")
        axes.set_ylabel("Reward")
        top = max([1.0, *(row["reward"] for row in steps if row.get("reward") is not None)])
        axes.set_ylim(-0.02, top + 0.02)
        integer_ticks(axes.xaxis)
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        axes.set_title(f"GRPO training reward per step (sampled completions, temperature {temperature:g})")
        return save(figure, path)


def before_after(groups: dict[str, dict[str, tuple[float, float, float]]], examples: dict[str, str],
                 path: Path, tasks: dict[str, int] | None = None,
                 difference: tuple[float, float, float] | None = None, reading: str = "") -> Path:
    """Per-group means with 95% intervals for base and trained (groups: "all" and each difficulty), each group
    labelled with its number of held-out tasks (`tasks`: a level of 3 tasks is little evidence, and its label
    says so), the paired difference (trained - base: mean, low, high) and what it says (`reading`) under the
    title, and one held-out transcript of each model under the bars. Title, difference and legend sit above
    the axes, so no bar is hidden behind them."""
    tasks = tasks or {}
    with drawing(640) as figure:
        axes = figure.add_axes((0.08, 0.42, 0.88, 0.42))
        labels = list(groups)
        for offset, (model, colour) in zip((-0.18, 0.18), (("base", STRONG), ("trained", TARGET))):
            for i, label in enumerate(labels):
                mean, low, high = groups[label][model]
                axes.bar(i + offset, mean, width=0.34, color=colour, label=model if i == 0 else None)
                axes.errorbar(i + offset, mean, yerr=[[mean - low], [high - mean]], color="black", capsize=4)
        axes.set_xticks(range(len(labels)), [_group_label(label, tasks.get(label)) for label in labels])
        axes.set_ylabel("Mean reward (held-out tasks, 95% interval)")
        axes.set_ylim(0, 1.05)
        axes.axhline(0, color=BAND, linewidth=0.5)
        figure.legend(*axes.get_legend_handles_labels(), loc="upper right", bbox_to_anchor=(0.96, 0.975), ncol=2,
                      frameon=False)
        figure.text(0.08, 0.965, "Before and after GRPO: the same held-out tasks, same seed, same server",
                    fontsize=12, fontweight="bold", va="top")
        if difference is not None:
            mean, low, high = difference
            n = tasks.get("all")
            figure.text(0.08, 0.925, f"trained − base, paired over {f'the {n} ' if n else 'the '}tasks: "
                        f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]", fontsize=10, va="top")
            colour = "#2ca02c" if low > 0 else "#d62728" if high < 0 else "#555555"
            figure.text(0.08, 0.89, reading, fontsize=10, va="top", color=colour, fontweight="bold")
        text = "\n\n".join(f"{model}: {sample}" for model, sample in examples.items())
        figure.text(0.02, 0.02, text, fontsize=9, family="monospace", va="bottom", wrap=True)
        return save(figure, path)


def _group_label(label: str, n: int | None) -> str:
    """`easy\n(n=3 tasks)`: the bars' evidence, under their name."""
    return label if n is None else f"{label}\n(n={n} task{'s' * (n != 1)})"
