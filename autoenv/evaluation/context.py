"""What the evaluation's stages share: the options it was asked with, the context they fill, the outcome, the timings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoenv.core.config import Config
from autoenv.core.errors import AutoEnvError, ProviderUnavailable
from autoenv.core.record import (
    CandidateInfo,
    Entry,
    Environment,
    Forwarded,
    GateReport,
    ModelStats,
    Role,
)
from autoenv.evaluation.rescore import Source
from autoenv.run.gitrepo import Head, Repo
from autoenv.run.runbase import RulesCheck

Stats = dict[Role, ModelStats]


@dataclass
class EvalOptions:
    cwd: Path = field(default_factory=Path.cwd)
    config: Path | None = None
    description: str = ""
    offline: bool = False
    force: bool = False
    """Evaluate even when the cache holds an evaluation with the same key."""
    restart: bool = False
    """Start over instead of resuming an interrupted evaluation of this commit."""
    env: str | None = None
    """An existing environment (package directory or installed id) evaluated instead of [candidate]."""
    env_id: str = ""


@dataclass
class Context:
    """What the stages share: the config, the commit, the paths, timings."""

    config: Config
    repo: Repo
    head: Head
    options: EvalOptions
    run_id: str
    out: Path
    timings: dict[str, float] = field(default_factory=dict)
    candidate: CandidateInfo = field(default_factory=CandidateInfo)
    gates: GateReport | None = None
    warnings: list[str] = field(default_factory=list)
    rules: RulesCheck = field(default_factory=RulesCheck)
    ledger_check: str = ""
    ledger_seen: list[str] | None = None
    """The ledger's lines as preflight verified them: record() restores them if someone else wrote."""
    cache_key: str | None = None
    resuming: bool = False
    """An interrupted evaluation's outputs are kept and continued (same run id, only missing rollouts)."""
    reused: int = 0
    sandbox: str | None = None
    engine_guard: Any = None
    """The container engine's guard for a sandboxed child under the docker runtime (autoenv.containers.guard)."""
    forwarded: Forwarded | None = None
    patched: list[str] = field(default_factory=list)
    """What the child's tripwire found the candidate changed of AutoEnv's code (autoenv.child.tripwire)."""
    """What the forwarder passed to the real models and refused (autoenv.sandbox.forwarder), once it has stopped."""
    environment: Environment | None = None
    """`autoenv eval --env`: the environment evaluated instead of the run's candidate (recorded apart)."""
    rescore: Source | None = None
    """An evaluation of the run whose stored rollouts this one rescores (autoenv.evaluation.rescore)."""
    rescore_refused: str | None = None
    rescored_from: str | None = None


@dataclass
class Outcome:
    """How the evaluation ended, before its verdict: what record() needs besides the context."""

    stats: Stats = field(default_factory=dict)
    error: AutoEnvError | None = None
    failed_stage: str | None = None
    no_reference: str | None = None
    """Why the scripted models had nothing to play: the rollouts were not run (offline, no oracle hook)."""

    @property
    def provider_unavailable(self) -> bool:
        return isinstance(self.error, ProviderUnavailable)


class EvaluationCrashed(AutoEnvError):
    """The evaluation ended early after preflight and an entry was recorded: a crash (exit 1),
    or an unavailable provider (exit 3, an inconclusive entry)."""

    def __init__(self, error: AutoEnvError, entry: Entry):
        super().__init__(error.what, where=error.where, fix=error.fix)
        self.entry = entry
        self.exit_code = error.exit_code if isinstance(error, ProviderUnavailable) else 1


@contextmanager
def timed(ctx: Context, name: str) -> Iterator[None]:
    """Record the stage's wall time in the entry's `timings`, whether or not it fails."""
    started = time.time()
    try:
        yield
    finally:
        ctx.timings[name] = round(time.time() - started, 2)
