"""Finding the evaluation a person names: a SHA prefix, a ref, HEAD~2.

A commit that was never evaluated (or is not a commit at all) is an error that names
the nearest evaluated commits: the closest evaluated ancestor and descendant in git's
history, or, for a name git does not know, the evaluated commits whose SHA looks alike.
"""

from __future__ import annotations

import difflib
import re

from autoenv.core.errors import AutoEnvError
from autoenv.review.rows import Row
from autoenv.review.run import Project, Run

HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")


def find_row(project: Project, run: Run, rev: str, command: str = "show") -> Row:
    """The newest evaluation of the commit `rev` names in `run` (for `command`'s errors)."""
    run.require_rows(command)
    if HEX.match(rev):
        hits = {r.commit for r in run.rows if r.commit.startswith(rev.lower())}
        if len(hits) > 1:
            raise AutoEnvError(f"{rev!r} matches {len(hits)} evaluated commits", where=run.label,
                               fix=f"give more characters: {', '.join(sorted(h[:12] for h in hits))}")
        if hits:
            return _newest(run, hits.pop())
    try:
        sha = project.repo.resolve(rev)
    except AutoEnvError:
        raise AutoEnvError(
            f"{rev!r} is neither a commit of this repository nor an evaluated commit of {run.label}",
            where=str(project.repo.root),
            fix="evaluated commits that look alike: " + _alike(run, rev) + " (autoenv log lists them all)",
        ) from None
    if any(r.commit == sha for r in run.rows):
        return _newest(run, sha)
    raise AutoEnvError(
        f"commit {sha[:12]} was never evaluated on {run.label}",
        where=str(project.ledger) if run.source == "ledger" else f"git notes of {run.label}",
        fix="the nearest evaluated commits: " + nearest(project, run, sha)
        + "; or the person evaluates it: git checkout it, then bash evaluate.sh",
    )


def _newest(run: Run, sha: str) -> Row:
    return [r for r in run.rows if r.commit == sha][-1]


def describe(row: Row) -> str:
    text = row.description.splitlines()[0][:50] if row.description else ""
    return f"{row.short} ({row.verdict}{', ' + text if text else ''})"


def nearest(project: Project, run: Run, sha: str) -> str:
    """The closest evaluated ancestor and descendant of `sha` (else the newest evaluations)."""
    evaluated = {r.commit: r for r in run.rows}
    found = []
    before = next((c for c in project.repo.ancestors(sha) if c in evaluated), None)
    if before:
        found.append(f"before it {describe(evaluated[before])}")
    tip = run.branch if run.branch and project.repo.has_branch(run.branch) else None
    after = [c for c in project.repo.descendants(sha, tip) if c in evaluated] if tip else []
    if after:
        found.append(f"after it {describe(evaluated[after[-1]])}")
    return ", ".join(found) or ", ".join(describe(r) for r in run.rows[-3:])


def _alike(run: Run, rev: str) -> str:
    shorts = {r.commit[: max(len(rev), 8)]: r for r in run.rows}
    close = difflib.get_close_matches(rev.lower(), list(shorts), n=3, cutoff=0.3)
    rows = [shorts[c] for c in close]
    rows += [r for r in reversed(run.rows) if r not in rows][: max(0, 3 - len(rows))]  # then the newest
    return ", ".join(describe(r) for r in rows)
