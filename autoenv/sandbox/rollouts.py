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
from autoenv.core.events import read_events
from autoenv.core.formats import excerpt
from autoenv.core.job import Job, RolloutPlan, RuntimeSpec, Seat
from autoenv.core.paths import EXAMPLES, shown
from autoenv.core.record import ForwardedRoute
from autoenv.core.traces import PROVIDER_OUTCOMES, read_rollouts
from autoenv.sandbox import forwarder, network, warmchild
from autoenv.sandbox.candidatevenv import child_paths, child_python
from autoenv.sandbox.childio import ChildPipes, ProcessWatch, limit_hit, processes_exceeded
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
from autoenv.sandbox.environ import sandbox_env
from autoenv.sandbox.trust import folder_trust

CHILD_MODULE = "autoenv.child.main"
STARTUP_SECONDS = 180  # the interpreter, verifiers and the candidate's import, on a loaded machine
CLOSE_SECONDS = 30  # a child told to stop (end of stdin) gets this long before SIGKILL
LIMIT_FIX = ("the candidate's to fix (use less); a person who wants it allowed raises that key of [limits] in "
             "config.toml (0: no limit)")


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
    patched: list[str] | None = None
    """What the child's tripwire found changed of AutoEnv's code (autoenv.child.tripwire)."""


class WorkerFailed(AutoEnvError):
    pass


class HarnessPatched(WorkerFailed):
    """The candidate's code patched AutoEnv's code in the child: the commit is recorded as tampered."""

    def __init__(self, stage: str, names: list[str], log: Path) -> None:
        self.names = names
        super().__init__(f"the candidate's code changed AutoEnv's own code in the child process, found in the "
                         f"{stage} stage: {', '.join(names[:8])}" + (f" and {len(names) - 8} more" if len(names) > 8
                                                                     else ""),
                         where=str(log), fix="remove the code that replaces, wraps or traces AutoEnv's functions "
                         "(a reward is scored the same whether it is audited or rolled out) and evaluate again")


def child_env(candidate_dir: Path, hide: Iterable[str] = (), runtime: str = "subprocess", network: bool = False
              ) -> dict[str, str]:
    """Environment for child processes: the allowlist's variables only (autoenv.sandbox.environ.sandbox_env: no
    secret, whatever its name; `hide` names more to drop), the `runtime`'s own credentials, with `network` the
    proxies that hold no password; this venv's tools first, this candidate's code first; the machine's certificates
    as a hashed folder (autoenv.sandbox.trust: an HTTP client then parses none)."""
    env = folder_trust(sandbox_env(drop=hide, runtime=runtime, network=network))
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
        self.env = {**child_env(Path(job.candidate_dir), hide, job.runtime.type, needs_network(job)), **(env or {})}
        self.stderr_path = job.out / "worker.stderr"
        self.proc: subprocess.Popen | warmchild.WarmChild | None = None
        self.expired: str | None = None
        self.exceeded: str | None = None  # a limit the harness stopped the child for
        self.pipes: ChildPipes | None = None
        self._watch: ProcessWatch | None = None

    def __enter__(self) -> Worker:
        out = self.job.out
        out.mkdir(parents=True, exist_ok=True)
        job_path = out / "job.json"
        confined = self.job.resources.model_copy(update={"confined": self.sandbox.kind == "bwrap"})
        self.job = self.job.model_copy(update={"resources": confined})
        self.job.write(job_path)
        self.pipes = ChildPipes(out)
        try:
            self._start(job_path, self.pipes)
        except BaseException:
            self.pipes.close()
            self.pipes = None
            raise
        return self

    def _start(self, job_path: Path, pipes: ChildPipes) -> None:
        candidate_dir = Path(self.job.candidate_dir)
        network = needs_network(self.job)
        if self.sandbox.kind == "bwrap":  # uv's cache is read-only inside: its scripts prepared here first
            prepare_scripts(self.job)
        shown = [repository_of(candidate_dir), candidate_dir, *runtime_files(self.job), *child_paths(candidate_dir)]
        source = [Path(self.job.rescore_from)] if self.job.rescore_from else []
        if all(path.resolve().is_relative_to(shown[0]) for path in source):
            # (a rescore source outside the repository would be one more folder per evaluation: a cold child)
            self.proc = warmchild.start(self.job, self.sandbox, self.env, shown, writable_paths(self.job), network,
                                        pipes.child_fds())
            if self.proc is not None:
                display.note("warm child: forked by the warm server, verifiers already imported")
        if self.proc is None:
            child = [child_python(candidate_dir), "-m", CHILD_MODULE, str(job_path), str(pipes.events_fd)]
            cmd = self.sandbox.wrap(child, readable=[*shown, *source],
                                    writable=writable_paths(self.job), network=network)
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE, stdout=pipes.stdout.write_fd, stderr=pipes.stderr.write_fd, text=True,
                pass_fds=(pipes.events_fd,), env=self.env, cwd=candidate_dir, start_new_session=True,
            )
            if self.job.resources.processes:  # a warm child's are counted by its server
                self._watch = ProcessWatch(self.proc.pid, self.job.resources.processes, self._too_many)
        pipes.started()

    def restart(self) -> None:
        """End this child and start a fresh one for the same job (its logs appended to): the stages run next see
        nothing the candidate's code kept in memory in the stages before (autoenv.child.reproduce_stage)."""
        self.close()
        self.expired = self.exceeded = None
        self.pipes = ChildPipes(self.job.out, append=True)
        try:
            self._start(self.job.out / "job.json", self.pipes)
        except BaseException:
            self.pipes.close()
            self.pipes = None
            raise

    @property
    def warm(self) -> bool:
        """Whether the child was forked by the warm server (autoenv.sandbox.warmchild)."""
        return isinstance(self.proc, warmchild.WarmChild)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(kill=exc_type is not None)

    def run(self, stage: str) -> WorkerResult:
        """Run `stage` in the child under its deadline, following its events; raise WorkerFailed on failure."""
        proc, pipes = self.proc, self.pipes
        assert proc is not None and proc.stdin is not None and pipes is not None, "use the Worker as a context manager"
        try:
            proc.stdin.write(json.dumps({"stage": stage}) + "\n")
            proc.stdin.flush()
        except OSError:  # it has died already; following its output shows how
            pass
        result = WorkerResult(stage=stage)
        limit = deadline_seconds(self.job, stage)
        timer = threading.Timer(limit, self._expire, args=(stage, limit))
        timer.start()
        fw = forwarder.serving(self.env.get(forwarder.TOKEN_VAR, ""))
        try:
            last = _follow(pipes.events, result, proc.publish if isinstance(proc, warmchild.WarmChild) else None,
                           canaries_armed(fw, self.job) if stage == "rollouts" else None)
        except BaseException:
            self.kill()
            raise
        finally:
            timer.cancel()
            if isinstance(proc, warmchild.WarmChild):
                proc.publish()  # what the stage wrote, into the output folder the harness reads
        if result.patched:
            raise HarnessPatched(stage, result.patched, self.job.out / (
                "gates/audit.log" if stage == "audit" else "gates/derive.log" if stage == "derive" else "worker.log"))
        if last is not None and last["event"] == "error":
            raise _worker_error(last, self.job, self.sandbox.kind == "bwrap" and not needs_network(self.job))
        if last is None:
            proc.wait()
            pipes.stderr.join()  # the log complete before its tail is read
            tail = "\n".join(self.stderr_path.read_text(errors="replace").strip().splitlines()[-12:])
            if isinstance(proc, warmchild.WarmChild) and proc.limit == "processes":
                self.exceeded = processes_exceeded(self.job.resources)
            exceeded = self.exceeded or limit_hit(self.job.resources, tail)
            raise WorkerFailed(
                (f"the {self.expired} stopped after its deadline of {limit:.0f} s" if self.expired else
                 f"{exceeded}: the child process ended in the {stage} stage" if exceeded else
                 f"the child process died in the {stage} stage with exit code {proc.returncode}")
                + (f":\n{tail}" if tail else ""),
                where=str(self.stderr_path),
                fix=LIMIT_FIX if exceeded else
                "read the log; a candidate that crashes the interpreter or never returns shows there",
            )
        if stage == "rollouts" and result.smoke is not None:
            fw = forwarder.serving(self.env.get(forwarder.TOKEN_VAR, ""))
            check_smoke(self.job, result.smoke, fw.report().routes if fw is not None else None)
        failed = result.inspected if result.inspected and not result.inspected.get("ok") else None
        if failed and (exceeded := limit_hit(self.job.resources, f"{failed.get('error')}: {failed.get('message')}\n"
                                                                 f"{failed.get('traceback', '')}")):
            raise WorkerFailed(f"{exceeded}: importing the candidate failed: {failed.get('error')}: "
                               f"{failed.get('message')}", where=str(self.job.candidate_dir), fix=LIMIT_FIX)
        return result

    def _too_many(self) -> None:
        self.exceeded = processes_exceeded(self.job.resources)
        self.kill()

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
        if self._watch is not None:
            self._watch.stop()
        if isinstance(proc, warmchild.WarmChild):
            proc.release()
        if self.pipes is not None:
            self.pipes.close()
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


MAX_KEPT_EVENTS = 200_000  # a stage's events kept in its result; past this they are acted on, not kept


def canaries_armed(fw: forwarder.Forwarder | None, job: Job) -> Callable[[str, dict], None] | None:
    """The forwarder's canaries follow the rollouts stage: armed once the smoke rollout is over, told how many
    rollouts of the forwarded seats the child planned (autoenv.core.canaries)."""
    canaries = fw.canaries if fw is not None else {}
    if not canaries:
        return None

    def listen(kind: str, event: dict) -> None:
        if kind in ("smoke", "planned"):  # (no smoke when resumed)
            for seat in canaries.values():
                seat.arm()
        if kind == "planned" and isinstance(left := event.get("left", event.get("total")), dict):
            for role, seat in canaries.items():  # the rollouts the stage still plays (resumed: fewer)
                seat.expect(int(left.get(role, 0)))
    return listen


def _follow(events: IO[str], result: WorkerResult, publish: Callable[[], None] | None = None,
            listen: Callable[[str, dict], None] | None = None) -> dict | None:
    """Follow one stage's events (the child's event pipe) up to its `stage-done` or `error` (returned), or None at
    the pipe's end. What the child says is shown as the child's, never as the harness's own lines; an event the
    harness cannot read (the candidate's code can write on the pipe) is the candidate's crash, never the harness's."""
    shown = _Shown()
    published = time.monotonic()
    try:
        for event in read_events(events):
            event["received"] = time.time()  # when the parent saw it (benchmarks time phases by it)
            if publish is not None and time.monotonic() - published >= PUBLISH_SECONDS:
                publish()
                published = time.monotonic()
            if len(result.events) < MAX_KEPT_EVENTS:
                result.events.append(event)
            kind = event["event"]
            if kind in ("stage-done", "error"):
                result.seconds = event.get("seconds") if isinstance(event.get("seconds"), (int, float)) else None
                return event
            try:
                shown.event(kind, event, result)
                if listen is not None:
                    listen(kind, event)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise WorkerFailed(f"the child sent an event the harness cannot read ({type(e).__name__}: {e}): "
                                   f"{excerpt(json.dumps(event), 300)}", where="the child's event pipe",
                                   fix="the candidate's code wrote on the child's event pipe; it must not") from None
    finally:
        shown.stop()
    return None


class _Shown:
    """The display of one stage's events: its progress bars, and its notes."""

    def __init__(self) -> None:
        self.progress: display.Progress | display.PlainProgress | None = None
        self.bars: dict[str, display.TaskID] = {}

    def event(self, kind: str, event: dict, result: WorkerResult) -> None:
        if kind == "inspected":
            result.inspected = event
        elif kind == "loaded":
            tasks, seconds = int(event["tasks"]), float(event["seconds"])
            result.loaded_tasks, result.load_seconds = tasks, seconds
            display.note(f"taskset loaded: {tasks} tasks in {seconds:.2f} s")
        elif kind == "smoke":
            result.smoke = event
            if event["outcome"] == "ok":
                display.note(f"smoke rollout ok, reward {float(event['reward']):.3f}")
            else:
                display.warn(f"smoke rollout failed: {event['outcome']}: {event.get('error')}")
        elif kind == "planned":
            self.start({role: int(n) for role, n in event["total"].items()}, status="")
        elif kind == "rollout" and self.progress is not None:
            self.progress.update(self.bars[event["role"]], completed=int(event["done"]),
                                 status="" if event["ok"] else "errors")
        elif kind == "probe":
            if self.progress is not None:
                self.progress.advance(self.bars["probes"])
        elif kind == "probe-plan":
            self.start({"probes": int(event["total"])}, status=str(event.get("mode", "")))
        elif kind == "probe-plan-more" and self.progress is not None and "probes" in self.bars:
            # more plays than planned: a probe's strategies each tried (autoenv.child.rollout_probes.play_trials)
            display.grow(self.progress, self.bars["probes"], int(event["more"]))
        elif kind == "note":
            display.note(f"child process: {event.get('message')}")
        elif kind == "patched":
            result.patched = [str(name)[:300] for name in event["names"]][:50]

    def start(self, totals: dict[str, int], status: str) -> None:
        self.stop()
        self.progress = progress = display.rollout_progress()
        progress.start()
        self.bars = {name: progress.add_task(name, total=n, status=status) for name, n in totals.items()}

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def check_smoke(job: Job, smoke: dict, routes: dict[str, ForwardedRoute] | None = None) -> None:
    """The child's `smoke` event checked against what the harness knows: a rollout failing at the provider decides
    who is at fault (`inconclusive`, not the candidate's), so the candidate's code, which shares the child's
    process, must not be able to claim one. Offline no provider is in play (the endpoint is the child's own); online
    the forwarder (`routes`, its live counts) must have passed the target's requests on to the provider; and the
    smoke trace the child wrote must say the same. Otherwise the smoke event is the candidate's crash. (A request
    the provider answered 2xx can still end as a provider error, an error inside a stream: only "nothing reached the
    provider" is certain.)"""
    outcome = smoke.get("outcome")
    if outcome not in PROVIDER_OUTCOMES:
        return
    where = job.out / "smoke" / "traces.jsonl"
    fix = "read worker.stdout, worker.stderr and the smoke trace; fix the candidate"
    if job.rollouts is not None and all(seat.embedded for seat in job.rollouts.roles.values()):
        raise WorkerFailed(f"the child reported the smoke rollout failing at the provider ({outcome}), but this "
                           "evaluation has no provider (every model is the built-in endpoint, in the child): the "
                           "candidate's code broke the rollout or forged the report", where=str(where), fix=fix)
    target = (routes or {}).get("target")
    if outcome == "provider_error" and target is not None and target.requests == 0:
        raise WorkerFailed(f"the child reported the smoke rollout failing at the provider ({outcome}), but the "
                           "harness's forwarder passed no request of the target model to the provider: the "
                           "candidate's code kept the rollout from it or forged the report", where=str(where), fix=fix)
    traced = read_rollouts(where.parent) if where.is_file() else []
    if not traced or traced[-1].outcome != outcome:
        seen = traced[-1].outcome if traced else "no smoke trace"
        raise WorkerFailed(f"the child reported the smoke rollout failing at the provider ({outcome}), but its trace "
                           f"says {seen}: the candidate's code forged the report", where=str(where), fix=fix)


def _worker_error(event: dict, job: Job, confined: bool = True) -> WorkerFailed:
    message = event.get("message", "")
    stage = event.get("stage", "rollouts")
    tail = "\n".join(str(event.get("traceback", "")).strip().splitlines()[-10:])
    log = job.out / ("gates/audit.log" if stage == "audit" else "worker.log")
    said = f"{event.get('type')}: {message}"
    exceeded = limit_hit(job.resources, f"{said}\n{event.get('traceback', '')}")
    if exceeded is not None:
        return WorkerFailed(f"{exceeded}: the {stage} stage failed in the child process: {said}\n{tail}",
                            where=str(log), fix=LIMIT_FIX)
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
