"""`autoenv plot` and the plot every evaluation writes: outputs/<commit>/plot.png, linked from its feedback."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from matplotlib.image import imread
from review_run import png_size, review, review_run

from autoenv.cli import print_result
from autoenv.core.config import Bands
from autoenv.review import figures
from autoenv.review.plot import plot_run, running_best
from autoenv.review.rows import Point, Row
from autoenv.review.run import Run
from autoenv.run.ledger import read_entries


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return review_run(tmp_path_factory.getbasetemp() / "review")


def test_plot_writes_a_png_1200_pixels_wide(run, capsys, tmp_path):
    code, out, _ = review(capsys, run.root, "plot")
    assert code == 0 and out.strip() == "plot: outputs/review/plot-demo-arithmetic.png"
    path = run.root / "outputs" / "review" / "plot-demo-arithmetic.png"
    assert png_size(path) == (1200, 760)
    pixels = imread(path)[:, :, :3]
    keep_green = np.all(np.abs(pixels - np.array([0x2C, 0xA0, 0x2C]) / 255) < 0.02, axis=-1)
    discard_red = np.all(np.abs(pixels - np.array([0xD6, 0x27, 0x28]) / 255) < 0.02, axis=-1)
    assert keep_green.sum() > 200 and discard_red.sum() > 50  # verdict markers and bars are drawn
    code, out, _ = review(capsys, run.root, "plot", "--out", str(tmp_path / "mine.png"), "--tag", "other")
    assert code == 0 and png_size(tmp_path / "mine.png") == (1200, 760)


def test_every_evaluation_writes_the_run_so_far_and_links_it(run):
    for name, commit in run.commits.items():
        plot = run.root / "outputs" / commit / "plot.png"
        assert png_size(plot) == (1200, 760), name
        feedback = (run.root / "feedback" / f"{commit}.md").read_text()
        link = re.search(r"- the run so far: \[plot\.png\]\(([^)]+)\)", feedback)
        assert link, name
        assert (run.root / "feedback" / link.group(1)).resolve() == plot.resolve()
    # each plot shows the run up to its evaluation: the later, the more points and the larger the file
    sizes = [(run.root / "outputs" / run.commits[k] / "plot.png").stat().st_size for k in ("real", "inconclusive")]
    assert sizes[0] < sizes[1]


def test_the_result_block_names_the_plot(run, capsys):
    entry = read_entries(run.root / "feedback_log.jsonl")[-1]
    capsys.readouterr()
    print_result(entry, run.root)
    out = capsys.readouterr().out
    assert re.search(rf"(?m)^plot:\s+outputs/{entry.commit}/plot\.png$", out)


def test_the_running_best_is_the_last_kept_target_mean():
    def row(n: int, verdict: str, mean: float | None) -> Row:
        return Row(number=n, commit=f"{n:040x}", time=None, description="", verdict=verdict, reason="",
                   target=Point(model="m", mean=mean) if mean is not None else None)

    rows = [row(1, "discard", 0.9), row(2, "keep", 0.1), row(3, "discard", 0.6), row(4, "keep", 0.3),
            row(5, "crash", None), row(6, "inconclusive", 0.35)]
    best = running_best(rows)
    assert math.isnan(best[0]) and list(best[1:]) == [0.1, 0.1, 0.3, 0.3, 0.3]


@pytest.fixture
def drawn(monkeypatch):
    """What each figure saved meanwhile has past the canvas's edge (figures.outside), by file name."""
    found: dict[str, list[str]] = {}
    save = figures.save

    def measured(figure, path):
        found[path.name] = figures.outside(figure)
        return save(figure, path)

    monkeypatch.setattr(figures, "save", measured)
    return found


def test_nothing_in_the_run_plot_or_the_compare_plot_is_drawn_past_the_canvas(run, capsys, tmp_path, drawn):
    assert review(capsys, run.root, "plot", "--out", str(tmp_path / "run.png"))[0] == 0
    code, out, _ = review(capsys, run.root, "compare", run.commits["real"][:8], run.commits["keep"][:8])
    assert code == 0 and len(drawn) == 2, out
    assert drawn == {"run.png": [], next(name for name in drawn if name.startswith("compare-")): []}


def test_the_run_plots_legend_stays_inside_with_its_longest_entries(tmp_path, drawn):
    """Many evaluations (rotated ticks), a broken chain (the tampered entry, the legend's largest) and wide
    band labels: the axes give way to the legend as drawn."""
    rows = [Row(number=n, commit=f"{n:040x}", time=None, description="", verdict="keep" if n % 3 else "discard",
                reason="", target=Point(model="m", mean=0.3, ci=(0.2, 0.4)), learnable=0.5, tampered=n == 9)
            for n in range(1, 31)]
    bands = Bands(target_min=0.125, target_max=0.875, strong_min=0.925, learnable_min=0.125)
    plot_run(Run(branch="autoenv/a-long-tag-for-the-title", rows=rows, source="ledger"), bands, tmp_path / "p.png")
    assert drawn == {"p.png": []} and png_size(tmp_path / "p.png") == (1200, 760)


def test_outside_names_what_sticks_out():
    """The check is not vacuous: a legend pushed past the right edge is named, with how far."""
    with figures.drawing(300) as figure:
        axes = figure.add_subplot(1, 1, 1)
        axes.plot([0, 1], [0, 1], label="a line with a long label")
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        found = figures.outside(figure)
    assert any(item.startswith("legend of axes 0: ") for item in found), found
