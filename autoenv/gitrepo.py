"""The one wrapper around git: every failure becomes an AutoEnvError that says what to do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from autoenv.errors import AutoEnvError

NOTES_REF = "refs/notes/autoenv"


@dataclass(frozen=True)
class Head:
    commit: str
    """Full SHA of HEAD: the key of every result of this evaluation."""
    branch: str | None
    """Current branch name, None when detached."""
    subject: str


class Repo:
    def __init__(self, path: Path):
        try:
            self._repo = git.Repo(path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise AutoEnvError(
                f"{path} is not inside a git repository",
                where=str(path),
                fix="results are keyed by commit: run inside your AutoEnv clone "
                "(or `git init && git add -A && git commit -m init` first)",
            ) from None
        self.root = Path(self._repo.working_tree_dir).resolve()

    def head(self) -> Head:
        try:
            commit = self._repo.head.commit
        except ValueError:
            raise AutoEnvError(
                "the repository has no commits yet",
                where=str(self.root),
                fix="commit the candidate first: git add -A && git commit -m 'first candidate'",
            ) from None
        branch = None if self._repo.head.is_detached else self._repo.active_branch.name
        return Head(commit=commit.hexsha, branch=branch, subject=commit.summary)

    def dirty_paths(self) -> list[str]:
        """Modified, staged and untracked (not ignored) paths, relative to the root."""
        # -z: paths as they are (plain porcelain quotes any with a space or a quote in it)
        fields = self._repo.git.status("--porcelain", "-z", "--untracked-files=all").split("\0")
        paths, rest = [], iter(fields)
        for field in rest:
            if field.strip():
                paths.append(field[3:])
                if field[0] in "RC":  # a rename or copy: its source path follows
                    next(rest, None)
        return paths

    def require_clean(self, owned: list[Path], commit: str) -> None:
        """Refuse a dirty tree, naming the files; paths in or under `owned` (the harness's
        results) do not count, and the suggested fix never commits them."""
        owners = {p: self._owner(p, owned) for p in self.dirty_paths()}
        dirty = [p for p, owner in owners.items() if owner is None]
        if not dirty:
            return
        shown = "\n".join(f"  {p}" for p in dirty[:12]) + ("\n  ..." if len(dirty) > 12 else "")
        # results git does not ignore (paths moved in config.toml) must stay out of `git add -A`
        listed = sorted({str(o.relative_to(self.root)) for o in owners.values() if o and o.is_relative_to(self.root)})
        add = "git add -A" + (" -- ." + "".join(f" ':!{p}'" for p in listed) if listed else "")
        ignore = f"; add {', '.join(listed)} (the harness's results) to .gitignore" if listed else ""
        raise AutoEnvError(
            f"the working tree has uncommitted changes; results are keyed by commit "
            f"{commit[:12]}, which would not be what was evaluated:\n{shown}",
            where=str(self.root),
            fix=f"commit your change ({add} && git commit -m '...') or stash it, then run again{ignore}",
        )

    def _owner(self, relative: str, owned: list[Path]) -> Path | None:
        path = (self.root / relative).resolve()
        return next((o for o in (p.resolve() for p in owned) if path == o or path.is_relative_to(o)), None)

    def add_note(self, commit: str, text: str) -> None:
        """Attach (replace) this evaluation's note on `commit` under refs/notes/autoenv."""
        self._repo.git.notes("--ref", NOTES_REF, "add", "-f", "-m", text, commit)

    def resolve(self, rev: str) -> str:
        try:
            return self._repo.commit(rev).hexsha
        except (git.BadName, ValueError, git.GitCommandError):
            raise AutoEnvError(
                f"{rev!r} is not a commit of this repository",
                where=str(self.root),
                fix="pass a SHA, a prefix of one, or a ref such as HEAD~1",
            ) from None

    def commit_info(self, rev: str) -> Head:
        sha = self.resolve(rev)
        head = self.head()
        return Head(commit=sha, branch=head.branch if head.commit == sha else None,
                    subject=self._repo.commit(sha).summary)

    def has_branch(self, name: str) -> bool:
        return name in {head.name for head in self._repo.heads}

    def annotated(self, revs: list[str], walk: bool = True) -> list[Annotated]:
        """Commits of `revs` (their history when `walk`), oldest first, with their autoenv notes."""
        if not revs:
            return []
        args = ["--reverse", "--format=%H%x1f%cI%x1f%s%x1f%N%x1e", f"--notes={NOTES_REF}"]
        if not walk:
            args.append("--no-walk=unsorted")
        try:
            text = self._repo.git.log(*args, *revs, "--")
        except git.GitCommandError as e:
            raise AutoEnvError(f"git log failed: {e.stderr.strip()}", where=str(self.root),
                               fix="check that the branch or commits exist: git branch --list 'autoenv/*'") from None
        out = []
        for record in text.split("\x1e"):
            fields = record.strip("\n").split("\x1f")
            if len(fields) == 4:
                out.append(Annotated(commit=fields[0], time=fields[1], subject=fields[2], note=fields[3].strip()))
        return out

    def noted_commits(self) -> list[str]:
        """Every commit carrying a note under refs/notes/autoenv."""
        try:
            listing = self._repo.git.notes("--ref", NOTES_REF, "list")
        except git.GitCommandError:  # no notes ref yet
            return []
        return [line.split()[1] for line in listing.splitlines() if len(line.split()) == 2]

    def ancestors(self, rev: str, limit: int = 5000) -> list[str]:
        """`rev` and its ancestors, newest first."""
        return self._repo.git.rev_list(f"--max-count={limit}", rev).split()

    def descendants(self, rev: str, tip: str) -> list[str]:
        """Commits between `rev` (excluded) and `tip` that descend from `rev`, newest first."""
        try:
            return self._repo.git.rev_list("--ancestry-path", f"{rev}..{tip}").split()
        except git.GitCommandError:
            return []

    def same_tree(self, a: str, b: str, path: Path) -> bool:
        """`path` is identical in commits `a` and `b`."""
        try:
            self._repo.git.diff("--quiet", a, b, "--", str(path))
        except git.GitCommandError:
            return False
        return True


@dataclass(frozen=True)
class Annotated:
    """A commit with its autoenv note ("" when it has none)."""

    commit: str
    time: str
    subject: str
    note: str
