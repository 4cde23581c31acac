"""Judge an evaluation: pick the backend, run it, and fall back to the offline review on any failure."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autoenv.core.config import Bands, Judge
from autoenv.core.record import Entry, Findings, JudgeResult
from autoenv.judge import registry
from autoenv.judge.base import JudgeCall, JudgeFailed
from autoenv.judge.offline import offline_findings


def pick_backend(requested: str, offline: bool, cfg: Judge) -> str:
    """offline under --offline; an explicit choice as asked (it fails later, saying why); else the
    first available backend in registry order."""
    if offline or requested == "offline":
        return "offline"
    if requested != "auto":
        return requested
    return next((name for name in registry.BACKENDS if registry.load(name).available(cfg)), "offline")


def run_judge(cfg: Judge, *, offline: bool, workspace: Path, entry: Entry, bands: Bands, rollout_ids: list[str],
              state_dir: Path) -> JudgeResult:
    """Judge with the configured backend; on any failure, the offline findings and why."""
    started = time.time()
    fallback = offline_findings(entry, bands, rollout_ids)
    backend = pick_backend(cfg.backend, offline, cfg)
    call = JudgeCall(cfg=cfg, workspace=workspace, state_dir=state_dir, entry=entry, bands=bands,
                     rollout_ids=rollout_ids)
    try:
        result: JudgeResult = registry.load(backend).judge(call)
    except JudgeFailed as e:
        result = failed(backend, fallback, str(e), cost_usd=e.cost_usd, turns=e.turns)
    except Exception as e:  # a judge must never cost the evaluation its feedback
        result = failed(backend, fallback, f"{type(e).__name__}: {e}")
    return result.model_copy(update={"seconds": round(time.time() - started, 2)})


def failed(backend: str, findings: Findings, error: str, **spent: Any) -> JudgeResult:
    """The offline findings with why the judge failed and what it spent."""
    try:
        return JudgeResult(backend=backend, findings=findings, ok=False, error=error, **spent)
    except ValidationError:  # a spend reported in a shape the record cannot hold must not cost the feedback
        return JudgeResult(backend=backend, findings=findings, ok=False, error=error)
