"""Incremental evaluation: a commit that changed only rewards, metrics or docs is rescored, not rolled out again.

Most edits to an environment are to its rewards, and a reward cannot change what the
models reply: the prompts, tools, stop conditions and the env's code are the same. So an
evaluation whose candidate differs from an earlier finished evaluation of the same run
(same config.toml, spec.md and models; kept, discarded or inconclusive) only in reward
and metric functions, the helpers only they reach, and docs (autoenv.run.fingerprint) scores
that evaluation's stored rollouts again with the new rewards, in the sandboxed child
under the same limits (autoenv.child.rescore_stage), instead of calling any model. The child
also compares the sampled tasks' fingerprint with the stored one; anything it cannot
prove unchanged means full rollouts, and the feedback says why. The gates and derived
probes run as usual. The entry records `rescored_from` and each task's old and new mean
reward; the feedback gets the paired table. `--force` rolls out anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from autoenv.core import display
from autoenv.core.childfiles import load_json, validated
from autoenv.core.config import CONFIG_NAME, Config
from autoenv.core.record import ROLES, Entry
from autoenv.core.traces import TRACES_FILE
from autoenv.run.cache import REUSABLE
from autoenv.run.fingerprint import FINGERPRINT_FILE, RESCORE_FILE, rollout_changes
from autoenv.run.gitrepo import Head, Repo
from autoenv.run.runbase import same_run
from autoenv.sandbox.rollouts import Worker, WorkerResult

LOOKBACK = 20
"""Finished evaluations of the run examined, newest first, for one to rescore."""


@dataclass
class Source:
    """The evaluation whose stored rollouts are rescored."""

    commit: str
    out: Path


def find_source(repo: Repo, head: Head, config: Config, entries: list[Entry], *, offline: bool,
                run_base: str | None) -> tuple[Source | None, str | None]:
    """(the newest finished evaluation of the run this commit may rescore, None), or (None, why the newest
    candidate for it may not: said in the feedback), or (None, None) when the run has nothing to rescore."""
    candidate = config.path("candidate").resolve()
    if not config.candidate.install or not candidate.is_relative_to(repo.root):
        return None, None
    folder = candidate.relative_to(repo.root).as_posix()
    first_reason = None
    seen = 0
    for entry in reversed(entries):
        if entry.commit == head.commit or entry.verdict.verdict not in REUSABLE or not entry.eval_success \
                or not entry.stats or entry.offline != offline or not same_run(entry, head.branch, run_base):
            continue
        seen += 1
        if seen > LOOKBACK:
            break
        reason = unprovable(repo, entry, head, folder, config)
        if reason is None:
            return Source(commit=entry.commit, out=config.root / entry.outputs), None
        first_reason = first_reason or f"not provably reward-only against {entry.commit[:12]}: {reason}"
    return None, first_reason


def unprovable(repo: Repo, entry: Entry, head: Head, folder: str, config: Config) -> str | None:
    """Why `entry`'s rollouts could differ from this commit's (None: only rewards, metrics and docs changed)."""
    for path in (CONFIG_NAME, "spec.md"):
        if repo.blob(entry.commit, path) != repo.blob(head.commit, path):
            return f"{path} changed"
    if not entry.outputs:
        return "the evaluation recorded no outputs folder"
    out = config.root / entry.outputs
    try:
        stored_run = json.loads((out / "run.json").read_text()).get("run_id")
    except (OSError, ValueError):
        stored_run = None
    if stored_run != entry.run_id:  # evaluated again since: its files were archived under previous/
        return f"its outputs ({entry.outputs}) now hold another evaluation of that commit"
    if not (out / FINGERPRINT_FILE).is_file():
        return f"its outputs ({entry.outputs}) hold no task fingerprint"
    if not any((out / role / TRACES_FILE).is_file() for role in ROLES):
        return f"its outputs ({entry.outputs}) hold no stored rollouts"
    changes = rollout_changes(repo, entry.commit, head.commit, folder)
    return "; ".join(changes) if changes else None


def run_rescore(worker: Worker, source: Source) -> tuple[WorkerResult | None, str | None]:
    """The rescore stage in the child: (its result, None), or (None, why it refused: roll out instead)."""
    result = worker.run("rescore")
    outcome = read_outcome(worker.job.out / RESCORE_FILE)
    if not outcome.rescored:
        return None, outcome.reason or "the rescore stage refused"
    display.note(f"rescored {outcome.rescored} stored rollouts of {source.commit[:12]} "
                 f"({outcome.kept} unfinished kept as they were, {outcome.errors} reward errors); no model called")
    return result, None


class RescoreOutcome(BaseModel):
    """What the rescore stage (autoenv.child.rescore_stage) wrote into rescore.json: its refusal, or its counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rescored: bool | NonNegativeInt = Field(description="False when it refused; else the traces rescored.")
    reason: str | None = Field(None, description="Why it refused (roll out instead).")
    source: str = Field("", description="The outputs folder whose rollouts were rescored.")
    traces: NonNegativeInt = Field(0, description="Stored traces read.")
    kept: NonNegativeInt = Field(0, description="Unfinished traces kept as they were.")
    errors: NonNegativeInt = Field(0, description="Rescored traces whose reward raised.")
    seconds: float | None = Field(None, description="How long the stage took.")


def read_outcome(path: Path) -> RescoreOutcome:
    """The rescore stage's rescore.json, validated (a refusal when it wrote none): the child writes it next to the
    candidate's code, so a file that is not its outcome is an AutoEnvError, never a count in the record."""
    if not path.is_file():
        return RescoreOutcome(rescored=False, reason="no rescore.json")
    data = load_json(path, "rescore stage's outcome", "rescore", "outputs")
    return validated(RescoreOutcome, data, "rescore stage's outcome", "rescore", "outputs", str(path))
