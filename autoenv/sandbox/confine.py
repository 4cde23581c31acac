"""Where candidate processes run: a bubblewrap sandbox when it works on this machine, else unconfined.

The candidate's code (its import, its rewards, its tools) runs in the evaluation's child
process; unconfined, it once appended a forged `keep` entry to feedback_log.jsonl with a
correct hash. The sandbox once showed the whole file system read-only, as uid 0: a candidate
read /etc/shadow, other checkouts and their .git/config, and credential files outside $HOME.
Now it shows only what the child needs (`Sandbox.wrap`): the system's programs and libraries
(/usr and its /bin, /lib links), a few files of /etc (name resolution, certificates, time
zone, the loader's cache; a passwd of two users), the Python install, the venv, AutoEnv's
source, the repository, and uv's and verifiers' caches; /tmp and $HOME are empty private
folders (verifiers' per-rollout folders land in the private $HOME), and only the evaluation's
own output folder and the candidate's existing build folders are writable. The child runs as
an unprivileged user (uid 65534, which the kernel maps to the harness's own user for the
folders it may write). Processes, IPC, users and the network get their own namespaces, and
the sandbox dies with the harness: with verifiers' subprocess runtime and the in-process
harness the child has loopback only (its embedded endpoint, its tool servers) and reaches real
models through the harness's forwarder over a Unix socket (autoenv.sandbox.forwarder.relay).
The other runtimes drive a daemon or a cloud from the child, and the stock harness shares the
network too (no key in it).

uv's cache is read-only inside: a script a candidate shipped once made it writable, and with it
the build backends later installs run outside the sandbox. The sandbox gets a private, empty
cache root (uv's lock files) with the shared cache's folders shown read-only in it. The scripts
this evaluation runs (the candidate's PEP 723 scripts, the stock harness's chat program) are
locked and synced into the shared cache here, with the network, before the sandbox starts
(`prepare_scripts`); their locks are shown in verifiers' scripts folder in the private $HOME,
so that `uv sync --script` inside finds everything in place.

Without bwrap, or where it cannot create namespaces (some containers), or with
AUTOENV_SANDBOX=none, the candidate runs unconfined: the evaluation says so once and
records `sandbox: none` in its entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from autoenv.core.cachedir import cache_root
from autoenv.core.job import Job
from autoenv.core.paths import PROJECT
from autoenv.sandbox.candidatevenv import child_python
from autoenv.sandbox.engines import masked_sockets
from autoenv.sandbox.environ import CA_VARIABLES
from autoenv.sandbox.trust import trust_root
from autoenv.sandbox.scripts import chat_program, lock_of, prepare_files, shipped

SANDBOX_VAR = "AUTOENV_SANDBOX"
BUILD_DIRS = ("build", "dist")
PROBE_SECONDS = 20
NAMESPACES = ["--unshare-all", "--die-with-parent", "--new-session"]
# verifiers' own subprocess runtime needs no network beyond loopback; the others reach
# their daemon or cloud from the child.
OFFLINE_RUNTIMES = ("subprocess",)


SANDBOX_UID = 65534  # "nobody": the child's user inside, the harness's own user outside (the user namespace's map)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "services", "protocols", "localtime",
             "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl/certs", "ssl/openssl.cnf",
             "pki/tls/certs", "pki/ca-trust/extracted", "mime.types", "os-release")
"""What of /etc the child's programs read (Python, git, uv, node, the docker CLI: name resolution, TLS, the time
zone, the loader); /etc/passwd and /etc/group are the sandbox's own (`users_files`)."""
PROGRAM_ROOTS = (Path("/opt"),)  # folders on PATH under these are shown too (programs installed outside /usr)


@dataclass(frozen=True)
class Sandbox:
    """`kind` is "bwrap" or "none"; `reason` says why none. `user`: the child runs as SANDBOX_UID in a user namespace
    of its own (False where this machine forbids one: then uid 0 without capabilities, as root)."""

    kind: str
    reason: str = ""
    binary: str = ""
    user: bool = True

    def wrap(self, cmd: list[str], readable: Iterable[Path], writable: Iterable[Path], network: bool = True,
             persist: bool = False) -> list[str]:
        """`cmd` run inside the sandbox: only the system (`system_view`), the runtime (`runtime_paths`) and
        `readable` shown, read-only; `writable` read-write; without `network`, a network namespace of its own
        (loopback only). A `persist`ing sandbox (the warm child's server, autoenv.sandbox.warmchild) outlives the
        process that started it."""
        if self.kind != "bwrap":
            return cmd
        args = [self.binary, *(["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)] if self.user
                               else ["--cap-drop", "ALL"])]
        mounts: list[tuple[Path, list[str]]] = [(Path("/dev"), ["--dev", "/dev"]), (Path("/proc"), ["--proc", "/proc"]),
                                                (Path("/tmp"), ["--tmpfs", "/tmp"])]
        home = Path.home()
        if home != Path("/"):
            mounts.append((home, ["--tmpfs", str(home)]))
        links, shown = system_view()
        for link, target in links:
            args += ["--symlink", target, str(link)]
        shown += [*runtime_paths(), *(ca_files() if network else []), *readable]
        mounts += [(path, ["--ro-bind", str(path), str(path)]) for path in shown if path.exists()]
        mounts += [(target, ["--ro-bind", str(source), str(target)]) for source, target in users_files(home)]
        mounts += private_views()
        for path in writable:
            path.mkdir(parents=True, exist_ok=True)
            mounts.append((path, ["--bind", str(path), str(path)]))
        for _, mount in sorted(mounts, key=lambda m: len(m[0].parts)):  # a folder before what is shown inside it
            args += mount
        bound = [path for path, mount in mounts if mount[0] in ("--ro-bind", "--ro-bind-try", "--bind")]
        files, folders = masked_sockets()  # an engine's socket is root on the host (autoenv.containers.guard)
        for folder in folders:
            if any(folder.is_relative_to(b) or b.is_relative_to(folder) for b in bound):
                args += ["--tmpfs", str(folder)]
        for file in files:
            if any(file.is_relative_to(b) for b in bound):
                args += ["--ro-bind", "/dev/null", str(file)]
        namespaces = [n for n in NAMESPACES if not (persist and n == "--die-with-parent")]
        return [*args, *namespaces, *([] if not network else ["--share-net"]), "--", *cmd]


def system_view() -> tuple[list[tuple[Path, str]], list[Path]]:
    """The system's programs and libraries: (links to recreate, e.g. /bin -> usr/bin; folders to show read-only):
    SYSTEM_DIRS as they are here, /etc's ETC_FILES, and folders on PATH under PROGRAM_ROOTS."""
    links, shown = [], []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            links.append((path, os.readlink(path)))
        elif path.is_dir():
            shown.append(path)
    shown += [Path("/etc") / name for name in ETC_FILES]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        folder = Path(entry).resolve() if entry else None
        if folder is not None and folder.is_dir() and any(folder.is_relative_to(root) for root in PROGRAM_ROOTS):
            shown.append(folder)
    return links, shown


def users_files(home: Path) -> list[tuple[Path, Path]]:
    """(file in AutoEnv's cache, where the sandbox shows it): a passwd and group naming root and the sandbox's user
    (whose home is the private $HOME), so that programs that look the user up (git, getpass) find it, and the
    machine's own accounts stay out of sight."""
    files = {"passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                       f"nobody:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{home}:/usr/sbin/nologin\n",
             "group": f"root:x:0:\nnogroup:x:{SANDBOX_UID}:\n"}
    folder = cache_root() / "sandbox" / "etc"
    made = []
    for name, text in files.items():
        path = folder / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
        if not path.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            partial.write_text(text)
            partial.replace(path)
        made.append((path, Path("/etc") / name))
    return made


def ca_files() -> list[Path]:
    """The certificate bundles the environment names (public), for a child with the network: /etc/ssl is shown
    anyway; a bundle kept elsewhere is shown where it is."""
    return [Path(os.environ[name]) for name in CA_VARIABLES if os.environ.get(name) and Path(os.environ[name]).is_file()]


def runtime_paths() -> list[Path]:
    """What the child needs to see wherever it lives (under $HOME or /tmp): Python, the venv, AutoEnv's source
    (its package, not its checkout), uv, the OpenEnv servers' venvs and the certificates' hashed folders (public:
    autoenv.sandbox.trust)."""
    paths = [Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent,
             PROJECT / "autoenv", PROJECT / "autoenv_inprocess.py"]
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:
        paths.append(Path(uv).resolve().parent)
    paths.append(cache_home() / "autoenv" / "openenv-servers")  # OpenEnv servers' venvs (autoenv.sandbox.serverenv)
    paths.append(trust_root())
    return [p.resolve() for p in paths]


# uv writes what it learns of an interpreter on every run (`uv run --script` inspects the first python on PATH):
# left private (empty, writable, thrown away), never the shared cache's. A fresh machine had no entry for the
# child's interpreter yet, and a read-only one failed every uv script ("Read-only file system ... interpreter-v5").
PRIVATE_CACHE_FOLDERS = ("interpreter-v",)


def private_views() -> list[tuple[Path, list[str]]]:
    """uv's cache as the sandbox sees it: a private, empty root (uv writes its lock files there) with each folder of
    the shared cache shown read-only in it. (verifiers' scripts folder is in the private $HOME, with the locks of
    the scripts an evaluation runs shown in it: `script_locks`.)"""
    cache = uv_cache()
    if not cache.is_dir():
        return []
    # a concurrent uv (another evaluation, a person's `uv pip`) writes through temporary folders (`.tmpXXXX`) that
    # vanish between this listing and bwrap's mount: those are never shown, and every folder is bound "if it still
    # exists" (--ro-bind-try), so a cache that changes meanwhile never fails the sandbox's start
    return [(cache, ["--tmpfs", str(cache)]),
            *((folder, ["--ro-bind-try", str(folder), str(folder)])
              for folder in sorted(cache.iterdir()) if folder.is_dir() and not folder.is_symlink()
              and not folder.name.startswith((*PRIVATE_CACHE_FOLDERS, ".tmp")))]


def private_folders() -> list[Path]:
    """The private root of `private_views` (the warm server empties it after each child, as /tmp and $HOME)."""
    return [uv_cache()]


def uv_cache() -> Path:
    return Path(os.environ.get("UV_CACHE_DIR") or cache_home() / "uv")


def cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def scripts_dir() -> Path:
    """Where verifiers' subprocess runtime writes the PEP 723 scripts it prepares (verifiers.v1.utils.paths: under
    ~/.cache, whatever XDG_CACHE_HOME says)."""
    return Path.home() / ".cache" / "verifiers" / "runtimes" / "scripts"


# Where a remote runtime's client keeps its login, under $HOME (shown read-only when it is the runtime).
RUNTIME_FILES = {"modal": (".modal.toml",), "prime": (".prime",)}


def runtime_files(job: Job) -> list[Path]:
    """What of the job's own the sandbox shows besides the repository: a remote runtime's login file, and the locks
    of the scripts prepared for it (`script_locks`)."""
    return [*(Path.home() / name for name in RUNTIME_FILES.get(job.runtime.type, ())), *script_locks(job)]


def writable_paths(job: Job) -> list[Path]:
    """The evaluation's output folder, the candidate's build folders that exist, the forwarder's socket, a container
    runtime's share folder and guard. (uv's cache is a private view, `private_views`; verifiers' scripts folder is in
    the private $HOME.)"""
    candidate_dir = Path(job.candidate_dir)
    # a link is never shown writable: bwrap would mount what it points to (`dist -> ..`: the repository, .git/)
    return [job.out, *(candidate_dir / d for d in BUILD_DIRS
                       if (candidate_dir / d).is_dir() and not (candidate_dir / d).is_symlink()),
            *([Path(job.forward_socket).parent] if job.forward_socket else []),
            *([Path(job.share_dir), Path(job.engine_socket).parent] if job.share_dir else [])]


SCRIPTS_FILE = "scripts.json"


def runs_scripts_here(job: Job) -> bool:
    """Whether the job's rollouts run uv scripts on this machine: verifiers' subprocess runtime (a container or cloud
    runtime prepares them inside itself)."""
    return job.runtime.type in OFFLINE_RUNTIMES


def job_scripts(job: Job) -> list[tuple[str, bytes]]:
    """The uv scripts the job's rollouts run here: the candidate's shipped PEP 723 scripts, and the stock harness's
    chat program (as the child's verifiers has it) when it is the harness."""
    if not runs_scripts_here(job):
        return []
    scripts = [(path.name, path.read_bytes()) for path in shipped(Path(job.candidate_dir))]
    if job.runtime.harness == "stock":
        try:
            scripts.append(chat_program(child_python(Path(job.candidate_dir))))
        except (OSError, subprocess.SubprocessError):  # verifiers cannot say: the stock harness's own sync will
            pass
    return scripts


def script_locks(job: Job) -> list[Path]:
    """The locks of the job's prepared scripts, shown in verifiers' scripts folder in the sandbox's private $HOME."""
    return [lock for _, data in job_scripts(job) if (lock := lock_of(data, scripts_dir())).is_file()]


def prepare_scripts(job: Job) -> list[str]:
    """Before the sandbox starts: the job's uv scripts (`job_scripts`) locked and synced into uv's cache where
    verifiers' subprocess runtime looks for them (autoenv.sandbox.scripts.prepare_files); what failed goes to
    scripts.json in the output folder, for the gates to name."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    scripts = job_scripts(job)
    if uv is None or not scripts:
        return []
    problems = prepare_files(scripts, scripts_dir(), uv)
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
    """Try bwrap once per process: installed is not enough, a container may forbid namespaces. With a user namespace
    of its own (the child unprivileged) where this machine allows one, else without (root keeps uid 0, no
    capabilities)."""
    binary = shutil.which("bwrap")
    if binary is None:
        return Sandbox("none", "bubblewrap (bwrap) is not installed; bash setup.sh installs it where apt-get is available")
    said = ""
    for user in (["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)], ["--cap-drop", "ALL"]):
        try:
            proc = subprocess.run([binary, *user, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                   *NAMESPACES, "--", "true"], capture_output=True, text=True, timeout=PROBE_SECONDS,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return Sandbox("none", f"bwrap could not start a sandbox: {e}")
        if proc.returncode == 0:
            return Sandbox("bwrap", binary=binary, user=user[0] == "--unshare-user")
        lines = (proc.stderr or "").strip().splitlines()
        said = said or (lines[-1] if lines else f"exit {proc.returncode}")
    return Sandbox("none", f"bwrap cannot create namespaces here ({said}); "
                   "allow unprivileged user namespaces or run in a container that permits them")
