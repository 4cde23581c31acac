"""Where the project's own files are: the repository AutoEnv was installed from, and its examples."""

from __future__ import annotations

from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
EXAMPLES = PROJECT / "examples"
VENDORED_VERIFIERS = PROJECT / "verifiers"
DEFAULT_CANDIDATE = PROJECT / "candidate"


def examples() -> list[str]:
    """Names of the example candidates shipped under examples/."""
    if not EXAMPLES.is_dir():
        return []
    return sorted(p.name for p in EXAMPLES.iterdir() if (p / "pyproject.toml").is_file())
