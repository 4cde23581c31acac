"""Where the project's own files are: the repository AutoEnv was installed from, its examples, and a run's spec."""

from __future__ import annotations

import os
import re
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
EXAMPLES = PROJECT / "examples"
VENDORED_VERIFIERS = PROJECT / "verifiers"
DEFAULT_CANDIDATE = PROJECT / "candidate"
SPEC = "spec.md"


def shown(text: object) -> str:
    """`text` (a path, or a message naming paths) with every absolute path under the run root (the working
    folder) or the project written relative to it: `tests/data/env/README.md`, not `/home/me/autoenv/tests/...`.
    Paths elsewhere stay whole."""
    out = str(text)
    try:
        here = str(Path(os.getcwd()).resolve())
    except OSError:  # the working folder is gone
        here = "/"
    for root in sorted({here, str(PROJECT)} - {"/"}, key=len, reverse=True):  # the deeper root first
        out = re.sub(r"(?<![\w./~-])" + re.escape(root + os.sep), "", out)
    return out


def examples() -> list[str]:
    """Names of the example candidates shipped under examples/ (a package with a spec.md; the real-* examples
    are existing environments evaluated with --env, not candidates)."""
    if not EXAMPLES.is_dir():
        return []
    return sorted(p.name for p in EXAMPLES.iterdir() if (p / "pyproject.toml").is_file() and (p / "spec.md").is_file())


def spec_problem(root: Path) -> str | None:
    """What is wrong with `root`/spec.md ("missing", "empty", ...), or None when it has text."""
    path = root / SPEC
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return "not a regular file (the judge is given only regular files)"
    if not path.is_file():
        return "missing"
    return "empty" if not path.read_text(errors="replace").strip() else None


def spec_warnings(root: Path) -> list[str]:
    """The warning a missing or empty spec.md gives, for the terminal, the entry and the feedback."""
    problem = spec_problem(root)
    if problem is None:
        return []
    return [f"{SPEC} is {problem}: the judge has no specification to check the environment against; "
            f"for the person who runs AutoEnv, not the agent ({SPEC} is protected: an agent's edit is `tampered`): "
            f"start the run with one, `autoenv new <tag> --spec FILE`, or `autoenv rebase-rules` after committing it"]
