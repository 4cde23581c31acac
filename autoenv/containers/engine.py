"""The container engine: where its API is, whether it answers, and which of its sockets the sandbox hides.

A `docker` client on PATH says nothing about the daemon: with none running, every rollout fails
with "the engine is not reachable". So readiness asks the engine (`docker info`) and says how to
start it. The Engine API's socket is root on the host; `masked_sockets` lists every engine
socket of this machine, which the sandbox covers whatever the runtime (a candidate under the
subprocess runtime must not find one either).
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ENGINES = ("docker", "podman")
INFO_SECONDS = 30
# The engine a client talks to is chosen by these; the child gets the guard's socket and none of the others.
ENGINE_VARS = ("DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "CONTAINER_HOST",
               "CONTAINER_CONNECTION")
SOCKET_FILES = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock",
                "/run/user/*/docker.sock", "/run/user/*/podman/podman.sock", "/run/user/*/containerd/containerd.sock")
SOCKET_DIRS = ("/run/docker", "/var/run/docker", "/run/containerd", "/run/podman", "/var/lib/docker",
               "/var/lib/containerd", "/var/lib/containers")
START_HINT = {
    "docker": "start the Docker daemon (`sudo systemctl start docker`; without systemd, as root: "
              "`.venv/bin/autoenv runtime daemon start`), or set runtime.type = \"subprocess\"",
    "podman": "check `podman info` (rootless podman needs subuid/subgid entries for your user), "
              "or set runtime.type = \"subprocess\"",
}


@dataclass(frozen=True)
class Endpoint:
    """Where the engine's API listens: `unix:///path` or `tcp://host:port` (without TLS)."""

    address: str

    @property
    def unix_path(self) -> str | None:
        return urlsplit(self.address).path if self.address.startswith("unix://") else None

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        path = self.unix_path
        if path is not None:
            return await asyncio.open_unix_connection(path)
        parts = urlsplit(self.address)
        return await asyncio.open_connection(parts.hostname, parts.port or 2375)


def endpoint(engine: str = "docker") -> Endpoint:
    """The docker CLI's own choice: $DOCKER_HOST, else the current context's endpoint, else the default socket."""
    if os.environ.get("DOCKER_HOST"):
        return Endpoint(os.environ["DOCKER_HOST"])
    if shutil.which(engine):
        try:
            proc = subprocess.run([engine, "context", "inspect", "--format", "{{.Endpoints.docker.Host}}"],
                                  capture_output=True, text=True, timeout=INFO_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired):
            proc = None
        if proc is not None and proc.returncode == 0 and proc.stdout.strip():
            return Endpoint(proc.stdout.strip())
    return Endpoint("unix:///var/run/docker.sock")


def guard_problem(point: Endpoint) -> str | None:
    """Why the sandbox cannot hand this endpoint to a child through the guard, or None."""
    if point.address.startswith(("unix://", "tcp://")) and not os.environ.get("DOCKER_TLS_VERIFY"):
        return None
    return (f"the engine's API is at {point.address} (TLS or ssh): the sandbox's guard speaks to a Unix socket or "
            "plain TCP on this machine only")


def engine_problem(engine: str) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) when `engine`'s CLI is missing or its engine does not answer `info`."""
    if shutil.which(engine) is None:
        return (f"the {engine} runtime needs the `{engine}` CLI on PATH, and it was not found",
                f"install {engine.capitalize()} (Debian: apt-get install {'docker.io' if engine == 'docker' else 'podman'}), "
                "or set runtime.type = \"subprocess\"")
    try:
        proc = subprocess.run([engine, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=INFO_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return (f"`{engine} info` did not answer within {INFO_SECONDS} s: the engine is hung or overloaded",
                START_HINT[engine])
    except OSError as e:
        return (f"`{engine} info` could not run: {e}", START_HINT[engine])
    if proc.returncode != 0 or not proc.stdout.strip():
        said = (proc.stderr or proc.stdout).strip().splitlines()
        detail = said[-1] if said else f"exit {proc.returncode}"
        if "permission denied" in detail.lower():
            return (f"the {engine} engine refused this user: {detail}",
                    "add yourself to the `docker` group (`sudo usermod -aG docker $USER`, then log in again)")
        return (f"the {engine} engine is not reachable: {detail}", START_HINT[engine])
    return None


def masked_sockets() -> tuple[list[Path], list[Path]]:
    """(socket files, folders) of container engines on this machine, to cover in the sandbox."""
    files = {Path(p).resolve() for pattern in SOCKET_FILES for p in glob.glob(pattern)}
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        for name in ("docker.sock", "podman/podman.sock", "containerd/containerd.sock"):
            if (Path(runtime_dir) / name).exists():
                files.add((Path(runtime_dir) / name).resolve())
    point = os.environ.get("DOCKER_HOST", "")
    if point.startswith("unix://") and Path(urlsplit(point).path).exists():
        files.add(Path(urlsplit(point).path).resolve())
    dirs = {Path(p).resolve() for p in SOCKET_DIRS if Path(p).is_dir()}
    files = {f for f in files if not any(d == f or d in f.parents for d in dirs)}
    return sorted(files), sorted(dirs)
