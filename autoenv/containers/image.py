"""A local base image for the docker runtime, built from Debian's packages with no registry.

verifiers' default image (`python:3.11-slim`) and the helper images it falls back to come from
Docker Hub. Where no registry is reachable, or to start without a pull, `autoenv runtime image`
builds one here: `mmdebstrap --variant=minbase` of this machine's Debian release with python3,
ca-certificates, iptables and iproute2, plus `uv` (the binary this venv got from its PyPI
wheel: verifiers' chat program is a uv script) and this machine's CA bundle with SSL_CERT_FILE
set (where TLS is intercepted, uv in a container trusts only what the host trusts), then
`docker import`. The tag carries a hash of those inputs, so a rebuild happens only when they
change. The same image is tagged as verifiers' network helper (`localhost/verifiers-network:1`,
which verifiers otherwise builds `FROM docker.io/library/alpine` for a restricted network), and
`[runtime.docker] image` defaults to it when it is present.
"""

from __future__ import annotations

import hashlib
import os
import platform
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
RECIPE = 1  # bump when the steps below change


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


@cache
def tag() -> str:
    """The image's tag: a hash of the release, the packages, uv's binary and the CA bundle (once a process: preflight
    and the evaluation's child both ask)."""
    digest = hashlib.sha256(f"{RECIPE} {release()} {platform.machine()} {' '.join(PACKAGES)}".encode())
    digest.update(uv_binary().read_bytes())
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


def has_python(name: str, engine: str = "docker") -> bool:
    try:
        return subprocess.run([engine, "run", "--rm", "--network", "none", "--entrypoint", "python3", name, "-c", "pass"],
                              capture_output=True, timeout=120, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


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
        _run([engine, "import", *(arg for change in changes for arg in ("--change", change)), str(tarball), name],
             f"`{engine} import` could not load the image", f"check that the engine answers: {engine} info")
    _tag_helper(engine, name)
    return Built(name, time.monotonic() - started, _size(engine, name), False)


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
