"""The judge backends by name: a new backend is one module plus one line in autoenv.core.config.

The names and their modules are core.config's JUDGE_BACKENDS (config.toml is checked against
them before anything runs); backends are imported by name only when one is asked for. Each
backend module exposes `available(cfg) -> bool` and `judge(call: JudgeCall) -> JudgeResult`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from autoenv.core.config import JUDGE_BACKENDS as BACKENDS
from autoenv.core.config import JUDGE_CHOICES as CHOICES

__all__ = ["BACKENDS", "CHOICES", "load"]


def load(name: str) -> ModuleType:
    """The backend module called `name`."""
    if name not in BACKENDS:
        raise ValueError(f"unknown judge backend {name!r}: one of {', '.join(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])
