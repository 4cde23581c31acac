"""The harness's venv as setup left it: a seal written at setup, checked before anything trusts the venv.

A candidate's build backend once ran unconfined at install and dropped a `.pth` into the
harness's site-packages; Python runs a `.pth`'s `import` lines at every start, so each later
`autoenv eval` ran the candidate's code in the process that holds the key and writes the
ledger (it recorded a `keep` with 17 failed gates). A process started from that venv cannot
vouch for itself, so this check is standard library only and runs as a file in an
interpreter started with `-I -S` (no site-packages, no `.pth` run): `evaluate.sh` runs it
before `autoenv eval` starts, and `autoenv eval` and `autoenv verify` run it the same way.

The seal lists site-packages' top-level entries, with a hash of each `.pth` file and
top-level module. A change is: a `.pth` or top-level module (`.py`, `.so`, a package folder)
that was not there or whose content differs, a new `*.dist-info` that declares entry points
(plugins that frameworks load), and a `sitecustomize`/`usercustomize` anywhere a `.pth`
line leads. What AutoEnv's own install step put there after checking it (the candidate's
distribution and its dependencies, autoenv.sandbox.install) is admitted into the seal.

    python -I -S autoenv/core/venvseal.py check|seal VENV
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SEAL_NAME = "autoenv-seal.json"
LOCK_NAME = "autoenv-seal.lock"
CHECK_SECONDS = 120
STARTUP_HOOKS = ("sitecustomize", "usercustomize")
MODULE_SUFFIXES = (".py", ".so", ".pyd", ".pth")


@contextmanager
def locked(venv: Path, exclusive: bool) -> Iterator[None]:
    """The seal's lock: an install holds it exclusively from before it writes to after `admit`, a check shared,
    so a check never sees an install half done (parallel runs share the venv)."""
    with open(venv / LOCK_NAME, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def site_packages(venv: Path) -> list[Path]:
    """The venv's site-packages folders (lib and lib64, any Python version)."""
    found: list[Path] = []
    for lib in ("lib", "lib64"):
        for folder in sorted((venv / lib).glob("python*/site-packages")):
            if folder.resolve() not in [f.resolve() for f in found]:
                found.append(folder)
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _entry(path: Path) -> str:
    """What the seal keeps of one top-level entry: a hash for files that run, else its kind."""
    if path.is_dir():
        return "dir:" + _tree_digest(path)
    if path.name.endswith(MODULE_SUFFIXES):
        return _digest(path)
    return "file"


def _tree_digest(folder: Path) -> str:
    """A digest of the code files under `folder`: their paths, sizes and modification times (no reads: fast)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(MODULE_SUFFIXES):
                stat = os.lstat(os.path.join(root, name))
                digest.update(f"{os.path.relpath(os.path.join(root, name), folder)}\0{stat.st_size}\0"
                              f"{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


def _ignored(name: str) -> bool:
    return name == "__pycache__" or name.endswith(".tmp")


def snapshot(venv: Path) -> dict[str, str]:
    """{"<site-packages>/<name>": kind or hash} for every top-level entry of every site-packages folder."""
    shot: dict[str, str] = {}
    for folder in site_packages(venv):
        for path in sorted(folder.iterdir()):
            if not _ignored(path.name):
                shot[f"{folder.relative_to(venv)}/{path.name}"] = _entry(path)
    return shot


def seal(venv: Path) -> Path:
    """Write the seal of `venv` as it is now; return its path."""
    path = venv / SEAL_NAME
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps({"entries": snapshot(venv)}, indent=0, sort_keys=True))
    os.replace(temp, path)
    return path


def admit(venv: Path, before: dict[str, str]) -> list[str]:
    """Take into the seal what changed in `venv` since the snapshot `before` (what AutoEnv's own install put
    there after checking it); return the names admitted. A venv without a seal is left so."""
    path = venv / SEAL_NAME
    if not path.is_file():
        return []
    entries = json.loads(path.read_text())["entries"]
    now = snapshot(venv)
    changed = [name for name in {*before, *now} if before.get(name) != now.get(name)]
    for name in changed:
        if name in now:
            entries[name] = now[name]
        else:
            entries.pop(name, None)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps({"entries": entries}, indent=0, sort_keys=True))
    os.replace(temp, path)
    return sorted(changed)


def _pth_paths(pth: Path) -> list[Path]:
    """The folders a `.pth` file's path lines add to sys.path."""
    paths = []
    for line in pth.read_text(errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "import ", "import\t")):
            paths.append((pth.parent / line).resolve())
    return paths


def changes(venv: Path) -> list[str]:
    """What differs from the seal, one line each; a venv without a seal says so in one line."""
    path = venv / SEAL_NAME
    if not path.is_file():
        return [f"{venv} has no seal ({SEAL_NAME}): it was set up before AutoEnv sealed its venv"]
    sealed: dict[str, str] = json.loads(path.read_text())["entries"]
    found = []
    for name, now in snapshot(venv).items():
        before = sealed.get(name)
        full = venv / name
        if before == now:
            continue
        if name.endswith(".pth"):
            found.append(f"{full}: a .pth file {'changed' if before else 'added'} since setup "
                         "(Python runs its import lines at every start)")
        elif name.endswith(".dist-info"):
            if before is None and (full / "entry_points.txt").is_file():
                found.append(f"{full}: a distribution with entry points added since setup (plugins frameworks load)")
        elif now.startswith("dir:") and not name.endswith((".dist-info", ".egg-info", ".data")):
            if before is not None:
                found.append(f"{full}: code in this package changed since setup")
            elif any(full.glob("*.py")) or any(full.glob("*.so")):
                found.append(f"{full}: a top-level package added since setup")
        elif name.endswith(MODULE_SUFFIXES):
            found.append(f"{full}: a top-level module {'changed' if before else 'added'} since setup")
    for folder in site_packages(venv):
        for pth in sorted(folder.glob("*.pth")):
            for added in _pth_paths(pth):
                for hook in STARTUP_HOOKS:
                    if (added / f"{hook}.py").is_file() or (added / hook).is_dir():
                        found.append(f"{added / hook}: a {hook} module on a path {pth.name} adds "
                                     "(Python imports it at every start)")
    return found


def check_from_outside(venv: Path | None = None) -> list[str] | None:
    """`changes` of `venv` (default: this interpreter's), computed by a fresh interpreter that runs no `.pth`
    (`-I -S`), under the shared lock; None when the venv has no seal."""
    venv = Path(venv or sys.prefix)
    if not (venv / SEAL_NAME).is_file():
        return None
    proc = subprocess.run([sys.executable, "-I", "-S", __file__, "check", str(venv)], capture_output=True,
                          text=True, timeout=CHECK_SECONDS, check=False)
    if proc.returncode not in (0, 1):
        return [f"the venv check could not run (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"]
    return proc.stdout.splitlines()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("check", "seal"):
        print("usage: python -I -S venvseal.py check|seal VENV", file=sys.stderr)
        return 2
    venv = Path(argv[1])
    if argv[0] == "seal":
        seal(venv)
        return 0
    if not (venv / SEAL_NAME).is_file():
        print(f"{venv} has no seal ({SEAL_NAME}); bash setup.sh writes it", file=sys.stderr)
        return 0
    with locked(venv, exclusive=False):
        found = changes(venv)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
