"""The judge backends by name: a new backend is one module plus one line here.

A leaf module (config.py reads CHOICES from it): backends are imported by name only when
one is asked for. Each backend module exposes `available(cfg) -> bool` and
`judge(call: JudgeCall) -> JudgeResult`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# In the order `auto` tries them: the first available one judges.
BACKENDS = {
    "claude": "autoenv.judge.claude",
    "anthropic": "autoenv.judge.anthropic",
    "offline": "autoenv.judge.offline",
}
CHOICES = ("auto", *BACKENDS)


def load(name: str) -> ModuleType:
    """The backend module called `name`."""
    if name not in BACKENDS:
        raise ValueError(f"unknown judge backend {name!r}: one of {', '.join(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])
