"""Run the rollout worker in a fresh subprocess and follow its events with progress bars."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from autoenv import display
from autoenv.errors import AutoEnvError
from autoenv.events import parse
from autoenv.install import child_env
from autoenv.job import Job, RolloutPlan, RuntimeSpec, Seat
from autoenv.paths import EXAMPLES
from autoenv.traces import read_rollouts


@dataclass
class WorkerResult:
    smoke: dict | None = None
    loaded_tasks: int | None = None
    load_seconds: float | None = None
    seconds: float | None = None
    events: list[dict] = field(default_factory=list)


class WorkerFailed(AutoEnvError):
    pass


def deadline_seconds(job: Job) -> float:
    """An outer bound on the whole worker, so nothing can hang an overnight run forever."""
    waves = math.ceil(job.expected_rollouts() / job.max_concurrent) + 1
    return 180 + waves * job.rollout_timeout * 1.5


def run_worker(job: Job, module: str = "autoenv.worker") -> WorkerResult:
    """Run `python -m module job.json` in a fresh process under a deadline, following its events."""
    out_dir, candidate_dir = job.out, Path(job.candidate_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    job_path = out_dir / "job.json"
    job.write(job_path)
    stderr_path = out_dir / "worker.stderr"
    result = WorkerResult()
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(job_path)],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=child_env(candidate_dir),
            cwd=candidate_dir, start_new_session=True,
        )
        timer = threading.Timer(deadline_seconds(job), _kill, args=(proc,))
        timer.start()
        try:
            _follow(proc, result)
            proc.wait()
        except BaseException:
            _kill(proc)
            raise
        finally:
            timer.cancel()
    error = next((e for e in result.events if e["event"] == "error"), None)
    if error is not None:
        raise _worker_error(error, out_dir)
    if proc.returncode != 0:
        tail = "\n".join(stderr_path.read_text(errors="replace").strip().splitlines()[-12:])
        killed = proc.returncode in (-signal.SIGKILL, -signal.SIGTERM)
        raise WorkerFailed(
            ("the rollout worker was stopped after its deadline" if killed else
             f"the rollout worker exited with code {proc.returncode}") + (f":\n{tail}" if tail else ""),
            where=str(stderr_path),
            fix="read the worker log; a candidate that crashes the interpreter or never returns shows there",
        )
    return result


def _follow(proc: subprocess.Popen, result: WorkerResult) -> None:
    progress = None
    bars: dict[str, int] = {}
    try:
        for line in proc.stdout:
            event = parse(line)
            if event is None:
                continue
            event["received"] = time.time()  # when the parent saw it (benchmarks time phases by it)
            result.events.append(event)
            kind = event["event"]
            if kind == "loaded":
                result.loaded_tasks, result.load_seconds = event["tasks"], event["seconds"]
                display.note(f"taskset loaded: {event['tasks']} tasks in {event['seconds']:.2f} s")
            elif kind == "smoke":
                result.smoke = event
                reward = event.get("reward")
                if event["outcome"] == "ok":
                    display.note(f"smoke rollout ok, reward {reward:.3f}")
                else:
                    display.warn(f"smoke rollout failed: {event['outcome']}: {event.get('error')}")
            elif kind == "planned":
                progress = display.rollout_progress()
                progress.start()
                bars = {role: progress.add_task(role, total=n, status="") for role, n in event["total"].items()}
            elif kind == "rollout" and progress is not None:
                progress.update(bars[event["role"]], completed=event["done"],
                                status="" if event["ok"] else "errors")
            elif kind == "probe":
                if progress is not None:
                    progress.advance(bars["probes"])
            elif kind == "probe-plan":
                progress = display.rollout_progress()
                progress.start()
                bars = {"probes": progress.add_task("probes", total=event["total"], status=event.get("mode", ""))}
            elif kind == "note":
                display.note(event["message"])
            elif kind == "finished":
                result.seconds = event["seconds"]
    finally:
        if progress is not None:
            progress.stop()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _worker_error(event: dict, out_dir: Path) -> WorkerFailed:
    message = event.get("message", "")
    tail = "\n".join(event.get("traceback", "").strip().splitlines()[-10:])
    if "not found" in message.lower() and "taskset" in message.lower():
        fix = "verifiers could not import the candidate; the install stage shows the real import error"
    else:
        fix = f"read {out_dir / 'worker.log'} and the traceback above"
    return WorkerFailed(f"the rollout worker failed: {event.get('type')}: {message}\n{tail}",
                        where=str(out_dir / "worker.log"), fix=fix)


def oracle_job(candidate: Path, out: Path, examples: int, concurrency: int = 1, harness: str = "inprocess") -> Job:
    """A worker job: the `oracle` policy alone on `examples` tasks, one rollout each."""
    return Job(candidate_dir=str(candidate), out_dir=str(out), seed=0, max_concurrent=concurrency,
               rollout_timeout=600, max_turns=10, runtime=RuntimeSpec(harness=harness),
               rollouts=RolloutPlan(examples=examples, rollouts=1, smoke=False,
                                    roles={"target": Seat(model="oracle", embedded=True)}))


def warm() -> str:
    """One scripted rollout of the arithmetic example, so verifiers' first-rollout setup
    (uv preparing the chat program under ~/.cache) happens now, not in a user's first eval."""
    candidate = EXAMPLES / "arithmetic"
    with tempfile.TemporaryDirectory(prefix="autoenv-warm-") as tmp:
        started = time.time()
        # The stock harness, so uv prepares the chat program a `harness = "stock"` run needs.
        run_worker(oracle_job(candidate, Path(tmp), examples=1, harness="stock"))
        rollouts = read_rollouts(Path(tmp) / "target")
        if not rollouts or rollouts[0].outcome != "ok":
            detail = rollouts[0].error if rollouts else "no trace was written"
            raise AutoEnvError(f"the warm-up rollout failed: {detail}", where=str(candidate),
                               fix="check that uv can reach PyPI (verifiers prepares its chat program with uv)")
        return f"first rollout ready ({time.time() - started:.1f} s)"
