"""The rescore stage (child side): an earlier evaluation's stored rollouts scored again by this commit's rewards.

It runs in the evaluation's sandboxed child instead of the rollouts stage when the harness
found an evaluation of the run whose candidate differs only in rewards, metrics and docs
(autoenv.evaluation.rescore). It loads the taskset under the same limits as the rollouts (rewards
bounded by checks.max_reward_seconds), samples the same tasks, and compares the sampled
tasks' fingerprint (autoenv.run.fingerprint) with the one stored beside the old rollouts;
any difference, a reward that needs the rollout's runtime, or a judge that calls a model
refuses (rescore.json says why) and the harness rolls out instead. Otherwise every
finished trace is scored again by task.score on the stored transcript, the same replies,
and written to outputs/<commit>/<role>/traces.jsonl with the new rewards and metrics.
No model is called.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from autoenv.child.audit import runtime_rewards
from autoenv.child.tasks import load_tasks
from autoenv.child.worker import sample_tasks
from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.core.traces import TRACES_FILE
from autoenv.endpoint.policies import GRADER_URL_VAR, Policies
from autoenv.endpoint.server import Endpoint
from autoenv.gates.oracle import OracleBook
from autoenv.run.fingerprint import FINGERPRINT_FILE, RESCORE_FILE, job_settings, task_fingerprint

COPIED = ("tasks.json", "configs")


async def rescore(job: Job) -> None:
    import verifiers.v1 as vf  # deferred: verifiers is imported only inside the child

    started = time.time()
    source = Path(job.rescore_from or "")
    plan = job.rollouts
    if plan is None:
        raise ValueError("the job has no rollout plan")
    env, tasks = await load_tasks(vf, job, "rescore")
    emit("loaded", tasks=len(tasks), seconds=round(time.time() - started, 3))
    chosen = sample_tasks(tasks, plan.examples, job.seed)
    mine = task_fingerprint(env, chosen, job_settings(job)) if chosen else {}
    reason = refusal(source, mine, chosen)
    if reason:
        finish(job, started, {"rescored": False, "reason": reason, "source": str(source)})
        return
    (job.out / FINGERPRINT_FILE).write_text(json.dumps(mine, indent=1))
    for name in COPIED:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, job.out / name, dirs_exist_ok=True)
        elif path.is_file():
            shutil.copy(path, job.out / name)
    by_key = {t.key: t for t in chosen}
    grader = await Endpoint(Policies(OracleBook(tasks), seed=job.seed)).start()  # a model-graded reward's grader
    os.environ[GRADER_URL_VAR] = grader.base_url
    counts = {"traces": 0, "rescored": 0, "kept": 0, "errors": 0}
    try:
        for role in plan.roles:
            (job.out / role).mkdir(parents=True, exist_ok=True)
            await rescore_file(vf, by_key, source / role / TRACES_FILE, job.out / role / TRACES_FILE, counts)
            emit("rescored", role=role, **counts)
    finally:
        await grader.stop()
    finish(job, started, {"rescored": True, "source": str(source), **counts})


def refusal(source: Path, mine: dict, chosen: list) -> str | None:
    """Why the stored rollouts under `source` cannot be rescored for these tasks, or None."""
    path = source / FINGERPRINT_FILE
    if not path.is_file():
        return f"the evaluation at {source} stored no task fingerprint (made before rescoring existed, or it failed)"
    if not chosen:
        return "the taskset loaded no tasks"
    theirs = json.loads(path.read_text())
    differ = [name for name in sorted(set(mine) | set(theirs)) if mine.get(name) != theirs.get(name)]
    if differ:
        return "the sampled tasks differ from the stored rollouts' in: " + ", ".join(differ)
    needs = runtime_rewards(chosen[0])
    if needs:
        return f"rewards or metrics that need the rollout's runtime cannot be scored from a transcript: {', '.join(needs)}"
    if chosen[0].plugged_judges():
        return "a judge reward calls a model: rescoring would not be free"
    return None


async def rescore_file(vf: Any, by_key: dict, source: Path, target: Path, counts: dict[str, int]) -> None:
    """Every episode of `source` to `target`, each finished trace rescored (others are copied as they were)."""
    lines = source.read_text(encoding="utf-8").splitlines() if source.is_file() else []
    with target.open("w", encoding="utf-8") as out:
        for line in lines:
            try:
                episode = json.loads(line)
            except json.JSONDecodeError:
                continue  # the incomplete last line of a killed evaluation
            for trace in episode.get("traces") or []:
                counts["traces"] += 1
                task = by_key.get((trace.get("task") or {}).get("key"))
                if task is None or not rescorable(trace):
                    counts["kept"] += 1
                    continue
                error = await rescore_trace(vf, task, trace)
                counts["errors" if error else "rescored"] += 1
            out.write(json.dumps(episode) + "\n")


def rescorable(trace: dict) -> bool:
    """A trace whose rollout finished: no error but the scoring's own (a reward that raised is rescored too)."""
    errors = trace.get("errors") or []
    return all(str(e.get("message", "")).startswith("scoring") for e in errors) and \
        (not trace.get("is_timeout") or str(trace.get("stop_condition")) == "scoring_timeout")


async def rescore_trace(vf: Any, task: Any, trace: dict) -> str | None:
    """Score the stored transcript with the task's rewards now; updates `trace` in place; the error or None."""
    # a deep copy: verifiers' validators replace nested dicts in place with their config objects
    parsed = vf.Trace.model_validate(copy.deepcopy({**trace, "rewards": {}, "metrics": {}, "errors": []}))
    parsed.is_timeout = False
    error = None
    try:
        await task.score(parsed)
    except Exception as e:  # noqa: BLE001 - a reward that raises is the candidate's env error, as in a rollout
        parsed.record_error(e)
        error = f"{type(e).__name__}: {e}"
    fresh = json.loads(parsed.model_dump_json())
    for name in ("rewards", "metrics", "errors", "is_timeout"):
        trace[name] = fresh.get(name)
    if error is None and str(trace.get("stop_condition", "")).startswith("scoring"):
        trace["stop_condition"] = "rescored"
    return error


def finish(job: Job, started: float, result: dict) -> None:
    result["seconds"] = round(time.time() - started, 3)
    (job.out / RESCORE_FILE).write_text(json.dumps(result, indent=1))
    emit("finished", seconds=result["seconds"], done={}, rescore=result)
