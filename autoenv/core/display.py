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

import io
import os
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from autoenv.core.config import Bands
from autoenv.core.errors import AutoEnvError
from autoenv.core.formats import mean_ci, number, quoted
from autoenv.core.paths import shown
from autoenv.core.record import GateReport, ModelStats


def _plain() -> bool:
    return bool(os.environ.get("NO_COLOR") or os.environ.get("CI")) or not sys.stdout.isatty()


# Captured output (an agent's shell, CI logs) has no terminal width: give tables room, unless
# COLUMNS says how wide the reader is (the review commands then switch to a stacked layout).
_columns = os.environ.get("COLUMNS", "")
_width = None if sys.stdout.isatty() else int(_columns) if _columns.isdigit() and int(_columns) >= 20 else 132


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, no_color=_plain(), markup=False, emoji=False, highlight=False, soft_wrap=True,
                   width=_width)


console = _console()
err_console = _console(stderr=True)


class StageFailed(Exception):
    """Raised inside `stage` by callers to mark the stage failed without a traceback."""


@contextmanager
def stage(name: str, detail: str = "") -> Iterator[None]:
    """Print one line per pipeline stage: its name, then ok/failed and the time it took. Off a
    terminal, a stage that prints nothing for PROGRESS_SECONDS says it is still running."""
    started = time.time()
    line = Text(f"▶ {name}", style="bold cyan")
    if detail:
        line.append(f" {detail}", style="dim")
    console.print(line)
    _printed()
    for listener in list(_stage_listeners):
        listener(name)
    beat = _Heartbeat(name, started) if not console.is_terminal else None
    try:
        yield
    except BaseException:
        console.print(Text.assemble("  ", (f"✗ {name} failed", "red"), " ", (_took(started), "dim")))
        raise
    finally:
        if beat is not None:
            beat.stop()
    console.print(Text.assemble("  ", (f"✓ {name}", "green"), " ", (_took(started), "dim")))
    _printed()


_stage_listeners: list[Callable[[str], None]] = []


@contextmanager
def stages_to(listener: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, `listener(name)` is called as each stage starts (the evaluation's lock file says where
    it is, for a driver waiting on it)."""
    _stage_listeners.append(listener)
    try:
        yield
    finally:
        _stage_listeners.remove(listener)


_last_line = [0.0]
"""When a stage last printed a line (note, warning, progress): the heartbeat stays quiet meanwhile."""


def _printed() -> None:
    _last_line[0] = time.time()


def _every() -> float:
    return float(os.environ.get("AUTOENV_PROGRESS_SECONDS") or PROGRESS_SECONDS)


class _Heartbeat:
    """`  <stage>: still running, 95 s elapsed` after each PROGRESS_SECONDS with no other line."""

    def __init__(self, name: str, started: float):
        self.name, self.started, self.every = name, started, _every()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(min(self.every, 1.0)):
            if time.time() - _last_line[0] >= self.every:
                console.print(f"  {self.name}: still running, {time.time() - self.started:.0f} s elapsed")
                _printed()

    def stop(self) -> None:
        self.done.set()


class Waiting:
    """A long wait with nothing else to show, e.g. a subprocess or another process's evaluation. On a terminal:
    a live line (spinner, `name: status`, elapsed seconds) that goes when it ends. Elsewhere (a pipe, a log):
    `  name: status …` when it starts and when the status changes, and `  name: status, 95 s elapsed` at least
    every `every` seconds (default PROGRESS_SECONDS, or AUTOENV_PROGRESS_SECONDS). `since`: when what is
    waited on began (epoch seconds), if before now."""

    def __init__(self, name: str, status: str = "", every: float | None = None, since: float | None = None):
        self.name, self.status, self.since = name, status, since
        self.every = every if every is not None else _every()
        self.started = self.last = time.time()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.live: Any = None
        self.thread: threading.Thread | None = None

    def start(self) -> Waiting:
        self.last = time.time()
        self.started = min(self.since or self.last, self.last)
        if console.is_terminal:
            self.live = console.status(self._text())
            self.live.start()
        else:
            self._line(" …")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def update(self, status: str) -> None:
        """A new status (a new stage): said at once."""
        with self.lock:
            if status == self.status:
                return
            self.status = status
        if self.live is None:
            self._line(" …")

    def stop(self) -> None:
        if self.done.is_set():
            return
        self.done.set()
        if self.thread is not None:
            self.thread.join(timeout=2)
        if self.live is not None:
            self.live.stop()

    def _text(self) -> str:
        return f"{self.name}: {self.status}, {time.time() - self.started:.0f} s elapsed" if self.status \
            else f"{self.name}: {time.time() - self.started:.0f} s elapsed"

    def _line(self, end: str = "") -> None:
        with self.lock:
            text = (f"{self.name}: {self.status}" if self.status else self.name) + end if end else self._text()
            self.last = time.time()
        console.print(f"  {text}")
        _printed()

    def _run(self) -> None:
        while not self.done.wait(min(self.every, 0.5)):
            if self.live is not None:
                self.live.update(self._text())
            elif time.time() - self.last >= self.every:
                self._line()

    def said(self) -> None:
        """A line about the wait was just printed elsewhere (a step's own line): the next heartbeat counts from now."""
        with self.lock:
            self.last = time.time()

    def __enter__(self) -> Waiting:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _took(started: float) -> str:
    return f"({time.time() - started:.1f} s)"


def note(message: str) -> None:
    """One plain line under the current stage (printed as written: it may quote the candidate or a commit subject)."""
    console.print(f"  {message}")
    _printed()


def warn(message: str) -> None:
    """`  ! message` in yellow, wrapped at the reader's width under its text (see `wrapped`); paths under the run
    root or the project shown relative to it (autoenv.core.paths.shown)."""
    console.print(wrapped("  ! ", shown(message), console, ("yellow", "yellow")))
    _printed()


def tampered(changes: list[str], why: str = "protected files differ from the run base") -> None:
    """Protected files that differ from the run base (or were written meanwhile), file by file, in red."""
    console.print(Text(f"  ✗ tampered: {why}", style="bold red"))
    for change in changes:
        console.print(Text(f"    {change}", style="red"))


def show_error(error: AutoEnvError) -> None:
    """`error: what`, `  where: ...`, `  fix: ...`, each wrapped at the reader's width under its own text."""
    err_console.print(wrapped("error: ", error.what, err_console, ("bold red", "")))
    if error.where:
        err_console.print(wrapped("  where: ", error.where, err_console, ("bold", "")))
    if error.fix:
        err_console.print(wrapped("  fix: ", error.fix, err_console, ("bold", "")))


def interrupted() -> None:
    err_console.print(wrapped("interrupted: ", "nothing was recorded for this run; traces written so far are kept",
                              err_console, ("yellow", "")))


def reader_width(target: Console | None = None) -> int | None:
    """The reader's width when it is known (a terminal, or COLUMNS set); None for captured output,
    whose lines are kept whole so that a grep finds a message on one line."""
    target = target or console
    return target.width if target.is_terminal or _columns.isdigit() else None


def wrap(text: str, width: int | None, indent: int, first: int | None = None) -> list[str]:
    """`text` as lines of at most `width` characters: the first `first` characters (default `indent`) are
    taken by a label, later lines start `indent` spaces in; words are never split (a path or a flag
    longer than a line stays whole on its own line) and the text's own line breaks are kept.
    `width` None: the text's own lines, unwrapped."""
    lines: list[str] = []
    for part in text.splitlines() or [""]:
        if width is None:
            lines.append(part)
            continue
        lead = first if first is not None and not lines else indent
        cut = textwrap.wrap(part, width, initial_indent=" " * lead, subsequent_indent=" " * indent,
                            break_long_words=False, break_on_hyphens=False) or [" " * lead]
        lines += [cut[0][lead:], *cut[1:]]
    return lines


def wrapped(label: str, text: str, target: Console, styles: tuple[str, str] = ("", "")) -> Text:
    """`label` then `text`, wrapped at `target`'s reader width with later lines under the text (styles:
    the label's, then the text's); one line per line of `text` when the width is unknown."""
    lines = wrap(text, reader_width(target), len(label))
    out = Text(label, style=styles[0])
    out.append("\n".join(lines), style=styles[1])
    return out


@dataclass
class FailureGroup:
    """One cause of failed gates as `autoenv check`/`probe` print it (autoenv.cli.failure_groups)."""

    title: str
    failed: list[tuple[str, str]]
    """(finding name, message) of each failed finding of this cause."""
    evidence: list[str] = field(default_factory=list)
    fix: str = ""
    component: bool = False


def failure_blocks(groups: list[FailureGroup]) -> None:
    """One block per cause: `cause N of M: title`, its `FAILED name: message` lines, then its evidence and fix once;
    each line wrapped at the reader's width under its own text (whole lines when the width is unknown)."""
    for i, group in enumerate(groups, 1):
        if len(groups) > 1 or group.evidence or group.fix:
            console.print(wrapped(f"cause {i} of {len(groups)}: ", group.title, console, ("bold", "bold")))
        for name, message in group.failed:
            console.print(wrapped("FAILED ", f"{name}: {message}", console, ("bold red", "")))
        for line in group.evidence:
            console.print(wrapped("  evidence: ", line, console, ("dim", "")))
        if group.fix:
            console.print(wrapped("  fix: ", group.fix, console, ("bold", "")))


def rollout_progress() -> Progress | PlainProgress:
    """A live bar on a terminal; plain progress lines (PlainProgress) when stdout is a file or a pipe."""
    if not console.is_terminal:
        return PlainProgress()
    return Progress(
        TextColumn("  {task.description:<8}", markup=False), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}", style="dim", markup=False), TimeElapsedColumn(),
        console=console, transient=False,
    )


def grow(progress: Progress | PlainProgress, task: TaskID, more: int) -> None:
    """Raise a bar's total by `more`: a stage found more to do than it planned (rich's Progress or PlainProgress)."""
    if isinstance(progress, PlainProgress):
        progress.grow(task, more)
        return
    total = next((t.total for t in progress.tasks if t.id == task), None) or 0
    progress.update(task, total=max(total + more, 1))


PROGRESS_SECONDS = 30.0
"""The longest a long stage stays silent when stdout is not a terminal (AUTOENV_PROGRESS_SECONDS overrides)."""


class PlainProgress:
    """Progress for a reader that is not a terminal (an agent's shell, a log file): one plain line
    `progress: target 12/40, strong 10/40; errors 1; 95 s elapsed` when something finished and at
    least every PROGRESS_SECONDS while nothing does, and a last line at the end. Same calls as rich's
    Progress (start, add_task, update, advance, stop)."""

    def __init__(self, every: float | None = None):
        self.every = every if every is not None else _every()
        self.tasks: dict[int, dict[str, Any]] = {}
        self.started = time.time()
        self.last = 0.0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True)

    def start(self) -> None:
        self.started = self.last = time.time()
        self.ticker.start()

    def add_task(self, description: str, total: int | None = None, status: str = "") -> TaskID:
        with self.lock:
            self.tasks[len(self.tasks)] = {"name": description, "total": total, "done": 0, "errors": 0}
            return TaskID(len(self.tasks) - 1)

    def update(self, task: int, completed: int | None = None, status: str = "") -> None:
        with self.lock:
            if completed is not None:
                self.tasks[task]["done"] = completed
            if status == "errors":
                self.tasks[task]["errors"] += 1

    def advance(self, task: int, amount: int = 1) -> None:
        with self.lock:
            self.tasks[task]["done"] += amount

    def grow(self, task: int, more: int) -> None:
        """The task's total raised by `more` (more work found on the way)."""
        with self.lock:
            self.tasks[task]["total"] = max((self.tasks[task]["total"] or 0) + more, 1)

    def stop(self) -> None:
        if self.done.is_set():
            return
        self.done.set()
        self.line()

    def line(self) -> None:
        with self.lock:
            parts = ", ".join(f"{t['name']} {t['done']}/{t['total'] if t['total'] is not None else '?'}"
                              for t in self.tasks.values())
            errors = sum(t["errors"] for t in self.tasks.values())
            self.last = time.time()
        console.print(f"  progress: {parts or 'starting'}; errors {errors}; {self.last - self.started:.0f} s elapsed")
        _printed()

    def _tick(self) -> None:
        while not self.done.wait(min(self.every, 1.0) if self.every > 1.0 else self.every):
            if time.time() - self.last >= self.every:
                self.line()


class _Tee(io.TextIOBase):
    """Writes to the stream it replaces and to a log buffer (a file's reader sees the same lines)."""

    def __init__(self, stream: IO[str], log: io.StringIO):
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.log.write(text)
        return int(self.stream.write(text))

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return bool(self.stream.isatty())

    def fileno(self) -> int:
        return int(self.stream.fileno())


_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


@contextmanager
def captured() -> Iterator[io.StringIO]:
    """Everything both consoles print inside the block, also kept in a buffer (for an evaluation's run.log)."""
    log = io.StringIO()
    saved = console._file, err_console._file  # None: the console follows sys.stdout / sys.stderr
    console.file = cast(IO[str], _Tee(console.file, log))
    err_console.file = cast(IO[str], _Tee(err_console.file, log))
    try:
        yield log
    finally:
        console._file, err_console._file = saved


def write_log(path: Path, log: io.StringIO) -> None:
    """The captured output as plain text (no colour or cursor codes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_ESCAPES.sub("", log.getvalue()), encoding="utf-8")


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
        checks.add_row(f.name, Text(f.status, style=STATUS_STYLE[f.status]), shown(f.message))
    probes = Table(title=f"Probes ({report.mode or 'not run'})", title_justify="left")
    for column in ("probe", "result", "mean", "of oracle", "scored", "harvested / best"):
        probes.add_column(column, overflow="fold")
    status = {f.name.removeprefix("probe "): f.status for f in report.findings if f.name.startswith("probe ")}
    status.setdefault("oracle", next((f.status for f in report.findings if f.name == "oracle"), "skip"))
    for name, s in report.probes.items():
        best = s.best[0] if s.best else None
        detail = ", ".join(f"{k} {v}" for k, v in s.harvested.items())
        if best and status.get(name) == "fail":
            detail += f" | idx {best.idx}: {quoted(best.reply, 60)}"
        st = status.get(name, "skip")
        probes.add_row(name, Text("n/a" if st == "skip" else st, style=STATUS_STYLE[st]), number(s.mean), number(s.of_oracle),
                       f"{s.scored}/{s.tasks}", detail)
    return [checks, probes]
