"""The evaluation's child process, seen from the harness: start it, send it stages, follow their events.

autoenv.child.main runs in it; this side shows progress bars, enforces each stage's deadline
and turns a failure into a WorkerFailed that names the stage and the log to read.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from autoenv.core import display
from autoenv.core.errors import AutoEnvError
from autoenv.core.events import parse
from autoenv.core.formats import excerpt
from autoenv.core.job import Job, RolloutPlan, RuntimeSpec, Seat
from autoenv.core.paths import EXAMPLES, shown
from autoenv.core.traces import read_rollouts
from autoenv.sandbox import network, warmchild
from autoenv.sandbox.confine import (
    SANDBOX_VAR,
    Sandbox,
    choose,
    needs_network,
    prepare_scripts,
    repository_of,
    runtime_files,
    writable_paths,
)
from autoenv.sandbox.environ import RUNTIME_KEYS, scrubbed

CHILD_MODULE = "autoenv.child.main"
STARTUP_SECONDS = 180  # the interpreter, verifiers and the candidate's import, on a loaded machine
CLOSE_SECONDS = 30  # a child told to stop (end of stdin) gets this long before SIGKILL


@dataclass
class WorkerResult:
    """What one stage of the child reported."""

    stage: str = ""
    inspected: dict | None = None
    smoke: dict | None = None
    loaded_tasks: int | None = None
    load_seconds: float | None = None
    seconds: float | None = None
    events: list[dict] = field(default_factory=list)


class WorkerFailed(AutoEnvError):
    pass


def child_env(candidate_dir: Path, hide: Iterable[str] = (), runtime: str = "subprocess") -> dict[str, str]:
    """Environment for child processes: no secrets (autoenv.sandbox.environ; `hide` names more) but the
    `runtime`'s own credentials, this venv's tools first, this candidate's code first."""
    env = scrubbed(drop=hide, keep=RUNTIME_KEYS.get(runtime, ()))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(candidate_dir), env.get("PYTHONPATH", "")] if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def deadline_seconds(job: Job, stage: str) -> float:
    """An outer bound on one stage, so nothing can hang an overnight run forever."""
    if stage == "inspect":
        return STARTUP_SECONDS
    seats = [s.max_concurrent or job.max_concurrent for s in job.rollouts.roles.values()] if job.rollouts else []
    slowest = min([job.max_concurrent, *seats])  # a model with fewer seats of its own takes more waves
    waves = math.ceil(job.expected_rollouts(stage) / slowest) + 1 + job.serial_rollouts(stage)
    return STARTUP_SECONDS + waves * job.rollout_timeout * 1.5


class Worker:
    """The evaluation's one child process (autoenv.child.main); `run(stage)` runs a stage in it.

    Its environment is child_env's, no secret in it, plus `env` (the forwarder's token);
    it runs in `sandbox` (default: bubblewrap when it works here, autoenv.sandbox.confine).
    Use it as a context manager: leaving the block ends the child (end of stdin, then
    SIGKILL to its whole process group), so no candidate process outlives the evaluation,
    and an exception or interrupt in the harness kills it at once.
    """

    def __init__(self, job: Job, env: dict[str, str] | None = None, hide: Iterable[str] = (),
                 sandbox: Sandbox | None = None):
        self.job = job
        self.sandbox = sandbox or choose()
        self.env = {**child_env(Path(job.candidate_dir), hide, job.runtime.type), **(env or {})}
        self.stderr_path = job.out / "worker.stderr"
        self.proc: subprocess.Popen | warmchild.WarmChild | None = None
        self.expired: str | None = None
        self._stderr: IO[str] | None = None

    def __enter__(self) -> Worker:
        out, candidate_dir = self.job.out, Path(self.job.candidate_dir)
        out.mkdir(parents=True, exist_ok=True)
        job_path = out / "job.json"
        self.job.write(job_path)
        self._stderr = open(self.stderr_path, "w")
        network = needs_network(self.job)
        if self.sandbox.kind == "bwrap" and not network:
            prepare_scripts(self.job)
        shown = [repository_of(candidate_dir), candidate_dir, *runtime_files(self.job)]
        source = [Path(self.job.rescore_from)] if self.job.rescore_from else []
        if all(path.resolve().is_relative_to(shown[0]) for path in source):
            # (a rescore source outside the repository would be one more folder per evaluation: a cold child)
            self.proc = warmchild.start(self.job, self.sandbox, self.env, shown, writable_paths(self.job), network,
                                        self._stderr)
            if self.proc is not None:
                display.note("warm child: forked by the warm server, verifiers already imported")
        if self.proc is None:
            cmd = self.sandbox.wrap([sys.executable, "-m", CHILD_MODULE, str(job_path)], readable=[*shown, *source],
                                    writable=writable_paths(self.job), network=network)
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                env=self.env, cwd=candidate_dir, start_new_session=True,
            )
        return self

    @property
    def warm(self) -> bool:
        """Whether the child was forked by the warm server (autoenv.sandbox.warmchild)."""
        return isinstance(self.proc, warmchild.WarmChild)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(kill=exc_type is not None)

    def run(self, stage: str) -> WorkerResult:
        """Run `stage` in the child under its deadline, following its events; raise WorkerFailed on failure."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None, "use the Worker as a context manager"
        try:
            proc.stdin.write(json.dumps({"stage": stage}) + "\n")
            proc.stdin.flush()
        except OSError:  # it has died already; following its output shows how
            pass
        result = WorkerResult(stage=stage)
        limit = deadline_seconds(self.job, stage)
        timer = threading.Timer(limit, self._expire, args=(stage, limit))
        timer.start()
        try:
            last = _follow(proc, result, proc.publish if isinstance(proc, warmchild.WarmChild) else None)
        except BaseException:
            self.kill()
            raise
        finally:
            timer.cancel()
            if isinstance(proc, warmchild.WarmChild):
                proc.publish()  # what the stage wrote, into the output folder the harness reads
        if last is not None and last["event"] == "error":
            raise _worker_error(last, self.job.out, self.sandbox.kind == "bwrap" and not needs_network(self.job))
        if last is None:
            proc.wait()
            tail = "\n".join(self.stderr_path.read_text(errors="replace").strip().splitlines()[-12:])
            raise WorkerFailed(
                (f"the {self.expired} stopped after its deadline of {limit:.0f} s" if self.expired else
                 f"the child process died in the {stage} stage with exit code {proc.returncode}")
                + (f":\n{tail}" if tail else ""),
                where=str(self.stderr_path),
                fix="read the log; a candidate that crashes the interpreter or never returns shows there",
            )
        return result

    def _expire(self, stage: str, limit: float) -> None:
        self.expired = f"{stage} stage was"
        self.kill()

    def kill(self) -> None:
        """SIGKILL the child's whole process group (its tool servers and programs too)."""
        if isinstance(self.proc, warmchild.WarmChild):
            self.proc.kill()  # the server kills the child's session and sweeps the sandbox
        elif self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self, kill: bool = False) -> None:
        proc = self.proc
        if proc is None:
            return
        if not kill and proc.stdin is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=CLOSE_SECONDS)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        proc.wait()
        if isinstance(proc, warmchild.WarmChild):
            proc.release()
        if proc.stdout is not None:
            proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
        self.proc = None


def run_worker(job: Job, env: dict[str, str] | None = None, sandbox: Sandbox | None = None) -> WorkerResult:
    """The job's audit and/or rollouts in a child process of their own (`env` added to its environment); the last
    stage's result."""
    stages = [name for name, plan in (("audit", job.audit), ("rollouts", job.rollouts)) if plan is not None]
    result = WorkerResult()
    with Worker(job, env=env, sandbox=sandbox) as worker:
        for stage in stages:
            result = worker.run(stage)
    return result


PUBLISH_SECONDS = 1.0  # a warm child's files reach the output folder at least this often while a stage runs


def _follow(proc: subprocess.Popen | warmchild.WarmChild, result: WorkerResult,
            publish: Callable[[], None] | None = None) -> dict | None:
    """Follow one stage's events up to its `stage-done` or `error` (returned), or None at end of output."""
    assert proc.stdout is not None
    progress = None
    published = time.monotonic()
    bars: dict[str, display.TaskID] = {}
    try:
        for line in proc.stdout:
            event = parse(line)
            if event is None:
                continue
            event["received"] = time.time()  # when the parent saw it (benchmarks time phases by it)
            if publish is not None and time.monotonic() - published >= PUBLISH_SECONDS:
                publish()
                published = time.monotonic()
            result.events.append(event)
            kind = event["event"]
            if kind in ("stage-done", "error"):
                result.seconds = event.get("seconds")
                return event
            if kind == "inspected":
                result.inspected = event
            elif kind == "loaded":
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
    finally:
        if progress is not None:
            progress.stop()
    return None


def _worker_error(event: dict, out_dir: Path, confined: bool = True) -> WorkerFailed:
    message = event.get("message", "")
    stage = event.get("stage", "rollouts")
    tail = "\n".join(event.get("traceback", "").strip().splitlines()[-10:])
    log = out_dir / ("gates/audit.log" if stage == "audit" else "worker.log")
    said = f"{event.get('type')}: {message}"
    host = network.failure(f"{said}\n{event.get('traceback', '')}")
    if host is not None:  # the Hub or another host the sandbox cannot reach: say so, and what to do
        return network_failed(stage, said, event.get("traceback", ""), host, confined, log)
    if "not found" in message.lower() and "taskset" in message.lower():
        fix = "verifiers could not import the candidate; the install stage shows the real import error"
    else:
        fix = f"read {log} and the traceback above"
    return WorkerFailed(f"the {stage} stage failed in the child process: {event.get('type')}: {message}\n{tail}",
                        where=str(log), fix=fix)


def network_failed(stage: str, said: str, traceback: str, host: str, confined: bool, log: Path) -> WorkerFailed:
    """A stage that failed because the candidate's code needs the network: what it needs, where it asked, what to do
    (never "the stage failed" alone)."""
    hub_data = network.hub(f"{said}\n{traceback}")
    what = "the dataset" if hub_data else "the environment"
    frames = [f for f in network.FRAME.findall(traceback) if not network.library(f[0])]
    where = f"{shown(frames[-1][0])}:{frames[-1][1]} in {frames[-1][2]}" if frames else str(log)
    need = (f"{what} needs the Hugging Face Hub ({host or network.HUB_HOST})" if hub_data
            else f"{what} needs network ({host or 'a host outside this machine'})")
    reach = ("the sandbox gives the candidate's code loopback only" if confined
             else "this machine could not reach it")
    fix = (("ship the data with the package (save the split as a file the loader reads, e.g. "
            "`Dataset.to_json`, then `load_dataset(\"json\", data_files=...)` on the shipped file)" if hub_data
            else "ship what it fetches with the package")
           + (f", or evaluate it where the network is allowed ({SANDBOX_VAR}=none runs the candidate's code "
              "unconfined)" if confined else ", or evaluate it on a machine with the network"))
    return WorkerFailed(f"the {stage} stage could not run: {need}, and {reach}: {excerpt(said, 300)}",
                        where=where, fix=fix)


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
