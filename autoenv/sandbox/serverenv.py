"""OpenEnv servers' own venvs: built with uv, cached, shared by every copy of a server package.

openenv 0.10 cannot share a venv with verifiers 0.4 (mcp pins clash), so an OpenEnv server
(a folder holding openenv.yaml and pyproject.toml) runs in a venv of its own at
$XDG_CACHE_HOME/autoenv/openenv-servers/<first 16 hex of sha256(pyproject.toml)>; the key
is the convention a candidate's launcher also follows (examples/openenv-codebreaker). The
install stage builds it here, with the network, because the sandboxed evaluation has none
and shows this folder read-only.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.sandbox.confine import cache_home

READY = ".ready"
SKIP = {".venv", "__pycache__", "node_modules", ".git"}
BUILD_LEFTOVERS = {"__pycache__", "build", "dist", ".venv"}  # written by installing, not part of the source


def venvs_home() -> Path:
    return cache_home() / "autoenv" / "openenv-servers"


def venv_dir(package: Path) -> Path:
    digest = hashlib.sha256(venv_key(package)).hexdigest()[:16]
    return venvs_home() / digest


def server_packages(root: Path) -> list[Path]:
    """Folders under `root` holding an OpenEnv server: openenv.yaml next to pyproject.toml."""
    found = []
    for manifest in sorted(root.rglob("openenv.yaml")):
        if SKIP.isdisjoint(manifest.relative_to(root).parts) and (manifest.parent / "pyproject.toml").is_file():
            found.append(manifest.parent)
    return found


def requirements(package: Path) -> list[str]:
    """uv pip arguments: requirements.txt (+ overrides.txt) when the package has them, else its pyproject's dependencies."""
    if (package / "requirements.txt").is_file():
        overrides = ["--override", "overrides.txt"] if (package / "overrides.txt").is_file() else []
        return ["-r", "requirements.txt", *overrides]
    return ["-r", "pyproject.toml"]


def venv_key(package: Path) -> bytes:
    """What the venv depends on: the pyproject, and the requirement files when present."""
    parts = [(package / name).read_bytes() for name in ("pyproject.toml", "requirements.txt", "overrides.txt")
             if (package / name).is_file()]
    local = package / "candidate"  # a wrapped candidate is installed from here: its code is part of the venv
    if (package / "requirements.txt").is_file() and local.is_dir():
        parts += [p.read_bytes() for p in sorted(local.rglob("*")) if p.is_file() and not any(
            part in BUILD_LEFTOVERS or part.endswith(".egg-info") for part in p.relative_to(local).parts)]
    return b"".join(parts)


def prepare(package: Path) -> Path:
    """The python of `package`'s server venv, built with uv from its pyproject's dependencies if missing."""
    venv = venv_dir(package)
    python = venv / "bin" / "python"
    if (venv / READY).is_file():
        return python
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise AutoEnvError("uv is not installed, so the OpenEnv server's venv cannot be built", where=str(package),
                           fix="the person runs bash setup.sh (it installs uv into .venv)")
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two evaluations starting together build it once
        if (venv / READY).is_file():
            return python
        for cmd in ([uv, "venv", "-q", "--allow-existing", "--python", sys.executable, str(venv)],
                    [uv, "pip", "install", "-q", "--python", str(python), *requirements(package)]):
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=package)
            if proc.returncode != 0:
                tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
                raise AutoEnvError(f"uv could not build the OpenEnv server's venv {venv}:\n{tail}",
                                   where=str(package / "pyproject.toml"),
                                   fix="check the [project].dependencies named there and that PyPI is reachable")
        (venv / READY).write_text("ok\n")
    return python


def prepare_all(root: Path) -> list[Path]:
    """Build the venv of every OpenEnv server under `root` (cheap when they exist)."""
    return [prepare(package) for package in server_packages(root)]
