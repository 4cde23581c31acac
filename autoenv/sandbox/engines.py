"""The container engines' sockets on this machine, which every sandbox covers.

An engine's API socket is root on the host: a container started with `/` bound in reads the key
and the ledger. So the sandbox hides each one it finds, whatever the runtime (a candidate under
the subprocess runtime must not find one either); under the docker runtime the child gets the
harness's guard instead (autoenv.containers.guard).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from urllib.parse import urlsplit

SOCKET_FILES = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock",
                "/run/user/*/docker.sock", "/run/user/*/podman/podman.sock", "/run/user/*/containerd/containerd.sock")
SOCKET_DIRS = ("/run/docker", "/var/run/docker", "/run/containerd", "/run/podman", "/var/lib/docker",
               "/var/lib/containerd", "/var/lib/containers")


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
