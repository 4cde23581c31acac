"""Files that are scripts, not modules: PEP 723 headers and `uv run` shebangs.

Environments ship such files to run with their own dependencies (`uv run --script`, or
verifiers' `runtime.run_uv_script` inside the rollout's runtime). Importing one as a module
fails on those dependencies, or runs its top-level code, and says nothing about the
environment: the audit lists them as scripts instead, and the sandbox lets uv write its
cache when a package ships one (uv locks and fills it when it prepares the script).
"""

from __future__ import annotations

import re
from pathlib import Path

SCRIPT_HEADER = re.compile(r"^# /// script\s*$", re.M)
UV_SHEBANG = re.compile(r"\A#!.*\buv\b.*\brun\b")
SKIPPED_DIRS = {".venv", "venv", "node_modules", ".git", "__pycache__", "build", "dist"}


def script_kind(source: Path) -> str | None:
    """"PEP 723 script" or "uv script" when the file at `source` is one, else None."""
    try:
        text = source.read_text(errors="replace")
    except OSError:
        return None
    if SCRIPT_HEADER.search(text):
        return "PEP 723 script"
    if UV_SHEBANG.search(text):
        return "uv script"
    return None


def ships_scripts(directory: Path, limit: int = 2000) -> bool:
    """Whether a package directory holds a script among its first `limit` Python files."""
    seen = 0
    for path in sorted(directory.rglob("*.py")) if directory.is_dir() else []:
        if SKIPPED_DIRS & set(path.relative_to(directory).parts):
            continue
        seen += 1
        if seen > limit:
            return False
        if script_kind(path):
            return True
    return False
