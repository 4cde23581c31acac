"""What every review figure shares: matplotlib without a display, one palette, PNG output.

Figures are built on `matplotlib.figure.Figure` with the Agg canvas, never pyplot: no
global state, no display needed (an overnight run has none), safe to call from the
pipeline after every evaluation. They are sized for 1200 px wide at 100 dpi.

matplotlib is imported here only, inside the functions that need it: it costs about half
a second, which every `autoenv` command would pay at start for a figure it rarely draws.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

DPI = 100
WIDTH_PX = 1200
TARGET = "#1f77b4"
STRONG = "#ff7f0e"
BAND = "#2ca02c"
OTHER = "#9467bd"
TAMPERED = "#e377c2"
VERDICTS = {
    # verdict: (marker, colour)
    "baseline": ("*", "#17becf"),
    "keep": ("o", "#2ca02c"),
    "discard": ("X", "#d62728"),
    "inconclusive": ("D", "#7f7f7f"),
    "crash": ("v", "#222222"),
    "tampered": ("P", "#8c564b"),
    "cached": ("h", "#9467bd"),  # a pointer: drawn at its source's numbers, never kept
}
RC = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 10,
      "xtick.labelsize": 9, "ytick.labelsize": 10, "axes.spines.top": False, "axes.spines.right": False}


def prewarm() -> None:
    """matplotlib imported in a thread now, while the harness waits on the child, not when the run plot is drawn
    (0.4 s of an evaluation's fixed cost on 2 cores)."""
    def load() -> None:
        from matplotlib import figure  # noqa: F401 (deferred with it)
        from matplotlib.backends import backend_agg  # noqa: F401 (deferred: imported here, off the main thread)
    threading.Thread(target=load, name="autoenv-prewarm-matplotlib", daemon=True).start()


@contextmanager
def drawing(height_px: int) -> Iterator[Any]:
    """A new Figure `height_px` tall (1200 px wide) with the review style applied while it is built."""
    from matplotlib import rc_context  # deferred: see the module docstring
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred with it
    from matplotlib.figure import Figure  # deferred with it

    with rc_context(RC):  # type: ignore[arg-type]  # matplotlib types rc keys as literals
        figure = Figure(figsize=(WIDTH_PX / DPI, height_px / DPI), dpi=DPI)
        FigureCanvasAgg(figure)
        yield figure


def line(**kw: Any) -> Any:
    """A legend entry drawn as a line and/or marker (matplotlib's Line2D)."""
    from matplotlib.lines import Line2D  # deferred: see the module docstring

    return Line2D([], [], **kw)


def patch(**kw: Any) -> Any:
    """A legend entry drawn as a filled box."""
    from matplotlib.patches import Patch  # deferred: see the module docstring

    return Patch(**kw)


def integer_ticks(axis: Any) -> None:
    from matplotlib.ticker import MaxNLocator  # deferred: see the module docstring

    axis.set_major_locator(MaxNLocator(integer=True))


MARGIN_PX = 6
"""The least room between anything drawn and the canvas's edge."""


def fit_right(figure: Any, legend: Any, grid: Any) -> None:
    """Narrow `grid` (a GridSpec whose axes carry `legend` to their right) until the legend ends MARGIN_PX
    inside the canvas: its labels are measured as drawn, so no font or label length is guessed."""
    over = legend.get_window_extent(figure.canvas.get_renderer()).x1 - (figure.bbox.x1 - MARGIN_PX)  # no draw needed
    if over > 0:
        grid.update(right=grid.right - over / figure.bbox.width)  # moves the axes of pyplot's figures only
        for axes in figure.axes:
            spec = axes.get_subplotspec()
            if spec is not None and spec.get_topmost_subplotspec().get_gridspec() is grid:
                axes.set_position(spec.get_position(figure))


def outside(figure: Any) -> list[str]:
    """What is drawn past the canvas (and so clipped in the PNG): each legend, each axes with its labels and
    ticks, each figure-level text, by name with how far it sticks out; empty when everything is inside."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    box = figure.bbox
    pieces: list[tuple[str, Any]] = [(f"legend {i}", legend.get_window_extent(renderer))
                                     for i, legend in enumerate(figure.legends)]
    for i, axes in enumerate(figure.axes):
        if axes.get_legend() is not None:
            pieces.append((f"legend of axes {i}", axes.get_legend().get_window_extent(renderer)))
        pieces.append((f"axes {i} ({axes.get_title(loc='left') or axes.get_title() or axes.get_ylabel()})",
                       axes.get_tightbbox(renderer)))
    pieces += [(f"text {t.get_text()[:40]!r}", t.get_window_extent(renderer)) for t in figure.texts if t.get_text()]
    if figure._suptitle is not None:
        pieces.append((f"title {figure._suptitle.get_text()[:40]!r}", figure._suptitle.get_window_extent(renderer)))
    found = []
    for name, extent in pieces:
        over = max(box.x0 - extent.x0, extent.x1 - box.x1, box.y0 - extent.y0, extent.y1 - box.y1)
        if over > 0.5:
            found.append(f"{name}: {over:.0f} px past the edge")
    return found


def save(figure: Any, path: Path) -> Path:
    """Write `figure` as a PNG at `path` (its folder created), through a temp file so a
    reader never sees half an image."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    figure.savefig(partial, dpi=DPI, format="png", facecolor="white")
    partial.replace(path)
    return path
