"""The run under review: its evaluations, oldest first, from the ledger or the git notes.

A ledger can hold several runs (one branch `autoenv/<tag>` each, sharing the file in
one clone), so a run is the entries recorded on its branch; entries from older
harnesses that did not record a branch belong to it when their commit is in the
branch's history. Without `--tag` the run is the checked-out branch, or the ledger's
only run. When `feedback_log.jsonl` is missing, the git notes on the branch's commits
stand in (fewer fields, shown as "–").

An `autoenv eval --env` evaluation on the branch evaluated another environment, not the
run's candidate: it is none of the run's rows (numbers, counts, sparkline, plot, report),
only of `apart`, which `autoenv log --env` shows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core.config import CONFIG_NAME, Config, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.record import Entry
from autoenv.review.notes import row_from_note
from autoenv.review.rows import Row, mark_last_kept
from autoenv.run.cache import resolve
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import chain_breaks, read_entries

RUN_PREFIX = "autoenv/"


@dataclass(frozen=True)
class Project:
    """The repository and config a review reads."""

    repo: Repo
    config: Config

    @classmethod
    def open(cls, cwd: Path, config: Path | None = None) -> Project:
        repo = Repo(cwd)
        return cls(repo=repo, config=load_config(config or repo.root / CONFIG_NAME))

    @property
    def ledger(self) -> Path:
        return self.config.path("log_file")

    def shown(self, path: Path) -> str:
        """`path` relative to the repository when inside it."""
        return str(path.relative_to(self.config.root)) if path.is_relative_to(self.config.root) else str(path)

    def outputs(self, entry: Entry) -> Path | None:
        """The folder holding `entry`'s traces: outputs/<commit>/, or previous/<run_id>/ once
        the commit was evaluated again; None when neither is there."""
        out = self.config.path("outputs") / (f"env/{entry.environment.key}" if entry.environment else entry.commit)
        if entry.run_id and (out / "previous" / entry.run_id).is_dir():
            return out / "previous" / entry.run_id
        return out if out.is_dir() else None

    def feedback(self, commit: str) -> Path:
        return self.config.path("feedback") / f"{commit}.md"

    def feedback_of(self, row: Row) -> Path:
        """The row's feedback file: feedback/<commit>.md, or feedback/env/<id>@<hash>/<run_id>.md for an `--env`
        evaluation (feedback/env/<id>@<hash>.md as older harnesses wrote it, when that is the one there)."""
        if row.entry is not None and row.entry.environment is not None:
            path = self.config.path("feedback") / row.entry.feedback_name
            older = self.config.path("feedback") / "env" / f"{row.entry.environment.key}.md"
            return older if not path.is_file() and older.is_file() else path
        return self.feedback(row.commit)


@dataclass(frozen=True)
class Run:
    """The evaluations of one run (or of every run, with `--all`), oldest first."""

    branch: str | None
    """autoenv/<tag>; None for every run in the ledger."""
    rows: list[Row]
    source: str
    """ledger, git notes, or none (nothing recorded)."""
    apart: list[Row] = field(default_factory=list)
    """`autoenv eval --env` evaluations recorded on the branch (another environment: not the run's), numbered apart."""

    @property
    def label(self) -> str:
        return self.branch or "all runs"

    @property
    def tag(self) -> str:
        return (self.branch or "all").removeprefix(RUN_PREFIX)

    @property
    def last_kept(self) -> Row | None:
        return next((r for r in self.rows if r.last_kept), None)

    def require_rows(self, command: str) -> None:
        """Raise the empty-run error for commands that need at least one evaluation."""
        if not self.rows:
            raise AutoEnvError(
                f"{self.label} has no evaluations yet: nothing to {command}",
                where=self.label,
                fix="commit a candidate and run `bash evaluate.sh`, or pick another run with --tag",
            )


def branch_name(tag: str) -> str:
    return tag if tag.startswith(RUN_PREFIX) else RUN_PREFIX + tag


def load_run(project: Project, tag: str | None = None, all_runs: bool = False) -> Run:
    """The run on autoenv/<tag> (default: the checked-out branch, or the ledger's only run)."""
    if project.ledger.is_file():
        entries = read_entries(project.ledger)
        breaks = chain_breaks(project.ledger)
        if all_runs:
            chosen = list(range(len(entries)))
            branch = None
        else:
            branch = choose_branch(project, entries, tag)
            chosen = members(project.repo, entries, branch)
        own = [i for i in chosen if entries[i].environment is None]
        apart = [i for i in chosen if entries[i].environment is not None]
        rows, env_rows = ([Row.from_entry(entries[i], n, tampered=breaks[i] if i < len(breaks) else False,
                                          source=resolve(entries, entries[i]))
                           for n, i in enumerate(indices, 1)] for indices in (own, apart))
        return Run(branch=branch, rows=mark_last_kept(rows), source="ledger", apart=env_rows)
    branch = None if all_runs else choose_branch(project, [], tag)
    return notes_run(project.repo, branch)


def choose_branch(project: Project, entries: list[Entry], tag: str | None) -> str:
    runs = Counter(e.branch for e in entries if e.branch)
    if tag:
        branch = branch_name(tag)
        if branch not in runs and not project.repo.has_branch(branch):
            raise AutoEnvError(
                f"there is no run {branch}: no such branch and no evaluation recorded on it",
                where=str(project.ledger),
                fix=f"pick one of: {known_runs(runs)}" if runs else "check the tag: a run's branch is autoenv/<tag>",
            )
        return branch
    current = project.repo.head().branch
    if current and (current.startswith(RUN_PREFIX) or current in runs or not runs):
        return current
    if len(runs) == 1:
        return next(iter(runs))
    if not runs:
        raise AutoEnvError("HEAD is detached and no run is recorded", where=str(project.repo.root),
                           fix="pass --tag <tag> (a run's branch is autoenv/<tag>)")
    raise AutoEnvError(
        f"{current or 'the detached HEAD'} is not a run branch and the ledger holds several runs",
        where=str(project.ledger),
        fix=f"pass --tag with one of: {known_runs(runs)} (or --all for every run)",
    )


def known_runs(runs: Counter) -> str:
    return ", ".join(f"{b.removeprefix(RUN_PREFIX)} ({n} evaluation{'s' * (n != 1)})" for b, n in sorted(runs.items()))


def members(repo: Repo, entries: list[Entry], branch: str) -> list[int]:
    """Indices of the entries evaluated on `branch` (every run base of it: a review shows the rules changing)."""
    history: set[str] = set()
    if any(e.branch is None for e in entries) and repo.has_branch(branch):
        history = set(repo.ancestors(branch))
    return [i for i, e in enumerate(entries) if e.branch == branch or (e.branch is None and e.commit in history)]


def notes_run(repo: Repo, branch: str | None) -> Run:
    """The run from the autoenv notes on `branch`'s commits (every noted commit when None)."""
    if branch is None:
        commits = sorted(repo.annotated(repo.noted_commits(), walk=False), key=lambda c: c.time)
    else:
        commits = repo.annotated([branch]) if repo.has_branch(branch) else []
    rows: list[Row] = []
    for commit in commits:
        row = row_from_note(commit, len(rows) + 1, branch)
        if row is not None:
            rows.append(row)
    return Run(branch=branch, rows=mark_last_kept(rows), source="git notes" if rows else "none")


def run_so_far(project: Project, entry: Entry) -> Run:
    """The run `entry` belongs to, up to and including `entry` (not yet in the ledger); no `--env` evaluation."""
    entries = read_entries(project.ledger)
    if entry.branch:
        chosen = [entries[i] for i in members(project.repo, entries, entry.branch)]
    else:
        chosen = [e for e in entries if e.branch is None]
    chosen = [e for e in chosen if e.environment is None]
    rows = [Row.from_entry(e, n, source=resolve(entries + [entry], e)) for n, e in enumerate(chosen + [entry], 1)]
    return Run(branch=entry.branch, rows=mark_last_kept(rows), source="ledger")
