"""Starting a run and changing its rules: `autoenv new` and `autoenv rebase-rules`.

A run is a branch `autoenv/<tag>` whose first commit holds spec.md and the run base
(`.autoenv/run.toml`, see autoenv.run.runbase). `--worktree DIR` gives the run a git worktree
of its own, so several runs go side by side on one machine: each evaluation's child
process puts its own worktree's candidate/ first on PYTHONPATH (autoenv.sandbox.rollouts), so
the shared venv's editable install never decides which candidate is evaluated.

Everything that can be wrong is checked before anything is written; a failure after the
branch exists removes the branch (and the worktree) again, so a refused `new` leaves the
repository as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autoenv.core.config import CONFIG_NAME, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.formats import iso_now
from autoenv.core.paths import EXAMPLES, SPEC, examples
from autoenv.run.gitrepo import Repo
from autoenv.run.runbase import (
    BRANCH_PREFIX,
    REF_PREFIX,
    RUN_FILE,
    RunBase,
    check_rules,
    harness_paths,
    make_base,
    run_tag,
)


def new_run(cwd: Path, tag: str, *, spec: Path | None = None, example: str | None = None, from_ref: str = "HEAD",
            worktree: Path | None = None) -> Path:
    """Create branch autoenv/<tag> (in `worktree` when given) with spec.md and the run base committed;
    return the run's root."""
    repo = Repo(cwd)
    branch = BRANCH_PREFIX + tag
    if not tag or not repo.valid_branch(branch):
        raise AutoEnvError(f"{tag!r} is not a tag git accepts in a branch name ({branch})", where="autoenv new <tag>",
                           fix="use letters, digits, '-', '_' and '.', e.g. autoenv new mar5-arith")
    if repo.branch_exists(branch):
        raise AutoEnvError(f"the run {branch} exists already", where=f"{repo.root} (branch {branch})",
                           fix="pick a new tag; a run is never restarted on top of another's history")
    if spec is not None and not Path(spec).is_file():
        raise AutoEnvError(f"no spec file at {spec}", where="--spec", fix="pass the path of an existing spec.md")
    if example is not None and not (EXAMPLES / example / "pyproject.toml").is_file():
        raise AutoEnvError(f"there is no example named {example!r}", where=str(EXAMPLES),
                           fix=f"choose one of: {', '.join(examples()) or '(none found)'}")
    if worktree is not None and Path(worktree).exists():
        raise AutoEnvError(f"the worktree path {worktree} exists already", where="--worktree",
                           fix="pass a path that does not exist yet; git creates it")
    config = load_config(repo.root / CONFIG_NAME)
    head = repo.head()
    repo.require_clean(harness_paths(config), head.commit)
    start = repo.resolve(from_ref)
    if worktree is not None:
        root = Path(worktree).resolve()
        repo.run_git("worktree", "add", "-q", "-b", branch, str(root), start)
    else:
        root = repo.root
        repo.run_git("switch", "-q", "-c", branch, start)
    try:
        write_first_commit(Repo(root), tag, start, spec, example)
    except BaseException:
        if worktree is not None:
            repo.run_git("worktree", "remove", "--force", str(root))
        else:
            repo.run_git("switch", "-q", "-f", head.branch or "--detach", *([] if head.branch else [head.commit]))
        repo.run_git("branch", "-D", branch)
        raise
    return root


def write_first_commit(repo: Repo, tag: str, start: str, spec: Path | None, example: str | None) -> str:
    """spec.md (and the example as candidate/), then the run base, in one commit the ref points at."""
    root = repo.root
    staged = [SPEC]
    if example is not None:
        source = EXAMPLES / example
        shutil.rmtree(root / "candidate", ignore_errors=True)
        shutil.copytree(source, root / "candidate",
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", SPEC))
        shutil.copy(source / SPEC, root / SPEC)
        staged.append("candidate")
    elif spec is not None:
        shutil.copy(spec, root / SPEC)
    if not (root / SPEC).is_file():
        raise AutoEnvError(f"the run would have no {SPEC}", where=f"{root / SPEC}",
                           fix="pass --spec FILE or --example NAME (or commit a spec.md on the --from commit)")
    repo.run_git("add", "-A", "--", *staged)  # staged files count as tracked for the hashes
    base = make_base(repo, tag, start, load_config(root / CONFIG_NAME), created=iso_now())
    (root / RUN_FILE).parent.mkdir(exist_ok=True)
    (root / RUN_FILE).write_text(base.text(), encoding="utf-8")
    commit = repo.commit_all([*staged, RUN_FILE], f"autoenv new {tag}: spec.md and the run base\n\n"
                             f"Run autoenv/{tag} from {start[:12]}; {len(base.files)} protected files recorded "
                             f"in {RUN_FILE}.")
    repo.set_ref(REF_PREFIX + tag, commit)
    return commit


def rebase_rules(cwd: Path, message: str) -> tuple[str, list[str]]:
    """`autoenv rebase-rules`: the protected files as they are now become the run's rules, in a commit
    of their own; returns the commit and the files whose rules changed."""
    repo = Repo(cwd)
    head = repo.head()
    tag = run_tag(head.branch)
    if tag is None:
        raise AutoEnvError(f"{head.branch or 'a detached HEAD'} is not a run branch", where=str(repo.root),
                           fix="check out the run's branch autoenv/<tag> (or start one with autoenv new <tag>)")
    if not message.strip():
        raise AutoEnvError("a change of rules needs a reason", where="-m", fix="pass -m 'why the rules change'")
    config = load_config(repo.root / CONFIG_NAME)
    repo.require_clean(harness_paths(config), head.commit)
    start = head.commit
    path = repo.root / RUN_FILE
    if path.is_file():
        try:
            start = RunBase.parse(path.read_text(encoding="utf-8"), str(path)).base_commit
        except AutoEnvError:
            pass  # a broken base is what rebase-rules replaces
    changed = check_rules(repo, head).changed
    base = make_base(repo, tag, start, config, created=iso_now())
    path.parent.mkdir(exist_ok=True)
    path.write_text(base.text(), encoding="utf-8")
    body = "\n".join(f"- {c}" for c in changed) or "- (no protected file changed; the base is written again)"
    commit = repo.commit_all([RUN_FILE], f"autoenv rebase-rules: {message.strip()}\n\nRules changed:\n{body}")
    repo.set_ref(REF_PREFIX + tag, commit)
    return commit, changed
