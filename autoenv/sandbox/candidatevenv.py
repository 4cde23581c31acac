"""The candidate's own venv, layered on the harness's, so that the harness's venv is never written after setup.

The candidate (and every `--env` environment `autoenv probe` is pointed at) used to install editable into
the harness's venv: after a survey of upstream environments it held 30 of their `.pth` files and their
dependencies, and whatever an install left there ran in every later `autoenv` command. Now each package
path gets a venv of its own under AutoEnv's cache (autoenv.core.cachedir: candidate-venvs/<16 hex of
sha256(path)>), made from the harness's base Python. One `.pth`, named to be read after the package's own,
adds the harness's site-packages behind the venv's own (`site.addsitedir`: verifiers and AutoEnv import
from there, read-only to the sandboxed child), so only what the harness lacks is installed: the package,
its backend, and the dependencies the harness's venv does not already satisfy (`missing`), resolved to the
harness's versions where they overlap (a constraint, dropped when the package needs other versions).
The child (autoenv.sandbox.rollouts, autoenv.sandbox.warmchild) runs this venv's python once the install
made it; the harness's own interpreter never has the venv on its path.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from autoenv.core.cachedir import cache_root
from autoenv.core.errors import AutoEnvError

READY = ".autoenv-ready"
SOURCE = ".autoenv-source"  # the package folder the venv serves (prune removes the venv once it is gone)
LAYER = "~autoenv-harness.pth"  # '~' sorts after every name a backend gives its hook: the package's path comes first


def venv_dir(candidate_dir: Path) -> Path:
    digest = hashlib.sha256(str(candidate_dir.resolve()).encode()).hexdigest()[:16]
    return cache_root() / "candidate-venvs" / digest


def python_of(candidate_dir: Path) -> Path:
    return venv_dir(candidate_dir) / "bin" / "python"


def ensure(candidate_dir: Path, uv: str) -> str:
    """The python of `candidate_dir`'s venv, made (with its layer over the harness's site-packages) if missing."""
    venv = venv_dir(candidate_dir)
    python = venv / "bin" / "python"
    if (venv / READY).is_file() and python.exists():
        return str(python)
    venv.parent.mkdir(parents=True, exist_ok=True)
    prune(venv.parent)
    proc = subprocess.run([uv, "venv", "-q", "--allow-existing", "--python", sys.executable, str(venv)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AutoEnvError(f"uv could not create the candidate's venv {venv}: {proc.stderr.strip()[-500:]}",
                           where=str(candidate_dir / "pyproject.toml"), fix="the person checks uv and the disk")
    site = Path(subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    harness = sysconfig.get_paths()["purelib"]
    (site / LAYER).write_text(f"import site; site.addsitedir({harness!r})\n")
    (venv / SOURCE).write_text(str(candidate_dir.resolve()))
    (venv / READY).write_text(f"layered on {harness}\n")
    return str(python)


def prune(folder: Path) -> list[Path]:
    """Remove the candidate venvs whose package folder is gone (a scratch run's, a deleted worktree's): one is
    made per package path, and they would pile up. A venv still being made has no SOURCE yet and is left."""
    removed = []
    for venv in folder.iterdir() if folder.is_dir() else []:
        source = venv / SOURCE
        try:
            gone = source.is_file() and not Path(source.read_text().strip()).exists()
        except OSError:
            continue
        if gone:
            shutil.rmtree(venv, ignore_errors=True)
            removed.append(venv)
    return removed


def child_python(candidate_dir: Path) -> str:
    """The interpreter the candidate's child runs: its venv's once installed there, else the harness's (a package
    the person installed into the harness's venv, `candidate.install = false`)."""
    python = python_of(candidate_dir)
    return str(python) if (venv_dir(candidate_dir) / READY).is_file() and python.exists() else sys.executable


def child_paths(candidate_dir: Path) -> list[Path]:
    """What the sandbox shows read-only for the child's interpreter: the candidate's venv, when it runs that."""
    venv = venv_dir(candidate_dir)
    return [venv] if child_python(candidate_dir) != sys.executable else []


def missing(requirements: list[str] | tuple[str, ...]) -> list[str]:
    """Those of `requirements` the harness's venv does not satisfy (what the layer cannot give)."""
    needed = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            needed.append(text)  # uv says what is wrong with it
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            needed.append(text)
            continue
        if req.extras or req.url or not req.specifier.contains(version, prereleases=True):
            needed.append(text)
    return needed


def harness_constraints(into: Path) -> Path:
    """A constraints file pinning every distribution of the harness's venv to its version."""
    pins = sorted({f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
                   if dist.metadata["Name"] and not (dist.read_text("direct_url.json") or "").strip()})
    into.write_text("\n".join(pins) + "\n")
    return into
