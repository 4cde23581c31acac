"""OpenEnv servers' own venvs: built with uv, cached, shared by every copy of a server package.

openenv 0.10 cannot share a venv with verifiers 0.4 (mcp pins clash), so an OpenEnv server
(a folder holding openenv.yaml and pyproject.toml) runs in a venv of its own at
$XDG_CACHE_HOME/autoenv/openenv-servers/<first 16 hex of sha256(pyproject.toml)>; the key
is the convention a candidate's launcher also follows (examples/openenv-codebreaker). The
install stage builds it here, with the network, because the sandboxed evaluation has none
and shows this folder read-only. Its files come from the candidate, so it is built as the candidate is
(autoenv.sandbox.build): the requirements, wheels only, by a step that runs none of the candidate's
code; a requirement file may hold requirements and local folders inside the server package, no pip
options (`-e`, `--index-url`, ...); a local folder (an exported wrapper's ./candidate) passes the build
check (autoenv.sandbox.buildcheck) and is built in the sandbox, and nothing but its distribution may
land in site-packages.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import tomllib
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.sandbox.build import fetch, install_confined, tail, uv_binary
from autoenv.sandbox.buildcheck import build_plan, line_of
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


def requirements(package: Path) -> tuple[list[str], list[Path]]:
    """uv pip arguments for the server's venv (requirements.txt's requirements, overrides.txt as `--override`, or
    the pyproject's dependencies) and the local folders requirements.txt names, checked (see the module)."""
    if not (package / "requirements.txt").is_file():
        pyproject = package / "pyproject.toml"
        text = pyproject.read_text()
        project = tomllib.loads(text).get("project") or {}
        if "dependencies" in (project.get("dynamic") or []):
            raise AutoEnvError("the OpenEnv server's [project] dynamic lists `dependencies`: only running its build "
                               "could tell them", where=f"{pyproject}:{line_of(text, 'project', 'dynamic')}",
                               fix="list the dependencies in [project] dependencies")
        return [d for d in project.get("dependencies") or [] if isinstance(d, str)], []
    specs, local = _requirement_lines(package, package / "requirements.txt", allow_local=True)
    overrides = package / "overrides.txt"
    if overrides.is_file():
        _requirement_lines(package, overrides, allow_local=False)
        specs += ["--override", str(overrides.resolve())]
    return specs, local


def _requirement_lines(package: Path, file: Path, allow_local: bool) -> tuple[list[str], list[Path]]:
    specs: list[str] = []
    local: list[Path] = []
    for number, raw in enumerate(file.read_text().splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        where = f"{file}:{number}"
        if line.startswith("-"):
            raise AutoEnvError(f"{file.name} line {number} is a pip option ({line.split()[0]}): the server's venv takes "
                               "requirements only", where=where, fix="remove the option; list requirements, one a line")
        if line.startswith((".", "/", "file:")):
            folder = (package / line.removeprefix("file:")).resolve()
            if not allow_local or not folder.is_dir() or not folder.is_relative_to(package.resolve()):
                raise AutoEnvError(f"{file.name} line {number} names {line}, not a folder inside the server package",
                                   where=where, fix="name a folder inside the package (e.g. ./candidate), or a requirement")
            local.append(folder)
            continue
        specs.append(line)
    return specs, local


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
    """The python of `package`'s server venv, built if missing (see the module for how)."""
    venv = venv_dir(package)
    python = venv / "bin" / "python"
    if (venv / READY).is_file():
        return python
    uv = uv_binary()
    specs, local = requirements(package)
    plans = [(folder, build_plan(folder)) for folder in local]
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two evaluations starting together build it once
        if (venv / READY).is_file():
            return python
        proc = subprocess.run([uv, "venv", "-q", "--allow-existing", "--python", sys.executable, str(venv)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise AutoEnvError(f"uv could not create the OpenEnv server's venv {venv}:\n{tail(proc, 10)}",
                               where=str(package / "pyproject.toml"), fix="the person checks uv and the disk")
        wanted = [*specs, *(r for _, plan in plans for r in (*plan.dependencies, *plan.requires))]
        listed = package / ("requirements.txt" if (package / "requirements.txt").is_file() else "pyproject.toml")
        fetch(wanted, str(python), str(listed), "the OpenEnv server's requirements")
        for folder, plan in plans:
            install_confined(folder, plan, str(python), editable=False, fetched=True)
        (venv / READY).write_text("ok\n")
    return python


def prepare_all(root: Path) -> list[Path]:
    """Build the venv of every OpenEnv server under `root` (cheap when they exist)."""
    return [prepare(package) for package in server_packages(root)]
