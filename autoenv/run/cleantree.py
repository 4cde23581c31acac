"""An evaluation's clean-tree check: every uncommitted path named with what the agent may do about it.

Results are keyed by the commit, so an evaluation refuses a dirty tree. Its advice for a change outside
the candidate used to end "or commit a file that belongs in the repository": an agent that followed it
for an edited config.toml made the next evaluation `tampered`. The fix now says, path by path, only
what program.md lets the agent do: a change to the candidate is committed; any other change is undone,
never committed (a protected file committed is tampering); a change the agent did not make is the
person's, who commits it (a change of rules with `autoenv rebase-rules`).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.run.gitrepo import Repo, dirty_what, ignore_fix
from autoenv.run.runbase import RUN_FILE, is_protected

CANDIDATE = "candidate"


def is_rule(path: str) -> bool:
    """A path the agent may not change: a protected file, or the run base itself."""
    return is_protected(path) or path == RUN_FILE


def require_clean_candidate(repo: Repo, owned: list[Path], commit: str, candidate: Path) -> None:
    """Refuse a dirty tree before an evaluation (paths in or under `owned`, the harness's results, do not
    count): the fix commits only the candidate and undoes everything else."""
    dirty, listed = repo.uncommitted(owned)
    if not dirty:
        return
    if not candidate.resolve().is_relative_to(repo.root):  # --env: a package outside the repository
        return repo.require_clean(owned, commit)
    folder = candidate.resolve().relative_to(repo.root).as_posix()
    outside = [p for p in dirty if not (p + "/").startswith(folder + "/")]
    fixes = [undo_fix(outside, repo.untracked_paths(), folder)] if outside else []
    if len(outside) < len(dirty):  # after the undo, which unstages what `git commit` would otherwise take along
        fixes.append(f"{'then ' if outside else ''}commit your change to the candidate: git add {folder} && "
                     "git commit -m '...'")
    raise AutoEnvError(dirty_what(dirty, commit), where=str(repo.root),
                       fix="; ".join(fixes) + "; then run again" + ignore_fix(listed))


def undo_fix(paths: list[str], untracked: set[str], folder: str = CANDIDATE, person: str = "they commit it") -> str:
    """What to do about uncommitted changes to `paths` (outside the candidate): undo them, never commit
    them; one the agent did not make is the person's (`person`: what they do with it)."""
    rules = [p for p in paths if is_rule(p)]
    restore = [p for p in paths if p not in untracked]
    created = [p for p in paths if p in untracked]
    undo = []
    if restore:
        undo.append(f"`git restore --staged --worktree -- {' '.join(shlex.quote(p) for p in restore)}`")
    if created:
        undo.append(f"delete {names(created)} (the harness keeps each evaluation's output in "
                    "outputs/<commit>/run.log: never redirect it into the repository)")
    protected = (f"; {names(rules)} {'is' if len(rules) == 1 else 'are'} protected (program.md, \"What you may "
                 "and may not edit\"): a commit that changes one is recorded as `tampered`") if rules else ""
    rebase = " and make it the run's rules with `autoenv rebase-rules -m 'why'`" if rules else ""
    return (f"{names(paths)}: outside {folder}/, so not part of what is evaluated and never yours to commit"
            f"{protected}. If the change is yours, undo it: {' and '.join(undo)}. If it is not, it is the "
            f"person's: {person}{rebase}; leave it to them")


def names(paths: list[str]) -> str:
    return ", ".join(paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
