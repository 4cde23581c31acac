"""Start the Codebreaker OpenEnv server in its own venv, once per process, and stop it at exit.

openenv 0.10 cannot share a venv with verifiers 0.4 (their mcp pins clash), so the server runs
in a venv of its own, made with uv from ../codebreaker_env/pyproject.toml at
$XDG_CACHE_HOME/autoenv/openenv-servers/<hash of that file> (AutoEnv's install stage builds the
same one before the sandboxed evaluation, which has no network). Only the WebSocket
protocol crosses between the two. Set CODEBREAKER_BASE_URL to use a server already running.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

SERVER_PACKAGE = Path(__file__).resolve().parent.parent / "codebreaker_env"  # beside candidate_env/
APP = "codebreaker_env.server.app:app"
READY_SECONDS = 90
_lock = threading.Lock()
_base_url: str | None = None


def venv_dir(package: Path = SERVER_PACKAGE) -> Path:
    """The server's venv: one per distinct pyproject.toml, shared by every copy of the package."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256((package / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return cache / "autoenv" / "openenv-servers" / digest


def server_python(package: Path = SERVER_PACKAGE) -> Path:
    """The venv's python, building the venv with uv on first use (needs PyPI once)."""
    venv = venv_dir(package)
    python = venv / "bin" / "python"
    if (venv / ".ready").is_file():
        return python
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise RuntimeError(f"the OpenEnv server's venv {venv} is missing and uv is not on PATH: "
                           "install uv (pip install uv) or run `autoenv setup`")
    try:
        subprocess.run([uv, "venv", "-q", "--allow-existing", "--python", sys.executable, str(venv)],
                       check=True, capture_output=True, text=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(python), "-r", str(package / "pyproject.toml")],
                       check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"uv could not build the OpenEnv server's venv {venv} (is PyPI reachable?): "
                           f"{(e.stderr or '').strip()[-500:]}") from None
    (venv / ".ready").write_text("ok\n")
    return python


def base_url() -> str:
    """The running server's URL, starting it on a free loopback port on the first call."""
    global _base_url
    if os.environ.get("CODEBREAKER_BASE_URL"):
        return os.environ["CODEBREAKER_BASE_URL"].rstrip("/")
    with _lock:
        if _base_url is None:
            _base_url = _start()
    return _base_url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    try:  # Linux: the server gets SIGTERM when this process dies, however it dies
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _start() -> str:
    port = _free_port()
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - the server writes to it for its whole life
    proc = subprocess.Popen([str(server_python()), "-m", "uvicorn", APP, "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], cwd=SERVER_PACKAGE.parent,
                            stdout=subprocess.DEVNULL, stderr=errors,
                            preexec_fn=_die_with_parent)  # noqa: PLW1509 - only prctl, before exec
    atexit.register(_stop, proc)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip()
            raise RuntimeError(f"the Codebreaker server exited with {proc.returncode}: {said[-800:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return url
        except OSError:
            time.sleep(0.2)
    _stop(proc)
    raise RuntimeError(f"the Codebreaker server did not answer {url}/health within {READY_SECONDS} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
