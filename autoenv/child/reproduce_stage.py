"""The reproduce stage (child side): every stored rollout scored again in a fresh child, the one it was paid in gone.

After the rollouts the harness ends the child they ran in and starts a new one
(autoenv.sandbox.rollouts.Worker.restart): whatever the candidate's code kept in memory while
it was audited and rolled out (a count of its calls, a flag set by a stage it watched, the
replies it saw) is gone. Here each finished stored trace of each model is scored again by
task.score on its own transcript, and its total compared with what the rollout was paid
(autoenv.gates.blind_rules judges it: `stored rewards`). Up to REPRODUCE_LIMIT traces a
model, within REPRODUCE_SECONDS. No model is called; a model-graded reward reaches the
built-in grader, as in the rescore stage (autoenv.child.rescore_stage), and the refusals are
the same: a reward that needs the rollout's runtime, or a judge that calls a real model, is
not checked and the record says why.
"""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Any

from autoenv.child.audit import runtime_rewards
from autoenv.child.rescore_stage import rescorable, rescore_trace
from autoenv.child.tasks import load_tasks
from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.core.traces import TRACES_FILE
from autoenv.endpoint.policies import GRADER_URL_VAR, Policies
from autoenv.endpoint.server import Endpoint
from autoenv.gates.oracle import OracleBook
from autoenv.gates.blind_record import REPRODUCE_FILE, ReproduceRecord

REPRODUCE_LIMIT = 400
"""Stored traces of each model scored again (file order)."""
REPRODUCE_SECONDS = 120.0
"""The stage stops scoring past this and says how many it checked."""


def total(rewards: dict | None) -> float | None:
    """A trace's total reward from its stored `rewards` (None when one is missing or not a number)."""
    values = []
    for value in (rewards or {}).values():
        if not isinstance(value, dict) or not isinstance(value.get("score"), (int, float)) \
                or isinstance(value.get("score"), bool):
            return None
        values.append(float(value["score"]) * float(value.get("weight", 1.0)))
    return sum(values) if values else None


async def reproduce(job: Job) -> None:
    import verifiers.v1 as vf  # deferred: verifiers is imported only inside the child

    started = time.time()
    out: dict[str, Any] = {"checked": 0, "errors": 0, "unscored": 0, "differ": [], "reason": None, "partial": False}
    roles = list(job.rollouts.roles) if job.rollouts else []
    env, tasks = await load_tasks(vf, job, "reproduce")
    by_key = {t.key: t for t in tasks}
    reason = None
    if not tasks:
        reason = "the taskset loaded no tasks"
    elif needs := runtime_rewards(tasks[0]):
        reason = f"rewards or metrics that need the rollout's runtime cannot be scored from a transcript: {', '.join(needs)}"
    elif tasks[0].plugged_judges():
        reason = "a judge reward calls a model: its verdicts are not scored again"
    if reason:
        out["reason"] = reason
    else:
        grader = await Endpoint(Policies(OracleBook(tasks), seed=job.seed)).start()
        os.environ[GRADER_URL_VAR] = grader.base_url
        try:
            for role in roles:
                await check_file(vf, by_key, role, job.out / role / TRACES_FILE, out, started)
        finally:
            await grader.stop()
    out["seconds"] = round(time.time() - started, 3)
    job.audit_dir.mkdir(parents=True, exist_ok=True)
    (job.audit_dir / REPRODUCE_FILE).write_text(ReproduceRecord.model_validate(out).model_dump_json(indent=1))
    emit("finished", seconds=out["seconds"], done={})


def single_turn(trace: dict) -> bool:
    """One assistant turn and no tool call: a transcript that holds everything a reward of it can read."""
    turns = [n.get("message") or {} for n in trace.get("nodes") or []
             if (n.get("message") or {}).get("role") == "assistant"]
    return len(turns) == 1 and not turns[0].get("tool_calls")


async def check_file(vf: Any, by_key: dict, role: str, path: Any, out: dict[str, Any], started: float) -> None:
    """Each finished trace of `path` scored again; mismatches appended to out["differ"]."""
    if not path.is_file():
        return
    checked = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                episode = json.loads(line)
            except json.JSONDecodeError:
                continue
            for trace in episode.get("traces") or []:
                if checked >= REPRODUCE_LIMIT or time.time() - started > REPRODUCE_SECONDS:
                    out["partial"] = True
                    return
                task = by_key.get((trace.get("task") or {}).get("key"))
                stored = total(trace.get("rewards"))
                if task is None or stored is None or not rescorable(trace) or (trace.get("errors") or []):
                    continue
                again_trace = copy.deepcopy(trace)
                error = await rescore_trace(vf, task, again_trace)
                checked += 1
                out["checked"] += 1
                if error:
                    out["errors"] += 1
                    continue
                again = total(again_trace.get("rewards"))
                if again is None:  # scored to no number from the transcript alone (a custom Env's own state)
                    out["unscored"] += 1
                elif abs(again - stored) > 1e-6:
                    out["differ"].append({"role": role, "idx": getattr(task.data, "idx", None), "key": task.key,
                                          "stored": stored, "again": again, "single_turn": single_turn(trace)})
                emit("probe", probe="reproduce")
