"""The confined build: a package's dependencies fetched without its code, its own build run in the sandbox.

Two steps, for the candidate (autoenv.sandbox.install) and for a package an OpenEnv server venv installs
from candidate files (autoenv.sandbox.serverenv). `fetch` installs declared requirements, wheels only,
from a folder that holds no uv config of the candidate's: nothing of the candidate runs, and no
dependency's build either; a requirement published only as an sdist is built in a sandbox of its own
(network, no secret, a private uv cache, only the target venv writable). `install_confined` then builds
and installs the package itself in the sandbox with no network, the scrubbed environment and only
site-packages and a private uv cache writable (`--no-build-isolation`: its backend was fetched into the
target), and compares site-packages before and after (autoenv.sandbox.sitepackages). A backend that
stages its build inside the package folder (pdm-backend's `.pdm-build`) gets an empty folder of the
build's own mounted there: the package folder stays read-only and nothing written there is kept.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoenv.core import display
from autoenv.core.errors import AutoEnvError
from autoenv.sandbox.buildcheck import BuildPlan, line_of
from autoenv.sandbox.candidatevenv import harness_constraints, missing
from autoenv.sandbox.confine import choose
from autoenv.sandbox.environ import sandbox_env, scrubbed
from autoenv.sandbox.sitepackages import foreign, hook_problems, remove_new, snapshot

INSTALL_SECONDS = 900


def uv_binary() -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise AutoEnvError("uv is not installed, so the candidate cannot be installed confined",
                           where=str(Path(sys.executable).parent), fix="the person runs bash setup.sh (it installs uv)")
    return uv


def site_packages(python: str) -> Path:
    """The purelib folder of `python`'s environment."""
    if Path(python) == Path(sys.executable):
        return Path(sysconfig.get_paths()["purelib"])
    out = subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout
    return Path(out.strip())


def install_env() -> dict[str, str]:
    """For uv's own steps outside the sandbox (fetching wheels, uninstalling): the harness's environment without
    its secrets, and without PYTHONPATH: the build imports its backend."""
    env = scrubbed()
    env.pop("PYTHONPATH", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def build_env(network: bool = False) -> dict[str, str]:
    """For a step that runs a build backend (the candidate's, or a dependency's sdist): the allowlist a candidate
    process gets (autoenv.sandbox.environ.sandbox_env), this venv's tools first."""
    env = sandbox_env(network=network)
    env.pop("PYTHONPATH", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


INDEX_VARS = re.compile(r"^(UV|PIP)_(INDEX|DEFAULT_INDEX|EXTRA_INDEX_URL|FIND_LINKS|CERT|NATIVE_TLS|DEFAULT_TIMEOUT)")


def index_env() -> dict[str, str]:
    """For a dependency's sdist built in a sandbox with the network: build_env's allowlist plus how uv reaches the
    package index (its URL may hold a credential: the price of a private index; never a provider's key)."""
    env = build_env(network=True)
    env.update({k: v for k, v in os.environ.items() if INDEX_VARS.match(k)})
    return env


def tail(proc: subprocess.CompletedProcess, lines: int = 15) -> str:
    return "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-lines:])


def fetch(wanted: list[str], python: str, where: str, what: str, layered: bool = False) -> str | None:
    """Install `wanted` (uv pip arguments: requirements, `--override FILE`) into `python`'s environment, running
    no code of the candidate's; a note when a requirement had to be built from source (in a sandbox). `layered`:
    the environment is a candidate venv over the harness's (autoenv.sandbox.candidatevenv): what the harness
    satisfies is left to it, the rest pinned to the harness's versions where the package allows."""
    if layered:
        wanted = missing(wanted)
    if not wanted:
        return None
    uv = uv_binary()
    with tempfile.TemporaryDirectory(prefix="autoenv-deps-") as tmp:
        base = [uv, "pip", "install", "-q", "--python", python]
        pinned = ["-c", str(harness_constraints(Path(tmp) / "harness.txt"))] if layered else []
        for constraint in ([pinned, []] if pinned else [[]]):
            proc = subprocess.run([*base, "--only-binary", ":all:", *constraint, *wanted], capture_output=True,
                                  text=True, cwd=tmp, env=install_env(), timeout=INSTALL_SECONDS, check=False)
            if proc.returncode == 0:
                return None
        cache = Path(tmp) / "cache"
        venv = Path(python).parent.parent
        sandbox = choose()
        cmd = sandbox.wrap([*base, "--cache-dir", str(cache), *wanted], readable=[venv],
                           writable=[site_packages(python), venv / "bin", cache], network=True)
        retry = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=index_env(), timeout=INSTALL_SECONDS,
                               check=False)
        if retry.returncode != 0:
            raise AutoEnvError(f"{what} could not be installed:\n{tail(retry)}", where=where,
                               fix="fix the requirements named above; they must resolve from the package index")
    return (f"{what}: one ships no wheel and was built from source in a sandbox "
            f"({'bwrap' if sandbox.kind == 'bwrap' else 'none: ' + sandbox.reason})")


def install_confined(package: Path, plan: BuildPlan, python: str, editable: bool, fetched: bool = False,
                     layered: bool = False) -> None:
    """Fetch `plan`'s dependencies and backend (unless `fetched`), then build and install `package` in the sandbox; raise
    AutoEnvError (the package uninstalled) when the build fails or leaves anything in site-packages beyond
    the package's own distribution (what it created is removed)."""
    pyproject = package / "pyproject.toml"
    where = f"{pyproject}:{line_of(pyproject.read_text(), 'project', 'dependencies')}"
    note = None if fetched else fetch([*plan.dependencies, *plan.requires], python, where,
                                      f"the dependencies of {plan.name}", layered=layered)
    if note:
        display.note(note)
    uv = uv_binary()
    site = site_packages(python)
    before = snapshot(site)
    proc = _build(plan, package.resolve(), python, uv, site, editable)
    after = snapshot(site)
    if proc.returncode != 0:
        _uninstall(uv, python, plan.name)
        raise AutoEnvError(f"installing {plan.name} failed (nothing of it is left installed):\n{tail(proc)}",
                           where=str(pyproject),
                           fix="fix the package metadata or build config named above, commit, and run again")
    left = foreign(before, after, plan.module_name)
    hooks = hook_problems(site, plan.module_name, package)
    if left or hooks:
        removed = remove_new(site, before, left)
        _uninstall(uv, python, plan.name)
        kept = [p for p in left if p not in removed]
        raise AutoEnvError(
            f"the candidate's build tampered with site-packages ({site}): "
            + "; ".join([*(f"{p} (removed)" for p in removed), *(f"{p} (changed, still there)" for p in kept), *hooks])
            + f"; {plan.name} is not installed",
            where=str(pyproject),
            fix="the install may add only the package's own distribution: remove what ships or writes the files "
                "named (force-include, build hooks, extra packages)"
                + ("; the changed files are not the candidate's: the person restores them with bash setup.sh"
                   if kept else ""))


def _build(plan: BuildPlan, package: Path, python: str, uv: str, site: Path, editable: bool) -> subprocess.CompletedProcess:
    """The package's own build and install: in the sandbox, offline, without the dependencies (fetched already),
    with the backend from the target (no isolated build env to fetch), a private uv cache, and a private folder
    at each of the plan's `private_writes` (the package folder around it read-only)."""
    sandbox = choose()
    if sandbox.kind != "bwrap":
        display.warn(f"the candidate's build runs unconfined (sandbox: none): {sandbox.reason}; "
                     "only the build config check and the site-packages check stand")
    env = install_env() | dict(plan.build_env)
    with tempfile.TemporaryDirectory(prefix="autoenv-build-") as tmp:
        cache = Path(tmp) / "cache"
        cache.mkdir()
        cmd = [uv, "pip", "install", "--no-deps", "--no-build-isolation", "--offline", "--no-config",
               "--link-mode=copy", "--cache-dir", str(cache), "--python", python,
               *(["-e"] if editable else []), str(package)]
        wrapped = sandbox.wrap(cmd, readable=[package, Path(python).parent.parent],
                               writable=[site, cache, *(package / w for w in plan.source_writes)], network=False)
        with private_folders(sandbox.kind == "bwrap", package, plan.private_writes, Path(tmp)) as binds:
            return subprocess.run(mounted(wrapped, binds), capture_output=True, text=True, cwd=tmp, env=env,
                                  timeout=INSTALL_SECONDS, check=False)


@contextmanager
def private_folders(confined: bool, package: Path, folders: tuple[str, ...], tmp: Path) -> Iterator[list[str]]:
    """bwrap arguments covering each of `folders` (under `package`) with an empty folder under `tmp`. The mount
    point must exist (the package is read-only inside): one made here is removed after, when still empty."""
    if not confined:
        yield []
        return
    made, binds = [], []
    for name in folders:
        point = package / name
        if not point.exists():
            point.mkdir()
            made.append(point)
        private = tmp / "private" / name
        private.mkdir(parents=True)
        binds += ["--bind", str(private), str(point)]
    try:
        yield binds
    finally:
        for point in made:
            try:
                point.rmdir()
            except OSError:  # something was put there meanwhile (not through the sandbox): left as it is
                pass


def mounted(wrapped: list[str], binds: list[str]) -> list[str]:
    """`wrapped` (a bwrap command line) with `binds` after all its own mounts, so they cover what those show."""
    if not binds:
        return wrapped
    end = wrapped.index("--")
    return [*wrapped[:end], *binds, *wrapped[end:]]


def _uninstall(uv: str, python: str, name: str) -> None:
    subprocess.run([uv, "pip", "uninstall", "--python", python, name], capture_output=True, text=True,
                   env=install_env(), cwd=tempfile.gettempdir(), check=False)
