"""A run's base: `.autoenv/run.toml`, the rules a run started under, and the tamper check.

The agent being evaluated can write anywhere in the repository, and an agent that lowers
the bands in config.toml, edits evaluate.sh or patches autoenv/ used to be judged by its
own rules without a word. `autoenv new` therefore records, in a committed file the harness
owns, the base commit, the seed, the models and the SHA-256 of every protected file, and
points `refs/autoenv/runs/<tag>` at the commit that wrote it. Every evaluation compares
the protected files with that record before any work: a change is named file by file and
recorded as the verdict `tampered` (or refused, `on_tamper = "refuse"`). The record itself
is protected by the ref: run.toml at HEAD must be the blob the harness committed. A
deliberate change of rules is `autoenv rebase-rules`, a commit of its own, so `git log`
says when the rules changed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core.config import Config
from autoenv.core.errors import AutoEnvError
from autoenv.core.protected import PROTECTED
from autoenv.core.record import Entry
from autoenv.run.gitrepo import Head, Repo
from autoenv.run.ledger import temp_files

RUN_FILE = ".autoenv/run.toml"
REF_PREFIX = "refs/autoenv/runs/"
BRANCH_PREFIX = "autoenv/"
ON_TAMPER = ("record", "refuse")
NO_BASE = "no run base: rules not checked"


def is_protected(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in PROTECTED)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def protected_hashes(repo: Repo) -> dict[str, str]:
    """SHA-256 of every tracked protected file as it is on disk (the tree is clean when this runs)."""
    return {p: digest(repo.root / p) for p in sorted(repo.tracked_files()) if is_protected(p) and (repo.root / p).is_file()}


@dataclass(frozen=True)
class RunBase:
    """What `.autoenv/run.toml` holds."""

    tag: str
    base_commit: str
    """The commit the run started from (`autoenv new --from`)."""
    seed: int
    models: dict[str, str]
    on_tamper: str
    files: dict[str, str]
    created: str = ""

    def text(self) -> str:
        """The file's TOML (written by hand: a flat table of strings needs no library)."""
        def q(value: object) -> str:
            return json.dumps(value)  # a JSON string literal is a valid TOML basic string

        lines = ["# The run's base, written by `autoenv new` / `autoenv rebase-rules`. Never edit it by hand:",
                 "# the harness checks it against refs/autoenv/runs/<tag> and calls any change tampering.",
                 "", "[run]", f"tag = {q(self.tag)}", f"base_commit = {q(self.base_commit)}",
                 f"created = {q(self.created)}", f"seed = {self.seed}", f"on_tamper = {q(self.on_tamper)}",
                 "", "[models]", *(f"{role} = {q(name)}" for role, name in self.models.items()),
                 "", "[files]  # SHA-256 of every protected file", *(f"{q(p)} = {q(h)}" for p, h in self.files.items())]
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str, where: str) -> RunBase:
        """The run base in `text`; AutoEnvError naming the file and key when it is malformed."""
        fix = "the run base is the harness's, never the agent's: the person restores it " \
              "(`git checkout <run base commit> -- .autoenv/run.toml`) or writes a new one with `autoenv rebase-rules`"
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise AutoEnvError(f"the run base file is not valid TOML: {e}", where=where, fix=fix) from None
        problem = _problem(data)
        if problem is not None:
            raise AutoEnvError(f"the run base file is malformed: {problem} is missing or of the wrong type",
                               where=f"{where} ({problem})", fix=fix)
        run, models, files = data["run"], data["models"], data["files"]
        return cls(tag=run["tag"], base_commit=run["base_commit"], seed=run["seed"], models=dict(models),
                   on_tamper=run["on_tamper"], files=dict(files), created=str(run.get("created", "")))


def _problem(data: dict) -> str | None:
    """The first table or key of a run base that is missing or of the wrong type."""
    for table in ("run", "models", "files"):
        if not isinstance(data.get(table), dict):
            return f"[{table}]"
    run = data["run"]
    for key, kind in (("tag", str), ("base_commit", str), ("seed", int), ("on_tamper", str)):
        if not isinstance(run.get(key), kind):
            return f"[run] {key}"
    if run["on_tamper"] not in ON_TAMPER:
        return "[run] on_tamper"
    for table in ("models", "files"):
        bad = next((k for k, v in data[table].items() if not isinstance(v, str)), None)
        if bad is not None:
            return f"[{table}] {bad}"
    return None


def make_base(repo: Repo, tag: str, base_commit: str, config: Config, created: str) -> RunBase:
    return RunBase(tag=tag, base_commit=base_commit, seed=config.seed,
                   models={role: m.model for role, m in config.models().items()},
                   on_tamper=config.run.on_tamper, files=protected_hashes(repo), created=created)


def run_tag(branch: str | None) -> str | None:
    """`<tag>` of a branch `autoenv/<tag>`, else None."""
    return branch[len(BRANCH_PREFIX):] if branch and branch.startswith(BRANCH_PREFIX) else None


@dataclass(frozen=True)
class RulesCheck:
    """What the tamper check found at the start of an evaluation."""

    base: str | None = None
    """Commit that wrote the run base (refs/autoenv/runs/<tag>); None: no run base."""
    changed: list[str] = field(default_factory=list)
    """Protected files changed since the base, each `path (modified|added|deleted)`."""
    on_tamper: str = "record"
    commits: list[str] = field(default_factory=list)
    """The commits since the base that changed a protected file, newest first (what to revert)."""

    @property
    def recovery(self) -> str:
        """The command that undoes the change (the driver allows it): revert the commits that made it."""
        if not self.commits:
            return "git revert --no-edit <the commit that changed them>"
        return "git revert --no-edit " + " ".join(c[:12] for c in self.commits)

    @property
    def summary(self) -> str:
        if self.changed:
            return (f"tampered: {len(self.changed)} protected file(s) differ from the run base "
                    f"{(self.base or '(missing)')[:12]}: " + "; ".join(self.changed))
        if self.base is None:
            return NO_BASE
        return f"checked against the run base {self.base[:12]}: no protected file changed"


def check_rules(repo: Repo, head: Head) -> RulesCheck:
    """Compare the protected files with the run's base (see the module docstring)."""
    tag = run_tag(head.branch)
    on_disk = repo.root / RUN_FILE
    if tag is None:
        return RulesCheck()
    ref = REF_PREFIX + tag
    base = repo.ref(ref)
    if not on_disk.is_file():  # a run that `autoenv new` started cannot lose its base unnoticed
        return RulesCheck() if base is None else RulesCheck(base=base, changed=[f"{RUN_FILE} (deleted)"])
    if base is None:
        return RulesCheck(changed=[f"{RUN_FILE} (no {ref}: the run base was not written by `autoenv new`)"])
    if repo.blob(base, RUN_FILE) != repo.blob(head.commit, RUN_FILE):
        return RulesCheck(base=base, changed=[f"{RUN_FILE} (modified by hand)"])
    recorded = RunBase.parse(on_disk.read_text(encoding="utf-8"), str(on_disk))
    now = protected_hashes(repo)
    changed = [f"{p} (modified)" for p in sorted(set(now) & set(recorded.files)) if now[p] != recorded.files[p]]
    changed += [f"{p} (added)" for p in sorted(set(now) - set(recorded.files))]
    changed += [f"{p} (deleted)" for p in sorted(set(recorded.files) - set(now))]
    return RulesCheck(base=base, changed=changed, on_tamper=recorded.on_tamper, commits=changing(repo, base, changed))


def changing(repo: Repo, base: str, changed: list[str]) -> list[str]:
    """The commits after `base` up to HEAD that touched the changed files, newest first."""
    paths = [c.split(" (")[0] for c in changed]
    if not paths:
        return []
    try:
        return repo.run_git("log", "--format=%H", f"{base}..HEAD", "--", *paths).split()
    except AutoEnvError:
        return []


class RulesRefused(AutoEnvError):
    """Protected files changed and the run refuses such commits (nothing recorded): its verdict is `tampered`."""

    verdict = "tampered"


def refuse(check: RulesCheck) -> AutoEnvError:
    """The error `on_tamper = "refuse"` raises."""
    return RulesRefused(
        "protected files differ from the run base, and [run] on_tamper = \"refuse\":\n"
        + "\n".join(f"  {c}" for c in check.changed),
        where=f"{RUN_FILE} (run base {(check.base or '')[:12]})",
        fix=f"revert them ({check.recovery}); making the change the run's new rules is the person's decision "
        "(`autoenv rebase-rules -m 'why'`)",
    )


def same_run(entry: Entry, branch: str | None, run_base: str | None = None) -> bool:
    """Whether `entry` belongs to the run evaluated on `branch` (one `autoenv/<tag>` branch)
    under the run base `run_base` (the commit that wrote its rules; None: no run base).

    The one place that says what a run is. A new run base (`autoenv rebase-rules`) starts
    a new comparison: entries judged under other rules are not a reference. An evaluation
    on a detached HEAD belongs to no run and is compared with nothing.
    """
    return branch is not None and entry.branch == branch and entry.run_base == run_base


def harness_paths(config: Config) -> list[Path]:
    """What the harness itself writes (results): never dirt, never part of a commit."""
    log = config.path("log_file")
    return [config.path("outputs"), config.path("feedback"), log, log.with_name(log.name + ".lock"), *temp_files(log)]
