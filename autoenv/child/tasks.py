"""Loading the candidate through verifiers: the environment, its seats, and its tasks.

One module below the worker, the audit and the endpoint, which all load the candidate
the same way (null harness, subprocess runtime, a rollout timeout always set). Every
function takes the `verifiers.v1` module as an argument: importing it costs ~2.5 s, and
only child processes that run the candidate pay for it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from autoenv.child.limits import limit_hooks, run_limited
from autoenv.child.runtime import choose_harness, seat_runtime
from autoenv.core.events import emit
from autoenv.core.job import TASKSET_ID, Job
from autoenv.gates.oracle import OracleBook

INFINITE_LIMIT = 1000
_told: set[str] = set()


def seat_names(vf: Any, taskset_id: str, env_id: str = "") -> list[str]:
    """The env's agent seats: `agent` for a plain taskset, its own names for a custom Env."""
    config_type = vf.env_config_type(taskset_id, env_id)
    return [
        name
        for name, field in config_type.model_fields.items()
        if isinstance(field.default, vf.AgentConfig)
    ] or ["agent"]


def build_env(vf: Any, job: Job, pins: dict[str, str] | None = None) -> Any:
    """The candidate's environment with every seat on the job's harness and runtime (see autoenv.child.runtime).

    `pins` gives seats their own model name (verifiers' per-seat `AgentConfig.model`, which the endpoint
    routes by): the per-seat probes pin every seat but the probed one to the reference policy."""
    harness, note = choose_harness(job.runtime)
    if note and note not in _told:  # once per worker, though the audit builds the env twice
        _told.add(note)
        emit("note", message=note)
    seat = {
        "harness": {"id": harness, "tool_timeout": float(job.limits.tool_seconds)},
        "runtime": seat_runtime(job.runtime),
        "timeout": {"rollout": float(job.rollout_timeout)},
        "max_turns": int(job.max_turns),
    }
    raw: dict[str, Any] = {"taskset": {"id": job.taskset_id}}
    if job.env_id:
        raw["id"] = job.env_id
    for name in seat_names(vf, job.taskset_id, job.env_id):
        raw[name] = dict(seat)
        if pins and name in pins:
            raw[name]["model"] = pins[name]
    return vf.load_environment(vf.resolve_env_config(raw))


async def load_tasks(vf: Any, job: Job, stage: str) -> tuple[Any, list[Any]]:
    """The environment and every task, the candidate's load() bounded by job.limits.load_seconds
    (TimeLimitExceeded names the stage and where load() was stuck); its reward and metric
    calls are bounded by job.limits.reward_seconds from here on."""
    def load() -> tuple[Any, list[Any]]:
        env = build_env(vf, job)
        return env, all_tasks(env.taskset, job.infinite_take)

    what = f"the taskset's load() in the {stage} stage (checks.max_load_seconds)"
    env, tasks = await asyncio.to_thread(run_limited, load, job.limits.load_seconds, what, job.candidate_dir)
    limit_hooks(type(env.taskset).task_type(), job.limits.reward_seconds, stage, job.candidate_dir)
    return env, tasks


def all_tasks(taskset: Any, limit: int = INFINITE_LIMIT) -> list[Any]:
    """Every task of `taskset`; an infinite one (`bounded` false) gives its first `limit`, a bound the audit
    states (checks.infinite_take)."""
    return list(taskset if taskset.bounded else taskset.take(limit))


def candidate_tasks(candidate_dir: str, taskset_id: str = TASKSET_ID) -> list[Any]:
    """Every task of the taskset `taskset_id` from `candidate_dir` (imports verifiers and the candidate)."""
    sys.path.insert(0, candidate_dir)
    import verifiers.v1 as vf  # deferred: the heavy import is paid only where the candidate runs

    config = vf.resolve_env_config({"taskset": {"id": taskset_id}})
    return all_tasks(vf.load_taskset(config.taskset))


RESOLVED_CONFIG = Path("configs") / "resolved" / "eval.json"


def write_run_config(directory: Path, env: Any, model: str) -> None:
    """Make `directory` a run directory verifiers' tools open (`vf-replay DIR`, its trace readers): the
    resolved config they look for (`configs/resolved/eval.json`, as vf-eval writes it) beside traces.jsonl."""
    path = directory / RESOLVED_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {"env": env.config.model_dump(mode="json"), "model": model, "written_by": "autoenv"}
    path.write_text(json.dumps(config, indent=2))


def task_row(task: Any) -> dict[str, Any]:
    """What tasks.json keeps of a sampled task: its index, key and the fields the harness reads."""
    data = task.data
    row = {"idx": data.idx, "key": task.key}
    for name in ("id", "difficulty", "category", "answer"):
        value = getattr(data, name, None)
        if value is not None:
            row[name] = value if isinstance(value, (str, int, float, bool)) else str(value)
    return row


def load_oracle(candidate_dir: str | None):
    """An OracleBook over the candidate's tasks (imports verifiers and the candidate)."""
    if candidate_dir is None:
        return None
    return OracleBook(candidate_tasks(candidate_dir))
