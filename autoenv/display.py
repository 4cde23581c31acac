"""The one place that prints: consoles, stage lines, progress bars and tables (rich).

Colour is off when stdout is not a terminal, under NO_COLOR, or in CI, so logs and an
agent's captured output stay plain. The final result block is `key: value` lines that
a person or an agent can grep.

Nothing printed is ever read as rich markup or emoji codes: the consoles have both off,
and the styled parts here are `Text` spans. Most of what is shown is someone else's text
(config keys, paths, commit subjects, the candidate's exceptions, a judge's error), and
markup made "[target]" vanish and a stray "[/x]" replace the error with a MarkupError.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Any, Mapping

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from autoenv.config import Bands
from autoenv.errors import AutoEnvError
from autoenv.formats import mean_ci, number
from autoenv.record import GateReport, ModelStats


def _plain() -> bool:
    return bool(os.environ.get("NO_COLOR") or os.environ.get("CI")) or not sys.stdout.isatty()


# Captured output (an agent's shell, CI logs) has no terminal width: give tables room.
_width = None if sys.stdout.isatty() else 132


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, no_color=_plain(), markup=False, emoji=False, highlight=False, soft_wrap=True,
                   width=_width)


console = _console()
err_console = _console(stderr=True)


class StageFailed(Exception):
    """Raised inside `stage` by callers to mark the stage failed without a traceback."""


@contextmanager
def stage(name: str, detail: str = ""):
    """Print one line per pipeline stage: its name, then ok/failed and the time it took."""
    started = time.time()
    line = Text(f"▶ {name}", style="bold cyan")
    if detail:
        line.append(f" {detail}", style="dim")
    console.print(line)
    try:
        yield
    except BaseException:
        console.print(Text.assemble("  ", (f"✗ {name} failed", "red"), " ", (_took(started), "dim")))
        raise
    console.print(Text.assemble("  ", (f"✓ {name}", "green"), " ", (_took(started), "dim")))


def _took(started: float) -> str:
    return f"({time.time() - started:.1f} s)"


def note(message: str) -> None:
    """One plain line under the current stage (printed as written: it may quote the candidate or a commit subject)."""
    console.print(f"  {message}")


def warn(message: str) -> None:
    console.print(Text(f"  ! {message}", style="yellow"))


def tampered(changes: list[str], why: str = "protected files differ from the run base") -> None:
    """Protected files that differ from the run base (or were written meanwhile), file by file, in red."""
    console.print(Text(f"  ✗ tampered: {why}", style="bold red"))
    for change in changes:
        console.print(Text(f"    {change}", style="red"))


def show_error(error: AutoEnvError) -> None:
    err_console.print(Text.assemble(("error:", "bold red"), f" {error.what}"))
    if error.where:
        err_console.print(Text.assemble("  ", ("where:", "bold"), f" {error.where}"))
    if error.fix:
        err_console.print(Text.assemble("  ", ("fix:", "bold"), f" {error.fix}"))


def interrupted() -> None:
    err_console.print(Text.assemble(("interrupted", "yellow"),
                                    ": nothing was recorded for this run; traces written so far are kept"))


def rollout_progress() -> Progress:
    return Progress(
        TextColumn("  {task.description:<8}", markup=False), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}", style="dim", markup=False), TimeElapsedColumn(),
        console=console, transient=False,
    )


def summary_table(stats: Mapping[Any, ModelStats], bands: Bands) -> Table:
    table = Table(title="Evaluation summary", title_justify="left")
    for column in ("model", "role", "mean [95% CI]", "std", "solve", "disagree", "scored", "errors p/t/e", "tokens in/out"):
        table.add_column(column, justify="right" if column not in ("model", "role") else "left")
    wanted = {"target": f"{bands.target_min}–{bands.target_max}", "strong": f"> {bands.strong_min}"}
    for role, s in stats.items():
        e = s.errors
        table.add_row(
            s.model, f"{role} ({wanted.get(role, '')})", mean_ci(s), number(s.std),
            number(s.solve_rate), number(s.disagree_share), f"{s.scored}/{s.rollouts}",
            f"{e.provider_error}/{e.timeout}/{e.env_error}", f"{s.input_tokens}/{s.output_tokens}",
        )
    return table


def result_block(fields: dict) -> None:
    """The grep-able end of a run: `---` then one `key: value` per line, always plain."""
    console.print("---")
    width = max(len(k) for k in fields)
    for key, value in fields.items():
        line = Text(f"{key + ':':<{width + 1}} ")
        line.append(number(value, 4), style=VERDICT_STYLE.get(str(value), "") if key == "verdict" else "")
        console.print(line)


VERDICT_STYLE = {"tampered": "bold red", "crash": "red", "discard": "yellow", "keep": "green", "baseline": "green"}


STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def gates_tables(report: GateReport) -> list[Table]:
    """Two tables: the checks, then the probes with what each harvested."""
    checks = Table(title="Checks", title_justify="left")
    checks.add_column("check")
    checks.add_column("result")
    checks.add_column("detail", overflow="fold")
    for f in report.findings:
        if f.name.startswith("probe "):
            continue
        checks.add_row(f.name, Text(f.status, style=STATUS_STYLE[f.status]), f.message)
    probes = Table(title=f"Probes ({report.mode or 'not run'})", title_justify="left")
    for column in ("probe", "result", "mean", "of oracle", "scored", "harvested / best"):
        probes.add_column(column, overflow="fold")
    status = {f.name.removeprefix("probe "): f.status for f in report.findings if f.name.startswith("probe ")}
    status.setdefault("oracle", next((f.status for f in report.findings if f.name == "oracle"), "skip"))
    for name, s in report.probes.items():
        best = s.best[0] if s.best else None
        detail = ", ".join(f"{k} {v}" for k, v in s.harvested.items())
        if best and status.get(name) == "fail":
            detail += f" | idx {best.idx}: {best.reply[:60]!r}"
        st = status.get(name, "skip")
        probes.add_row(name, Text("n/a" if st == "skip" else st, style=STATUS_STYLE[st]), number(s.mean), number(s.of_oracle),
                       f"{s.scored}/{s.tasks}", detail)
    return [checks, probes]
