"""`autoenv demo`: evaluate an example offline on a throwaway run branch in a scratch repo.

It builds what a real run has — a git repository with config.toml, spec.md and the
example as candidate/, and a run `autoenv/demo-<example>` started on it with `autoenv new`
(so the run base is there) — and runs the ordinary offline evaluation there, so the
user's own checkout is never touched.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import git

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import EXAMPLES, PROJECT, examples
from autoenv.run.lifecycle import new_run

ORACLE_METHOD = re.compile(r"(?m)^(    )def oracle\(self.*?(?=^\1?\S|\Z)", re.S)


def remove_oracle_hooks(candidate: Path) -> int:
    """Delete every task's `oracle` method from the candidate's Python files (an environment
    someone wrote without one); the number of hooks removed."""
    removed = 0
    for path in sorted(Path(candidate).rglob("*.py")):
        text = path.read_text()
        new, count = ORACLE_METHOD.subn("", text)
        if count:
            path.write_text(new)
            removed += count
    return removed


def make_run_repo(example: str, directory: Path | None = None, config_text: str | None = None,
                  run_base: bool = True, oracle: bool = True, source: Path | None = None) -> Path:
    """A fresh git repository on branch autoenv/demo-<example> holding the example as candidate/;
    with `run_base`, the branch is made by `autoenv new` from a `main` holding the same files;
    without `oracle`, the candidate's oracle hooks are removed first; `source` (default examples/<example>)
    is the package with its spec.md."""
    source = Path(source) if source else EXAMPLES / example
    if not (source / "pyproject.toml").is_file():
        raise AutoEnvError(
            f"there is no example named {example!r}",
            where=str(EXAMPLES),
            fix=f"choose one of: {', '.join(examples()) or '(none found)'}",
        )
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix=f"autoenv-demo-{example}-"))
    if root.exists() and any(root.iterdir()):
        raise AutoEnvError(f"{root} is not empty", where=str(root), fix="pass an empty or new --dir")
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, root / "candidate", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "spec.md"))
    shutil.copy(source / "spec.md", root / "spec.md")
    if not oracle and not remove_oracle_hooks(root / "candidate"):
        raise AutoEnvError(f"example {example!r} has no oracle hook to remove", where=str(source),
                           fix="remove oracle hooks only from examples that have one")
    (root / "config.toml").write_text(config_text or (PROJECT / "config.toml").read_text())
    shutil.copy(PROJECT / ".gitignore", root / ".gitignore")
    repo = git.Repo.init(root, initial_branch="main" if run_base else f"autoenv/demo-{example}")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "AutoEnv demo")
        cw.set_value("user", "email", "demo@autoenv.invalid")
    repo.git.add("-A")
    repo.index.commit(f"demo: {example} example as the candidate")
    if run_base:
        new_run(root, f"demo-{example}")
    return root
