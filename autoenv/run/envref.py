"""Which environment `autoenv eval --env` evaluated: its id and a hash of its content.

An environment evaluated with `--env` is not the run's candidate, so its evaluations are
recorded apart from the run's (autoenv.evaluation.pipeline): keyed by this reference, compared only
with evaluations of the same content, with outputs and feedback of their own
(`outputs/env/<id>@<hash>/`, `feedback/env/<id>@<hash>.md`) and no git note on the commit.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

from autoenv.core.record import Environment

SKIPPED = {".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist",
           "node_modules"}


def environment_ref(env: str, taskset: str, package: str | None) -> Environment:
    """The reference of `--env env` (taskset id `taskset`; `package` is its directory, None for an installed id)."""
    if package:
        return Environment(id=taskset, content_hash=tree_hash(Path(package)), source=env)
    try:
        version = metadata.version(taskset)
    except metadata.PackageNotFoundError:
        version = "unknown"
    return Environment(id=taskset, content_hash=hashlib.sha256(f"{taskset}=={version}".encode()).hexdigest(),
                       source=env)


def tree_hash(root: Path) -> str:
    """SHA-256 over every file's relative path and bytes under `root` (caches, VCS and build folders skipped)."""
    digest = hashlib.sha256()
    for path in sorted(files(root)):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def files(root: Path) -> list[Path]:
    out = []
    for path in root.iterdir():
        if path.name in SKIPPED or path.name.endswith(".egg-info") or path.is_symlink():
            continue
        if path.is_dir():
            out += files(path)
        elif path.is_file() and path.suffix != ".pyc":
            out.append(path)
    return out
