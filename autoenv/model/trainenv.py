"""The trainer's own venv (torch, TRL, PEFT, gguf), kept apart from AutoEnv's and cached under the user cache.

torch is pinned first: on a machine without CUDA the pinned CPU wheel is small, while a bare
`torch` may pull a multi-GB CUDA build. With a GPU, set AUTOENV_TORCH (e.g. "torch") to take
the build that suits it; Unsloth is used when AUTOENV_TRAIN_EXTRA names it and it imports.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from autoenv.core.cachedir import cache_root
from autoenv.core.errors import AutoEnvError

TORCH_PIN = "torch==2.13.0"
PACKAGES = ["trl==1.16.0", "peft", "datasets", "gguf", "sentencepiece", "matplotlib", "verifiers==0.4.0"]


def packages() -> tuple[str, list[str]]:
    extra = os.environ.get("AUTOENV_TRAIN_EXTRA", "").split()
    return os.environ.get("AUTOENV_TORCH", TORCH_PIN), PACKAGES + extra


def trainer_venv() -> Path:
    """Where the trainer venv for these packages lives (keyed by the packages and this Python)."""
    torch, rest = packages()
    key = hashlib.sha256(" ".join([torch, *rest, sys.version]).encode()).hexdigest()[:12]
    return cache_root() / "train-venv" / key


def trainer_ready() -> bool:
    """The trainer venv has been made (nothing to install)."""
    return (trainer_venv() / ".ready").is_file()


def train_python(progress: Callable[[str], None] = print) -> Path:
    """The trainer venv's python, creating it the first time (minutes: torch, transformers, TRL)."""
    torch, rest = packages()
    venv = trainer_venv()
    key = venv.name
    python = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / ".ready").is_file():
            return python
        started = time.monotonic()
        progress(f"train: making the trainer venv {venv} ({torch}, {' '.join(rest)}; minutes, once)")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        for group in ([torch], rest):
            done = subprocess.run([str(python), "-m", "pip", "install", "-q", *group], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise AutoEnvError(f"pip could not install {' '.join(group)} into the trainer venv: "
                                   f"{done.stderr.strip()[-600:]}", where=str(venv),
                                   fix="check that PyPI is reachable; with a GPU set AUTOENV_TORCH to the torch "
                                   "build that suits it, then retry")
        (venv / ".ready").write_text("ok\n")
        progress(f"train: trainer venv ready in {time.monotonic() - started:.0f} s")
    return python
