"""Which package builds the confined install accepts, read from pyproject.toml before anything runs.

An install used to run whatever build backend the candidate named, as the harness's user with the
network: an in-tree backend (`backend-path = ["_build"]`) read the provider key from the harness's
/proc/<pid>/environ, wrote into .git/ and dropped a .pth into the venv that later forged a `keep`.
Now the build runs in the sandbox (autoenv.sandbox.install), and before it this module refuses, naming
the line, what would let the candidate choose the code that builds it: `backend-path`, a `setup.py`, a
backend outside BACKENDS (the ones the ecosystem uses), a package folder that shadows its backend's
module, a folder the build writes (PRIVATE_WRITES, SOURCE_WRITES) that is a link (the sandbox would mount
it wherever it points), scripts (the install writes site-packages only, never the venv's bin/)
and dependencies only a build could tell (`dynamic`: the resolve step reads them, it runs nothing).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autoenv.core.errors import AutoEnvError

# backend -> the module the sandboxed build imports it from, and what its editable build needs besides
# [build-system].requires (hatchling asks for `editables` through get_requires_for_build_editable).
BACKENDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "hatchling.build": ("hatchling", ("editables~=0.3",)),
    "setuptools.build_meta": ("setuptools", ()),
    "flit_core.buildapi": ("flit_core", ()),
    "uv_build": ("uv_build", ()),
    "poetry.core.masonry.api": ("poetry", ()),
    "pdm.backend": ("pdm", ()),
}
# Folders a backend writes into the package folder while it builds (shown writable in the sandbox).
SOURCE_WRITES = {"setuptools.build_meta": ("build", "{module}.egg-info")}
# Folders a backend writes into the package folder that the sandbox covers with a private, empty folder of
# the build's (autoenv.sandbox.build): pdm-backend stages every build in `<package>/.pdm-build`, a path it
# does not let one configure; nothing written there outlives the build, and the package folder stays
# read-only. BUILD_ENV: what the backend needs told (pdm would remove its build folder first, and a mount
# point cannot be removed).
PRIVATE_WRITES = {"pdm.backend": (".pdm-build",)}
BUILD_ENV = {"pdm.backend": (("PDM_BUILD_NO_CLEAN", "1"),)}
FIX_BACKEND = ('use one of the ecosystem\'s backends, e.g. `requires = ["hatchling"]` and '
               '`build-backend = "hatchling.build"` under [build-system]')


@dataclass(frozen=True)
class BuildPlan:
    """What the install needs to know about the package, all of it read, none of it run."""

    name: str  # [project].name, normalised (`candidate-env`)
    backend: str
    requires: tuple[str, ...]  # [build-system].requires and the backend's editable needs
    dependencies: tuple[str, ...]  # [project].dependencies
    source_writes: tuple[str, ...]  # folders under the package the build may write
    private_writes: tuple[str, ...] = ()  # folders under the package the build gets a private folder at
    build_env: tuple[tuple[str, str], ...] = ()  # variables the backend's build needs

    @property
    def module_name(self) -> str:
        """The name as dist-info folders and editable hooks spell it (`candidate_env`)."""
        return self.name.replace("-", "_")


def line_of(text: str, table: str, key: str | None = None) -> int:
    """The 1-based line of `key` in `[table]` of a TOML text (of the table's header without `key`; 1 if absent)."""
    current, header = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        found = re.match(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$", line)
        if found:
            current = found.group(1).replace('"', "").replace("'", "")
            if current == table and not header:
                header = number
            continue
        if key and current == table and re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return number
        if key and not current and re.match(rf"\s*{re.escape(table)}\s*=", line):  # table = {{ inline }}
            return number
    return header or 1


def build_plan(package: Path) -> BuildPlan:
    """The package's build, checked: raises AutoEnvError naming the file and line of what the confined install refuses."""
    pyproject = package / "pyproject.toml"
    text = pyproject.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise AutoEnvError(f"pyproject.toml is not valid TOML: {e}", where=str(pyproject),
                           fix="fix the syntax named above, commit, and run again") from None

    def refuse(what: str, table: str, key: str | None, fix: str) -> AutoEnvError:
        return AutoEnvError(what, where=f"{pyproject}:{line_of(text, table, key)}", fix=fix)

    for script in ("setup.py",):
        if (package / script).is_file():
            raise AutoEnvError(f"the package ships a {script}, which a setuptools build runs as code: the confined "
                               "install refuses it", where=f"{package / script}:1",
                               fix=f"remove {script} and declare the package in pyproject.toml ([project] and "
                                   f"[build-system], e.g. hatchling)")
    system = data.get("build-system")
    if not isinstance(system, dict) or "build-backend" not in system:
        raise refuse("pyproject.toml names no build backend ([build-system] build-backend), so the installer would "
                     "fall back to setuptools' legacy build", "build-system", "build-backend", FIX_BACKEND)
    if "backend-path" in system:
        raise refuse("[build-system] backend-path loads the build backend from the package's own folder: the "
                     "candidate's code would build (and install) itself; the confined install refuses it",
                     "build-system", "backend-path", "remove backend-path and " + FIX_BACKEND)
    backend = system["build-backend"]
    if backend not in BACKENDS:
        raise refuse(f"build backend {backend!r} is not one the confined install runs (allowed: "
                     f"{', '.join(BACKENDS)})", "build-system", "build-backend", FIX_BACKEND)
    top, editable_needs = BACKENDS[backend]
    if (package / top).is_dir() or (package / f"{top}.py").is_file():
        raise AutoEnvError(f"the package folder holds `{top}`, which the build would import instead of the "
                           f"backend {backend}", where=str(package / top),
                           fix=f"rename {top} (the build imports from the package folder first)")
    project = data.get("project")
    if not isinstance(project, dict) or not isinstance(project.get("name"), str):
        raise refuse("pyproject.toml has no [project] name", "project", "name",
                     "add [project] with name, version and dependencies")
    for key in ("scripts", "gui-scripts"):
        if key in project:
            raise refuse(f"[project.{key}] would write commands into the venv's bin/, which the candidate's install "
                         "may not write", f"project.{key}", None, f"remove [project.{key}]: the harness imports "
                         "the package, it never runs its commands")
    if "dependencies" in (project.get("dynamic") or []):
        raise refuse("[project] dynamic lists `dependencies`: only running the build could tell them, and the "
                     "dependencies are fetched before the build, by a step that runs none of the package's code",
                     "project", "dynamic", "list the dependencies in [project] dependencies")
    requires = [r for r in system.get("requires") or [] if isinstance(r, str)]
    name = re.sub(r"[-_.]+", "-", project["name"]).lower()
    module = name.replace("-", "_")
    source_writes = tuple(w.format(module=module) for w in SOURCE_WRITES.get(backend, ()))
    private_writes = PRIVATE_WRITES.get(backend, ())
    for folder in (*source_writes, *private_writes):
        path = package / folder
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise AutoEnvError(f"{folder} in the package is {'a link' if path.is_symlink() else 'not a folder'}: the "
                               f"build of {backend} writes there, and the sandbox would show it wherever it points",
                               where=str(path), fix=f"remove {folder} from the package (the build makes it)")
    return BuildPlan(name=name, backend=backend, requires=(*requires, *editable_needs),
                     dependencies=tuple(d for d in project.get("dependencies") or [] if isinstance(d, str)),
                     source_writes=source_writes, private_writes=private_writes, build_env=BUILD_ENV.get(backend, ()))
