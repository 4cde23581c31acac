"""The user cache AutoEnv keeps built binaries and model weights in (~/.cache/autoenv, or $AUTOENV_CACHE)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$AUTOENV_CACHE, else $XDG_CACHE_HOME/autoenv, else ~/.cache/autoenv."""
    explicit = os.environ.get("AUTOENV_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "autoenv"
