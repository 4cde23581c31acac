"""Files that are scripts, not modules: PEP 723 headers and `uv run` shebangs.

Environments ship such files to run with their own dependencies (`uv run --script`, or
verifiers' `runtime.run_uv_script` inside the rollout's runtime). Importing one as a module
fails on those dependencies, or runs its top-level code, and says nothing about the
environment: the audit lists them as scripts instead. uv's cache is read-only in the sandbox
(a script once wrote into it, beside the build backends later installs run unconfined), so
each script a rollout will run on this machine (the package's own, and the stock harness's
chat program) is locked and synced here, before the sandbox starts (`prepare`): inside, the
lock beside it lets `uv sync --script` find everything already in place.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from autoenv.core.cachedir import cache_root

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
    """The package's shipped scripts prepared (`prepare_files`)."""
    return prepare_files(((script.name, script.read_bytes()) for script in shipped(directory)), scripts_dir, uv)


def lock_of(data: bytes, scripts_dir: Path) -> Path:
    """The lock beside the script verifiers' subprocess runtime writes for `data` (`<sha256>.py`)."""
    return scripts_dir / f"{hashlib.sha256(data).hexdigest()}.py.lock"


def prepare_files(scripts: Iterable[tuple[str, bytes]], scripts_dir: Path, uv: str) -> list[str]:
    """Resolve the dependencies of `scripts` (name, text) into uv's cache, with the network, before the sandbox
    (where the cache is read-only) starts: each script is written where verifiers' subprocess runtime writes it
    (`<scripts_dir>/<sha256>.py`, `runtime.prepare_uv_script`), locked (`uv lock --script`: a lock beside the
    script lets the sync inside the sandbox go without the index) and synced. Returns what could not be
    prepared, each naming the script and uv's own last words."""
    problems = []
    for name, data in scripts:
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
                problems.append(f"{name}: uv {step[0]} could not run ({e})")
                break
            if proc.returncode != 0:
                said = (proc.stderr or proc.stdout).strip().splitlines()
                last = said[-1] if said else f"exit {proc.returncode}"
                problems.append(f"{name}: `uv {step[0]} --script` failed: {last}")
                break
    return problems


CHAT_PROGRAM = "verifiers.v1.harnesses.utils.launch"
READ_SECONDS = 120


def chat_program(python: str = sys.executable) -> tuple[str, bytes]:
    """The stock harness's chat program (verifiers' CHAT_PROGRAM_SOURCE, which it runs with uv), read by `python`
    (the child's interpreter) once per interpreter and verifiers install, and kept in AutoEnv's cache: the harness
    does not import verifiers itself."""
    dist = importlib.metadata.distribution("verifiers")
    source = Path(str(dist.locate_file(CHAT_PROGRAM.replace(".", "/") + ".py")))
    st = source.stat()
    key = hashlib.sha256(f"{python} {dist.version} {st.st_size} {st.st_mtime_ns}".encode()).hexdigest()[:16]
    kept = cache_root() / "sandbox" / f"chat-program-{dist.version}-{key}.py"
    if not kept.is_file():
        code = f"import sys; from {CHAT_PROGRAM} import CHAT_PROGRAM_SOURCE as s; sys.stdout.buffer.write(s.encode())"
        proc = subprocess.run([python, "-c", code], capture_output=True, timeout=READ_SECONDS, check=True)
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(".partial")
        partial.write_bytes(proc.stdout)
        partial.replace(kept)
    return "the stock harness's chat program", kept.read_bytes()


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
