"""A local base image for the docker runtime, built from Debian's packages with no registry.

verifiers' default image (`python:3.11-slim`) and the helper images it falls back to come from
Docker Hub. Where no registry is reachable, or to start without a pull, `autoenv runtime image`
builds one here: `mmdebstrap --variant=minbase` of this machine's Debian release with python3,
ca-certificates, iptables and iproute2, plus `uv` (the binary this venv got from its PyPI
wheel: verifiers' chat program is a uv script) and this machine's CA bundle with SSL_CERT_FILE
set (where TLS is intercepted, uv in a container trusts only what the host trusts), then
`docker import`.

Each rollout's container runs verifiers' stock chat program, a PEP 723 script that
`prepare_uv_script` writes to `/tmp/vf-scripts/<sha256 of its text>.py` and prepares with
`uv sync --script PATH --no-config` then `uv python find --script PATH`: uv keys the script's
environment by that path (`~/.cache/uv/environments-v2/<name>-<hash>`), and without a lockfile it
resolves the dependencies against the package index every time, so every fresh container needed
PyPI (about 3 s, 61 MB, and impossible without egress). The build therefore bakes the script in
at that very path with its lockfile (`uv lock --script`, next to it as `PATH.lock`) and its
environment synced in root's uv cache, its bytecode compiled (`docker commit` of a container that
did it, the only build step with network): in a rollout's container the same commands then find
the lock and the environment fresh and need no network at all (about 0.3 s), and the program's
imports read compiled modules instead of compiling openai's in every new container (about 2 s).

The tag carries a hash of those inputs (and of the chat program's source files in the installed
verifiers), so a rebuild happens only when they change. The same image is tagged as verifiers'
network helper (`localhost/verifiers-network:1`, which verifiers otherwise builds
`FROM docker.io/library/alpine` for a restricted network), and `[runtime.docker] image` defaults
to it when it is present. Whether an image runs python3 (verifiers' egress helper needs it) is
asked of a container once per image id and kept in PYTHON_CACHE.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from autoenv.core.errors import AutoEnvError

REPOSITORY = "autoenv/base"
NETWORK_HELPER = "localhost/verifiers-network:1"  # the tag verifiers' restricted network mode looks for
PACKAGES = ("python3", "ca-certificates", "iptables", "iproute2")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HELPER_FALLBACK = "docker.io/library/python:3.11-alpine"  # verifiers' egress helper for an image without python3
PULL_SECONDS = 600
BUILD_SECONDS = 1800
RECIPE = 3  # bump when the steps below change
SCRIPTS_DIR = "/tmp/vf-scripts"  # verifiers' Runtime.scripts_dir: where prepare_uv_script writes its scripts
# The files verifiers' stock chat program is bundled from (verifiers.v1.harnesses.utils.launch.CHAT_PROGRAM_SOURCE).
CHAT_PROGRAM_FILES = ("launch.py", "mcp.py", "compaction.py", "core.py")
INDEX_VARS = ("UV_DEFAULT_INDEX", "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_NATIVE_TLS")
PYTHON_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autoenv" / "docker-python3.json"


@dataclass(frozen=True)
class Built:
    tag: str
    seconds: float
    size_mb: float
    reused: bool


def release() -> str:
    """This machine's Debian (or Ubuntu) codename, read from /etc/os-release."""
    fields = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    codename = fields.get("VERSION_CODENAME", "").strip('"')
    if not codename:
        raise AutoEnvError("this machine's release has no VERSION_CODENAME", where="/etc/os-release",
                           fix="the person's: build an image another way and set [runtime.docker] image in config.toml")
    return codename


def uv_binary() -> Path:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        raise AutoEnvError("uv is not installed in this venv", where=str(Path(sys.executable).parent),
                           fix="the person's: run bash setup.sh (it installs uv from PyPI)")
    return Path(found).resolve()


def chat_program_files() -> list[Path]:
    """The installed verifiers' chat program sources, found without importing verifiers (seconds on a loaded
    machine; preflight asks for the tag every evaluation)."""
    spec = importlib.util.find_spec("verifiers")
    roots = list(spec.submodule_search_locations or []) if spec else []
    if not roots:
        raise AutoEnvError("verifiers is not installed in this venv", where=sys.executable,
                           fix="the person's: run bash setup.sh")
    folder = Path(roots[0]) / "v1" / "harnesses" / "utils"
    return [folder / name for name in CHAT_PROGRAM_FILES]


def chat_program() -> tuple[str, bytes]:
    """(the path verifiers writes its stock chat program to in a container, the program's text)."""
    from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE  # deferred: seconds to import

    data = CHAT_PROGRAM_SOURCE.encode()
    return f"{SCRIPTS_DIR}/{hashlib.sha256(data).hexdigest()}.py", data


@cache
def tag() -> str:
    """The image's tag: a hash of the release, the packages, uv's binary, the CA bundle and the chat program's sources
    (once a process: preflight and the evaluation's child both ask)."""
    digest = hashlib.sha256(f"{RECIPE} {release()} {platform.machine()} {' '.join(PACKAGES)}".encode())
    digest.update(uv_binary().read_bytes())
    for source in chat_program_files():
        digest.update(source.read_bytes() if source.is_file() else b"")
    if CA_BUNDLE.is_file():
        digest.update(CA_BUNDLE.read_bytes())
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def present(name: str, engine: str = "docker") -> bool:
    if shutil.which(engine) is None:
        return False
    try:
        return subprocess.run([engine, "image", "inspect", name], capture_output=True, timeout=30,
                              check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def availability(name: str, engine: str = "docker") -> str | None:
    """Why the runtime could not start `name`, or None: present, or pulled now. An image without python3 needs
    verifiers' helper image (python:3.11-alpine) for its egress proxy, which must then be there too."""
    for wanted in (name, HELPER_FALLBACK):
        if not present(wanted, engine):
            try:
                proc = subprocess.run([engine, "pull", "-q", wanted], capture_output=True, text=True,
                                      timeout=PULL_SECONDS, check=False)
            except subprocess.TimeoutExpired:
                return f"the image {wanted} is not on this machine, and pulling it did not finish within {PULL_SECONDS} s"
            if proc.returncode != 0:
                said = (proc.stderr or proc.stdout).strip().splitlines()
                why = "its egress proxy's helper (the image has no python3)" if wanted != name else "the runtime's image"
                return (f"{why}, {wanted}, is not on this machine and could not be pulled: "
                        f"{said[-1] if said else f'exit {proc.returncode}'}")
        if wanted == name and has_python(name, engine):
            return None
    return None


def image_id(name: str, engine: str = "docker") -> str | None:
    try:
        proc = subprocess.run([engine, "image", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def has_python(name: str, engine: str = "docker") -> bool:
    """Whether the image runs python3, asked of a container once per image id (an id names the image's content, so
    the answer is kept in PYTHON_CACHE; starting a container to ask costs about a second every evaluation)."""
    known = image_id(name, engine)
    cached = _python_cache()
    if known is not None and known in cached:
        return cached[known]
    try:
        answer = subprocess.run([engine, "run", "--rm", "--network", "none", "--entrypoint", "python3", name, "-c",
                                 "pass"], capture_output=True, timeout=120, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False  # not an answer about the image: not kept
    if known is not None:
        _remember_python(known, answer)
    return answer


def _python_cache() -> dict[str, bool]:
    try:
        data = json.loads(PYTHON_CACHE.read_text())
    except (OSError, ValueError):
        return {}
    return {key: value for key, value in data.items() if isinstance(value, bool)} if isinstance(data, dict) else {}


def _remember_python(known: str, answer: bool) -> None:
    try:
        PYTHON_CACHE.parent.mkdir(parents=True, exist_ok=True)
        partial = PYTHON_CACHE.with_name(f"{PYTHON_CACHE.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps({**_python_cache(), known: answer}, indent=1, sort_keys=True))
        partial.replace(PYTHON_CACHE)  # atomic: evaluations started together never read half a file
    except OSError:
        pass  # a cache that cannot be written costs the check again next time, nothing else


def default_image(engine: str = "docker") -> str | None:
    """The local base image when it is built, for a `[runtime.docker]` that names none."""
    try:
        name = tag()
    except (AutoEnvError, OSError):
        return None
    return name if present(name, engine) else None


def build(engine: str = "docker", rebuild: bool = False) -> Built:
    """The base image, built unless its tag exists already; tagged as verifiers' network helper too."""
    name = tag()
    started = time.monotonic()
    if present(name, engine) and not rebuild:
        _tag_helper(engine, name)
        return Built(name, time.monotonic() - started, _size(engine, name), True)
    if shutil.which("mmdebstrap") is None:
        raise AutoEnvError("building the base image needs mmdebstrap, which is not installed",
                           fix="the person's: apt-get install mmdebstrap (as root), or bash setup.sh --with-docker")
    stage = f"{REPOSITORY}-stage:{name.rpartition(':')[2]}"
    with tempfile.TemporaryDirectory(prefix="autoenv-image-") as folder:
        tarball = Path(folder) / "base.tar"
        hooks = [f"--customize-hook=copy-in {uv_binary()} /usr/local/bin"]
        if CA_BUNDLE.is_file():
            hooks.append(f"--customize-hook=copy-in {CA_BUNDLE} {CA_BUNDLE.parent}")
        _run(["mmdebstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", *hooks, release(), str(tarball)],
             "mmdebstrap could not build the base system", "check that Debian's package mirror is reachable "
             "(apt-get update works), then run it again")
        changes = ["ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin", 'CMD ["/bin/sh"]']
        if CA_BUNDLE.is_file():
            changes.append(f"ENV SSL_CERT_FILE={CA_BUNDLE}")
        _run([engine, "import", *(arg for change in changes for arg in ("--change", change)), str(tarball), stage],
             f"`{engine} import` could not load the image", f"check that the engine answers: {engine} info")
        tarball.unlink()
        try:
            _presync(engine, stage, name, Path(folder))
        finally:
            subprocess.run([engine, "rmi", stage], capture_output=True, timeout=60, check=False)
    _tag_helper(engine, name)
    return Built(name, time.monotonic() - started, _size(engine, name), False)


def _presync(engine: str, stage: str, name: str, folder: Path) -> None:
    """`name`: `stage` with verifiers' chat program at its path, its lockfile, and its environment synced."""
    path, data = chat_program()
    (folder / "chat.py").write_bytes(data)
    box = f"autoenv-presync-{name.rpartition(':')[2]}"
    subprocess.run([engine, "rm", "--force", box], capture_output=True, timeout=60, check=False)
    env = [arg for var in INDEX_VARS if os.environ.get(var) for arg in ("--env", f"{var}={os.environ[var]}")]
    quoted = shlex.quote(path)
    try:
        _run([engine, "run", "--detach", "--name", box, *env, stage, "sleep", "infinity"],
             "could not start a container to sync the chat program's dependencies", f"check `{engine} info`")
        _run([engine, "exec", box, "mkdir", "-p", SCRIPTS_DIR], "could not create the scripts folder", f"check `{engine} info`")
        _run([engine, "cp", str(folder / "chat.py"), f"{box}:{path}"], "could not copy the chat program in",
             f"check `{engine} info`")
        _run([engine, "exec", "--workdir", SCRIPTS_DIR, box, "sh", "-c",
              f"uv lock --script {quoted} --no-config -q && uv sync --script {quoted} --no-config -q --compile-bytecode "
              f"&& uv python find --script {quoted} --no-config"],
             "uv in the image could not lock and sync verifiers' chat program (this build step alone reaches the "
             "package index)", "check that a container reaches PyPI (or set UV_DEFAULT_INDEX to a mirror it reaches), "
             "then run `autoenv runtime image` again")
        _run([engine, "commit", "--change", 'CMD ["/bin/sh"]', box, name], f"`{engine} commit` could not save the image",
             f"check `{engine} info`")
    finally:
        subprocess.run([engine, "rm", "--force", box], capture_output=True, timeout=60, check=False)


def _tag_helper(engine: str, name: str) -> None:
    if not present(NETWORK_HELPER, engine):
        _run([engine, "tag", name, NETWORK_HELPER], f"could not tag {NETWORK_HELPER}", f"check `{engine} images`")


def _size(engine: str, name: str) -> float:
    proc = subprocess.run([engine, "image", "inspect", "--format", "{{.Size}}", name], capture_output=True, text=True,
                          timeout=30, check=False)
    return int(proc.stdout.strip() or 0) / 1e6


def _run(cmd: list[str], what: str, fix: str) -> None:
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_SECONDS, check=False, env=env)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise AutoEnvError(f"{what} (exit {proc.returncode}):\n{tail}", where=" ".join(cmd[:2]), fix=fix)
