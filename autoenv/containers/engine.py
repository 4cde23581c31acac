"""The container engine's API: where it listens (the docker CLI's own choice), and whether the guard can speak to it.

Whether the engine answers at all is autoenv.core.runtimes.engine_problem (preflight asks it);
which engine sockets the sandbox hides is autoenv.sandbox.engines.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

INFO_SECONDS = 30
# The engine a client talks to is chosen by these; the child gets the guard's socket and none of the others.
ENGINE_VARS = ("DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "CONTAINER_HOST",
               "CONTAINER_CONNECTION")


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
