"""Run llama.cpp's `llama-server` on a free loopback port with settings that suit the machine; stop it on exit."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from autoenv.core.errors import AutoEnvError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def machine_settings(cpus: int | None = None) -> tuple[int, int]:
    """(slots, threads): a slot per core (at most 4) and half the cores as threads (on a shared 2-core
    machine `-t 2` collapsed generation to under 1 token/s at times; `-t 1` kept ~55 tokens/s)."""
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(4, cpus)), max(1, cpus // 2)


@dataclass
class Server:
    """A running llama-server; use as a context manager (it is stopped on exit, even on Ctrl-C)."""

    binary: Path
    gguf: Path
    alias: str
    slots: int = 0
    threads: int = 0
    context: int = 4096  # tokens per slot
    port: int = 0
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [str(self.binary), "-m", str(self.gguf), "--alias", self.alias, "--host", "127.0.0.1",
                "--port", str(self.port), "-c", str(self.context * self.slots), "-np", str(self.slots),
                "-t", str(self.threads), "-tb", str(self.threads), "--jinja", "--no-webui"]

    def start(self, timeout: float = 180.0) -> Self:
        default_slots, default_threads = machine_settings()
        self.slots = self.slots or default_slots
        self.threads = self.threads or default_threads
        self.port = self.port or free_port()
        out = self.log.open("w") if self.log else subprocess.DEVNULL
        self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AutoEnvError(f"llama-server exited with status {self.process.returncode} before it was ready",
                                   where=str(self.log or self.binary),
                                   fix="read its log; a model the binary cannot load needs a newer llama.cpp")
            if self.healthy():
                return self
            time.sleep(0.2)
        self.stop()
        raise AutoEnvError(f"llama-server did not become healthy within {timeout:.0f} s", where=self.base_url,
                           fix="the machine may be overloaded; retry, or pass fewer --slots")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return bool(r.status == 200 and json.loads(r.read() or b"{}").get("status") == "ok")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Self:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
