"""The one wrapper around git: every failure becomes an AutoEnvError that says what to do."""

from __future__ import annotations

import random
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import git

from autoenv.core.errors import AutoEnvError

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
                fix="results are keyed by commit: the person runs it inside the AutoEnv clone (or makes one: "
                "`git init && git add -A && git commit -m init`)",
            ) from None
        self.root = Path(self._repo.working_tree_dir or path).resolve()

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
        return Head(commit=commit.hexsha, branch=branch, subject=str(commit.summary))

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

    def untracked_paths(self) -> set[str]:
        """Untracked (not ignored) paths, relative to the root."""
        return {p for p in self._repo.git.ls_files("--others", "--exclude-standard", "-z").split("\0") if p}

    def uncommitted(self, owned: list[Path]) -> tuple[list[str], list[str]]:
        """The dirty paths that are not in or under `owned` (the harness's results), and those of `owned` that
        hold dirt (results git does not ignore: paths moved in config.toml), relative to the root."""
        owners = {p: self._owner(p, owned) for p in self.dirty_paths()}
        dirty = [p for p, owner in owners.items() if owner is None]
        listed = sorted({str(o.relative_to(self.root)) for o in owners.values() if o and o.is_relative_to(self.root)})
        return dirty, listed

    def require_clean(self, owned: list[Path], commit: str) -> None:
        """Refuse a dirty tree, naming the files; paths in or under `owned` (the harness's results) do not
        count, and the suggested fix never commits them. An evaluation's own check, which knows the
        candidate and the protected files, is autoenv.run.cleantree."""
        dirty, listed = self.uncommitted(owned)
        if not dirty:
            return
        add = "git add -A" + (" -- ." + "".join(f" ':!{p}'" for p in listed) if listed else "")
        raise AutoEnvError(dirty_what(dirty, commit), where=str(self.root),
                           fix=f"commit your change ({add} && git commit -m '...') or stash it, then run again"
                           f"{ignore_fix(listed)}")

    def _owner(self, relative: str, owned: list[Path]) -> Path | None:
        path = (self.root / relative).resolve()
        return next((o for o in (p.resolve() for p in owned) if path == o or path.is_relative_to(o)), None)

    def add_note(self, commit: str, text: str) -> None:
        """Attach (replace) this evaluation's note on `commit` under refs/notes/autoenv.

        Runs in several worktrees share the notes ref: a write that finds it locked by another
        run's is tried again rather than lost."""
        for attempt in range(20):
            try:
                self._repo.git.notes("--ref", NOTES_REF, "add", "-f", "-m", text, commit)
                return
            except git.GitCommandError as e:
                if "lock" not in str(e.stderr) or attempt == 19:
                    raise
                time.sleep(0.1 + random.random() * 0.2)

    def notes(self) -> dict[str, str]:
        """Every note under refs/notes/autoenv, by annotated commit."""
        try:
            listing = self._repo.git.notes("--ref", NOTES_REF, "list")
        except git.GitCommandError:
            return {}
        pairs = [line.split() for line in listing.splitlines() if line.strip()]
        if not pairs:
            return {}
        # one `git cat-file --batch` for all notes: an overnight run has hundreds
        batch = subprocess.run(["git", "cat-file", "--batch"], input="".join(f"{blob}\n" for blob, _ in pairs).encode(),
                               cwd=self.root, capture_output=True, check=True).stdout
        texts, at = [], 0
        for _ in pairs:
            end = batch.index(b"\n", at)
            size = int(batch[at:end].split()[2])
            texts.append(batch[end + 1:end + 1 + size].decode("utf-8", errors="replace"))
            at = end + 1 + size + 1
        return {commit: text for (_, commit), text in zip(pairs, texts)}

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
                    subject=str(self._repo.commit(sha).summary))

    @property
    def git_dir(self) -> Path:
        """This worktree's own git directory (never part of the tree)."""
        return Path(self._repo.git_dir).resolve()

    def tracked_files(self) -> list[str]:
        """Paths git tracks, relative to the root."""
        return [p for p in self._repo.git.ls_files("-z").split("\0") if p]

    def ref(self, name: str) -> str | None:
        """The commit `name` (a full ref such as refs/autoenv/runs/<tag>) points at, None when it does not exist."""
        try:
            return self._repo.git.rev_parse("--verify", "--quiet", name + "^{commit}")
        except git.GitCommandError:
            return None

    def set_ref(self, name: str, commit: str) -> None:
        self._repo.git.update_ref(name, commit)

    def blob(self, commit: str, path: str) -> str | None:
        """Object id of `path` in `commit`, None when it is not there."""
        try:
            return self._repo.git.rev_parse("--verify", "--quiet", f"{commit}:{path}")
        except git.GitCommandError:
            return None

    def branch_exists(self, branch: str) -> bool:
        return self.ref(f"refs/heads/{branch}") is not None

    def valid_branch(self, branch: str) -> bool:
        try:
            self._repo.git.check_ref_format("--branch", branch)
            return True
        except git.GitCommandError:
            return False

    def run_git(self, *args: str) -> str:
        """A git command in this repository; a failure becomes an AutoEnvError naming the command."""
        try:
            return self._repo.git.execute(["git", *args])
        except git.GitCommandError as e:
            raise AutoEnvError(f"`git {' '.join(args)}` failed: {str(e.stderr).strip() or e}", where=str(self.root),
                               fix="fix what git says, then run again") from None

    def commit_all(self, paths: list[str], message: str) -> str:
        """Stage `paths` (forced past .gitignore), commit them with `message`; the new commit's SHA."""
        self.run_git("add", "-f", "--", *paths)
        reader = self._repo.config_reader()
        # the user's identity when git has one; a scratch repository gets the harness's
        identity = [] if reader.has_option("user", "name") and reader.has_option("user", "email") else \
            ["-c", "user.name=AutoEnv", "-c", "user.email=autoenv@autoenv.invalid"]
        self.run_git(*identity, "commit", "-q", "--no-verify", "-m", message)
        return self.resolve("HEAD")

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
                               fix="check that the branch or commits exist (git log --oneline --all lists them)") \
                from None
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


def dirty_what(dirty: list[str], commit: str) -> str:
    """What a refusal of a dirty tree says: the paths, at most 12."""
    shown = "\n".join(f"  {p}" for p in dirty[:12]) + ("\n  ..." if len(dirty) > 12 else "")
    return (f"the working tree has uncommitted changes; results are keyed by commit {commit[:12]}, which would not "
            f"be what was evaluated:\n{shown}")


def ignore_fix(listed: list[str]) -> str:
    """The end of a dirty-tree fix when results git does not ignore hold dirt ("" when none do)."""
    return (f"; and the person (.gitignore is protected) adds {', '.join(listed)} (the harness's results) to "
            ".gitignore" if listed else "")


@dataclass(frozen=True)
class Annotated:
    """A commit with its autoenv note ("" when it has none)."""

    commit: str
    time: str
    subject: str
    note: str
