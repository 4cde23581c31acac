"""Files that are scripts, not modules: PEP 723 headers and `uv run` shebangs.

Environments ship such files to run with their own dependencies (`uv run --script`, or
verifiers' `runtime.run_uv_script` inside the rollout's runtime). Importing one as a module
fails on those dependencies, or runs its top-level code, and says nothing about the
environment: the audit lists them as scripts instead, and the sandbox lets uv write its
cache when a package ships one (uv locks and fills it when it prepares the script).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
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


BLOCKED = re.compile(r"dns error|failed to lookup address|Temporary failure in name resolution|"
                     r"Name or service not known|Network is unreachable|Failed to fetch: (\S+)", re.I)
PREPARE_SECONDS = 300


def shipped(directory: Path, limit: int = 2000) -> list[Path]:
    """The PEP 723 scripts with dependencies among a package directory's first `limit` Python files."""
    found: list[Path] = []
    for seen, path in enumerate(sorted(directory.rglob("*.py")) if directory.is_dir() else []):
        if seen >= limit:
            break
        if SKIPPED_DIRS & set(path.relative_to(directory).parts):
            continue
        text = path.read_text(errors="replace")
        if SCRIPT_HEADER.search(text) and re.search(r"^#\s*dependencies\s*=", text, re.M):
            found.append(path)
    return found


def prepare(directory: Path, scripts_dir: Path, uv: str) -> list[str]:
    """Resolve the dependencies of the package's shipped scripts into uv's cache, with the network, before the
    sandbox (which has none) starts: each script is written where verifiers' subprocess runtime writes it
    (`<scripts_dir>/<sha256>.py`, `runtime.prepare_uv_script`), locked (`uv lock --script`: a lock beside the
    script lets the sync inside the sandbox go without the index) and synced. Returns what could not be
    prepared, each naming the script and uv's own last words."""
    problems = []
    for script in shipped(directory):
        data = script.read_bytes()
        target = scripts_dir / f"{hashlib.sha256(data).hexdigest()}.py"
        scripts_dir.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
        for step in (["lock", "--script", str(target), "-q", "--no-config"],
                     ["sync", "--script", str(target), "-q", "--no-config"]):
            try:
                proc = subprocess.run([uv, *step], capture_output=True, text=True, timeout=PREPARE_SECONDS,
                                      check=False)
            except (OSError, subprocess.TimeoutExpired) as e:
                problems.append(f"{script.name}: uv {step[0]} could not run ({e})")
                break
            if proc.returncode != 0:
                said = (proc.stderr or proc.stdout).strip().splitlines()
                last = said[-1] if said else f"exit {proc.returncode}"
                problems.append(f"{script.name}: `uv {step[0]} --script` failed: {last}")
                break
    return problems


def blocked(message: str) -> str | None:
    """What the sandbox blocked, said plainly, when an error is a network failure inside it (uv resolving a
    script's dependencies at PyPI, a reward fetching a URL), else None."""
    found = BLOCKED.search(message or "")
    if not found:
        return None
    url = next((m.group(1) for m in BLOCKED.finditer(message) if m.group(1)), None)
    return ("the sandbox blocked network access" + (f" to {url}" if url else "")
            + ": the candidate's code runs with no network (loopback only). A shipped PEP 723 script's dependencies "
            "are resolved into uv's cache before the sandbox starts; one that still needs the network here (a "
            "script written at run time, an index other than PyPI) cannot run offline. Ship the script as a file "
            "in the package, or run with AUTOENV_SANDBOX=none to confirm that the sandbox is the cause")
