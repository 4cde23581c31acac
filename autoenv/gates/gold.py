"""verifiers' own model-free gold check, run as the oracle check where a task defines one.

A task may override `Task.validate(runtime)`: it applies the reference answer in a fresh
runtime and says whether it passes (`vf-validate --mode gold` runs the same). That is a
proof of solvability the environment's authors wrote themselves, so the audit runs it on
the probe sample, in the seat's runtime, exactly as verifiers does: a fresh runtime, the
task's `setup`, then `validate`. Runs inside the evaluation's child process only.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from autoenv.core.job import Job


def defines_gold(vf: Any, task: Any) -> bool:
    return type(task).validate is not vf.Task.validate


async def gold_check(vf: Any, job: Job, env: Any, seat: str, tasks: list[Any]) -> dict[str, Any]:
    """{"checked", "valid", "invalid": [idx], "unchecked": [idx], "errors": [text]} over `tasks`."""
    from verifiers.v1.runtimes import make_runtime  # deferred: verifiers only inside the child
    from verifiers.v1.utils.compile import resolve_runtime_config  # deferred with it
    from verifiers.v1.utils.decorators import invoke  # deferred with it

    base = getattr(env.config, seat).runtime
    out: dict[str, Any] = {"checked": 0, "valid": 0, "invalid": [], "unchecked": [], "errors": []}

    async def check(task: Any) -> None:
        runtime = make_runtime(resolve_runtime_config(base, task), name=f"autoenv-gold-{uuid.uuid4().hex[:8]}")
        trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                         agent=vf.AgentInfo(config=vf.AgentConfig(runtime=base), name="gold", trainable=False))
        try:
            runtime.env = dict(task.runtime_env())
            await runtime.start()
            await asyncio.wait_for(invoke(task.setup, {"trace": trace, "runtime": runtime}), job.limits.reward_seconds)
            valid = await asyncio.wait_for(task.validate(runtime), job.limits.reward_seconds)
        except Exception as e:  # the check reports the candidate's failures per task
            out["errors"].append(f"task idx {task.data.idx}: {type(e).__name__}: {e}"[:400])
            return
        finally:
            try:
                await runtime.stop()
            except Exception:
                pass
        out["checked"] += 1
        if valid is True:
            out["valid"] += 1
        elif valid is None:
            out["unchecked"].append(task.data.idx)
        else:
            out["invalid"].append(task.data.idx)

    await asyncio.gather(*(check(task) for task in tasks))
    return out
