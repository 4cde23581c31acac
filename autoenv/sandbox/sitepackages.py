"""What a package's confined build left in site-packages beyond its own distribution.

The sandboxed build may write site-packages (that is where an install goes), and a build can put
anything there: a hatchling `force-include` ships a `.pth` that every later Python run of the venv
executes, a build hook writes a top-level module or rewrites another package's file. The install
takes a snapshot before the build and compares after it: the package's own distribution is its
dist-info folder and the editable hook its backend writes (`_editable_impl_<name>.pth`, `_<name>.pth`,
`<name>.pth`, setuptools' `__editable__.<name>-<version>.pth` and finder), each hook's lines paths into
the package or the import of its own finder (and, installed as a wheel, its own import package); anything
else new, changed or gone is foreign.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

Snapshot = dict[str, tuple[int, int, int]]  # path under site-packages -> (mtime_ns, size, inode)
CUSTOMIZE = ("sitecustomize.py", "usercustomize.py")  # imported at every start from any path a .pth adds


def snapshot(site: Path) -> Snapshot:
    """Every file (and link) under `site`, __pycache__ included: a forged .pyc runs as its source would."""
    found: Snapshot = {}
    for root, dirs, files in os.walk(site):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            st = os.lstat(path)
            found[os.path.relpath(path, site)] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return found


def hook_modules(module: str) -> re.Pattern[str]:
    """The editable hooks' module names (without suffix) the backends write for distribution `module`."""
    m = re.escape(module)
    return re.compile(rf"(_editable_impl_{m}|_{m}|{m}|__editable__\.{m}-[\w.+]+|__editable___{m}_[\w]+_finder)",
                      re.IGNORECASE)


def is_own(rel: str, module: str) -> bool:
    """Whether `rel` (a path under site-packages) belongs to distribution `module`'s install."""
    parts = Path(rel).parts
    if re.fullmatch(rf"{re.escape(module)}-[^/]+\.dist-info", parts[0], re.IGNORECASE):
        return True
    if len(parts) > 1 and parts[0].lower() == module.lower():  # its own import package (a non-editable install)
        return True
    hooks = hook_modules(module)
    if len(parts) == 1:
        stem, _, suffix = parts[0].rpartition(".")
        return suffix in ("pth", "py") and bool(hooks.fullmatch(stem))
    if len(parts) == 2 and parts[0] == "__pycache__":
        return bool(re.fullmatch(rf"{hooks.pattern}\.[\w-]+\.pyc", parts[1], re.IGNORECASE))
    return False


def foreign(before: Snapshot, after: Snapshot, module: str) -> list[str]:
    """Paths new, changed or removed between the snapshots that are not distribution `module`'s own."""
    changed = {p for p in after if before.get(p) != after[p]} | (before.keys() - after.keys())
    return sorted(p for p in changed if not is_own(p, module))


def hook_problems(site: Path, module: str, package: Path) -> list[str]:
    """What the package's own editable hooks do beyond adding the package to sys.path or importing its finder."""
    hooks, problems = hook_modules(module), []
    package = package.resolve()
    for pth in sorted(site.glob("*.pth")):
        if not is_own(pth.name, module):
            continue
        for number, line in enumerate(pth.read_text(errors="replace").splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith(("import ", "import\t")):
                called = re.fullmatch(r"import\s+([\w.]+)\s*(;\s*\1\.install\(\)\s*)?", line)
                if called is None or not hooks.fullmatch(called.group(1)):
                    problems.append(f"{pth.name}:{number} runs code at every start ({line[:80]})")
                continue
            folder = Path(line).resolve()
            if not folder.is_relative_to(package):
                problems.append(f"{pth.name}:{number} adds {folder}, outside the package {package}, to sys.path")
            problems += [f"{pth.name}:{number} adds {folder / name}, which every Python start imports"
                         for name in CUSTOMIZE if (folder / name).exists()]
    return problems


def remove_new(site: Path, before: Snapshot, paths: list[str]) -> list[str]:
    """Delete those of `paths` the build created (a changed file cannot be put back); return what was removed."""
    removed = []
    for rel in paths:
        if rel in before:
            continue
        path = site / rel
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        else:
            continue
        removed.append(rel)
        parent = path.parent  # folders the build created and left empty go too
        while parent != site and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return removed
