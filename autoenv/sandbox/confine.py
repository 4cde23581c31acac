"""Where candidate processes run: a bubblewrap sandbox when it works on this machine, else unconfined.

The candidate's code (its import, its rewards, its tools) runs in the evaluation's child
process; unconfined, it once appended a forged `keep` entry to feedback_log.jsonl with a
correct hash. In the sandbox the whole file system is read-only, /tmp and $HOME are empty
private folders (the Python install, the venv, the repository, uv's cache and verifiers'
prepared programs shown read-only; verifiers' per-rollout folders land in the private $HOME), and only the evaluation's own output folder and the candidate's existing
build folders are writable. Processes, IPC, users and the network get their own
namespaces, and the sandbox dies with the harness: with verifiers' subprocess runtime and
the in-process harness the child has loopback only (its embedded endpoint, its tool
servers) and reaches real models through the harness's forwarder over a Unix socket
(autoenv.sandbox.forwarder.relay). The other runtimes drive a daemon or a cloud from the child, and
the stock harness's `uv run` resolves packages at PyPI (and locks uv's cache, writable
then), so those share the network (no key in it). A candidate that ships PEP 723 scripts with
dependencies (a reward that runs `runtime.run_uv_script`) has them locked and synced into uv's
cache here, with the network, before a sandbox without one starts (`prepare_scripts`).

Without bwrap, or where it cannot create namespaces (some containers), or with
AUTOENV_SANDBOX=none, the candidate runs unconfined: the evaluation says so once and
records `sandbox: none` in its entry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from autoenv.sandbox.engines import masked_sockets
from autoenv.core.job import Job
from autoenv.core.paths import PROJECT
from autoenv.sandbox.scripts import prepare, ships_scripts

SANDBOX_VAR = "AUTOENV_SANDBOX"
BUILD_DIRS = ("build", "dist")
PROBE_SECONDS = 20
NAMESPACES = ["--unshare-all", "--die-with-parent", "--new-session"]
# verifiers' own subprocess runtime needs no network beyond loopback; the others reach
# their daemon or cloud from the child.
OFFLINE_RUNTIMES = ("subprocess",)


@dataclass(frozen=True)
class Sandbox:
    """`kind` is "bwrap" or "none"; `reason` says why none."""

    kind: str
    reason: str = ""
    binary: str = ""

    def wrap(self, cmd: list[str], readable: Iterable[Path], writable: Iterable[Path], network: bool = True,
             persist: bool = False) -> list[str]:
        """`cmd` run inside the sandbox: `readable` shown read-only, `writable` read-write;
        without `network`, a network namespace of its own (loopback only). A `persist`ing sandbox
        (the warm child's server, autoenv.sandbox.warmchild) outlives the process that started it."""
        if self.kind != "bwrap":
            return cmd
        args = [self.binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        home = Path.home()
        if home != Path("/") and home.is_dir():
            args += ["--tmpfs", str(home)]
        for path in [*runtime_paths(), *readable]:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        for path in writable:
            path.mkdir(parents=True, exist_ok=True)
            args += ["--bind", str(path), str(path)]
        files, folders = masked_sockets()  # an engine's socket is root on the host (autoenv.containers.guard)
        for folder in folders:
            args += ["--tmpfs", str(folder)]
        for file in files:
            args += ["--ro-bind", "/dev/null", str(file)]
        namespaces = [n for n in NAMESPACES if not (persist and n == "--die-with-parent")]
        return [*args, *namespaces, *([] if not network else ["--share-net"]), "--", *cmd]


def runtime_paths() -> list[Path]:
    """What the child needs to see wherever it lives (under $HOME or /tmp): Python, the venv,
    AutoEnv's source, uv and the caches verifiers prepares its programs in."""
    paths = [Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent, PROJECT]
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:
        paths.append(Path(uv).resolve().parent)
    paths.append(uv_cache())
    paths.append(cache_home() / "autoenv" / "openenv-servers")  # OpenEnv servers' venvs (autoenv.sandbox.serverenv)
    return [p.resolve() for p in paths]


def uv_cache() -> Path:
    return Path(os.environ.get("UV_CACHE_DIR") or cache_home() / "uv")


def cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


# Where a remote runtime's client keeps its login, under $HOME (shown read-only when it is the runtime).
RUNTIME_FILES = {"modal": (".modal.toml",), "prime": (".prime",)}


def runtime_files(job: Job) -> list[Path]:
    return [Path.home() / name for name in RUNTIME_FILES.get(job.runtime.type, ())]


def writable_paths(job: Job) -> list[Path]:
    """The evaluation's output folder, the candidate's build folders that exist, the forwarder's socket."""
    candidate_dir = Path(job.candidate_dir)
    # The stock harness rewrites verifiers' prepared chat program before each rollout and
    # runs it with `uv run`, which locks uv's cache: both writable (no overlay in bwrap 0.8).
    # A package that ships uv scripts runs them in the rollout's runtime (`runtime.run_uv_script`), and uv
    # locks and fills its cache preparing them: writable as well.
    scripts = [cache_home() / "verifiers" / "runtimes" / "scripts", uv_cache()] \
        if job.runtime.harness == "stock" or ships_scripts(candidate_dir) else []
    return [job.out, *(candidate_dir / d for d in BUILD_DIRS if (candidate_dir / d).is_dir()),
            *([Path(job.forward_socket).parent] if job.forward_socket else []), *scripts,
            *([Path(job.share_dir), Path(job.engine_socket).parent] if job.share_dir else [])]


SCRIPTS_FILE = "scripts.json"


def prepare_scripts(job: Job) -> list[str]:
    """Before a sandbox without network starts: the candidate's shipped PEP 723 scripts resolved into uv's cache
    where verifiers' subprocess runtime looks for them (autoenv.sandbox.scripts.prepare); what failed goes to
    scripts.json in the output folder, for the gates to name."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    candidate_dir = Path(job.candidate_dir)
    if uv is None or not ships_scripts(candidate_dir):
        return []
    problems = prepare(candidate_dir, cache_home() / "verifiers" / "runtimes" / "scripts", uv)
    if problems:
        job.out.mkdir(parents=True, exist_ok=True)
        (job.out / SCRIPTS_FILE).write_text(json.dumps({"unprepared": problems}, indent=1))
    return problems


def needs_network(job: Job) -> bool:
    """A runtime other than verifiers' subprocess one (docker, modal, prime, e2b) reaches out,
    and so does the stock harness (`uv run` resolves its chat program's packages at PyPI)."""
    return job.runtime.type not in OFFLINE_RUNTIMES or job.runtime.harness == "stock"


def repository_of(path: Path) -> Path:
    """The git work tree holding `path` (shown read-only: config.toml, spec.md, the ledger), or its parent."""
    path = path.resolve()
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return path.parent


def choose() -> Sandbox:
    """The sandbox for this evaluation: bwrap when it works here, unless AUTOENV_SANDBOX=none."""
    wanted = os.environ.get(SANDBOX_VAR, "").strip().lower()
    if wanted == "none":
        return Sandbox("none", f"{SANDBOX_VAR}=none")
    return _probe()


@cache
def _probe() -> Sandbox:
    """Try bwrap once per process: installed is not enough, a container may forbid namespaces."""
    binary = shutil.which("bwrap")
    if binary is None:
        return Sandbox("none", "bubblewrap (bwrap) is not installed; bash setup.sh installs it where apt-get is available")
    try:
        proc = subprocess.run([binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *NAMESPACES,
                               "--", "true"], capture_output=True, text=True, timeout=PROBE_SECONDS,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Sandbox("none", f"bwrap could not start a sandbox: {e}")
    if proc.returncode != 0:
        said = (proc.stderr or "").strip().splitlines()
        return Sandbox("none", f"bwrap cannot create namespaces here ({said[-1] if said else f'exit {proc.returncode}'}); "
                       "allow unprivileged user namespaces or run in a container that permits them")
    return Sandbox("bwrap", binary=binary)
