"""The evaluation's one child process: the candidate runs here, never in the harness.

Run as `python -m autoenv.child.main JOB.json EVENTS_FD`. It imports verifiers once, says `ready`, then
runs the stages the parent sends on stdin, one JSON line each (`{"stage": "inspect"}`,
`"audit"`, `"rollouts"`; after the rollouts the parent starts a fresh child for `"reproduce"` and
`"derive"`), in one event loop, answering each with its events and a
`stage-done` (or an `error`, after which it exits). End of stdin ends it. The stages
share the process, so the install check, the gates and the rollouts pay for one
interpreter and one verifiers import instead of three, while the candidate stays out of
the harness's own process. A child whose parent died stops itself.

Events go to the harness's pipe on descriptor EVENTS_FD (autoenv.core.events), opened before
anything of the candidate's is imported; stdout and stderr are the candidate's logs, kept by the
harness up to a size. The resource limits ([limits], autoenv.child.rlimits) are set at the same
point. verifiers' logging goes to the stage's log file.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn

from autoenv.child import rlimits, toolfork
from autoenv.child.audit import audit
from autoenv.child.derived import derive
from autoenv.child.exports import inspect_module
from autoenv.child.judge_routing import GraderPolicies, route_judges
from autoenv.child.reproduce_stage import reproduce
from autoenv.child.rescore_stage import rescore
from autoenv.child.tripwire import Tripwire
from autoenv.child.worker import run as rollouts
from autoenv.core.events import emit, open_channel
from autoenv.core.job import Job
from autoenv.endpoint.server import Endpoint
from autoenv.sandbox.forwarder import relay

PARENT_POLL_SECONDS = 1.0


async def inspect(job: Job) -> None:
    out = inspect_module(job.module)
    if out.get("ok") and job.env_module and job.env_module != job.module:
        env = inspect_module(job.env_module)
        if not env.get("ok"):
            env["message"] = f"{job.env_module} (env id {job.env_id}): {env.get('message')}"
            out = env
        else:
            out.update(env=env["env"], env_module_envs=env["env"], env_file=env.get("file"))
    elif out.get("ok") and job.env_module:
        out["env_module_envs"] = out["env"]
    emit("inspected", **out)


STAGES: dict[str, Callable[[Job], Awaitable[None]]] = {"inspect": inspect, "audit": audit, "rollouts": rollouts,
                                                        "derive": derive, "rescore": rescore, "reproduce": reproduce}
LOGS = {"inspect": "inspect.log", "audit": "gates/audit.log", "rollouts": None, "derive": "gates/derive.log",
        "rescore": "rescore.log", "reproduce": "gates/reproduce.log"}  # None: the job's log_name


def log_to(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(path), level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def watch_parent(parent: int) -> None:
    """Stop when the harness is gone (killed with SIGKILL, say): nobody would read the results.

    A thread, not a task: it must fire while a stage blocks the event loop (an import
    that never returns, a reward stuck in a loop).
    """
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != parent:
            os._exit(3)


def offline(job: Job) -> bool:
    """No real model in play: the audit and derive stages, or rollouts whose every seat is scripted."""
    return job.rollouts is None or all(seat.embedded for seat in job.rollouts.roles.values())


async def serve(job: Job) -> int:
    loop = asyncio.get_running_loop()
    if offline(job):  # a vf.Judge inside the candidate reaches the built-in grader (autoenv.child.judge_routing)
        grader = await Endpoint(GraderPolicies(seed=job.seed)).start()
        route_judges(grader.base_url)
    # bound and recorded before the first stage imports the candidate (autoenv.child.tripwire)
    stages, emitted = dict(STAGES), emit
    wire = Tripwire({"autoenv.child.main.STAGES": STAGES})
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return 0
        stage = json.loads(line)["stage"]
        log_to(job.out / (LOGS.get(stage) or job.log_name))
        started = time.time()
        try:
            patched(wire, stage, "before", emitted)
            await stages[stage](job)
            patched(wire, stage, "after", emitted)
        except BaseException as e:  # every failure is reported as an event; the parent decides
            emitted("error", stage=stage, type=type(e).__name__, message=str(e), traceback=traceback.format_exc())
            return 1
        emitted("stage-done", stage=stage, seconds=round(time.time() - started, 3))


class HarnessPatched(Exception):
    """The candidate's code changed AutoEnv's code in the child (autoenv.child.tripwire)."""


def patched(wire: Tripwire, stage: str, when: str, emitted: Callable[..., None]) -> None:
    """Report and stop when the tripwire finds AutoEnv's code changed."""
    names = wire.changed()
    if names:
        emitted("patched", stage=stage, when=when, names=names[:50])
        raise HarnessPatched(f"the candidate's code patched AutoEnv's code in the child ({when} the {stage} stage): "
                             + ", ".join(names[:10]))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    started = time.time()
    if len(argv) > 1:
        open_channel(int(argv[1]))
    job = prepare(Path(argv[0]))
    import_verifiers()  # deferred: paid once here, while the parent is busy with its own stage
    toolfork.start(job.candidate_dir)  # a copy made before the candidate is imported forks its tool servers

    emit("ready", seconds=round(time.time() - started, 3))
    return asyncio.run(serve(job))


def import_verifiers(*more: str) -> None:
    """verifiers (and the modules `more`, where they import) imported with the cyclic garbage collector paused, and
    what the import made then frozen out of its reach: the import allocates a few hundred thousand objects that live
    as long as the process, and the collections it set off, then every full one in the stages, walked them all
    (measured on arithmetic: the child ready in 1.9 s instead of 2.4, its audit 0.3 s shorter). A forked warm child
    also keeps those pages shared with its server."""
    gc.disable()
    try:
        import verifiers.v1  # noqa: F401 (deferred: the import is what this function times and pauses the collector for)

        for name in more:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
    finally:
        gc.freeze()
        gc.enable()


def forked(job_path: Path, started: float, events_fd: int | None = None) -> int:
    """The same child, forked by the warm server (autoenv.child.forkserver) with verifiers already imported;
    the server, not a thread here, ends it when the harness goes."""
    if events_fd is not None:
        open_channel(events_fd)
    job = prepare(job_path)
    toolfork.start(job.candidate_dir)
    emit("ready", seconds=round(time.time() - started, 3), warm=True)
    return asyncio.run(serve(job))


def prepare(job_path: Path) -> Job:
    job = Job.read(job_path)
    rlimits.apply(job.resources)  # before the candidate is imported: everything it runs inherits them
    job.out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, job.candidate_dir)
    relay(job)  # sandboxed without network: real models through the forwarder's socket
    return job


def leave(code: int) -> NoReturn:
    """End the child once its stages are done without the interpreter's teardown: with verifiers and the candidate
    loaded, the module cleanup and the collection of their objects took 0.7-0.9 s after the last stage (paid by
    every evaluation, two or three children each), and a thread the candidate left running would hold the exit
    until the harness's kill. Events are flushed as they are sent; the candidate's stdout and stderr and the
    stage logs are flushed here. The candidate's own atexit hooks do not run: its child ends like a killed one,
    which it must survive anyway."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more to keep
            pass
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    # one module, whichever way it is reached: `import autoenv.child.main` in the candidate finds this one (the
    # stage table the child runs), not a fresh copy the tripwire has not seen
    sys.modules.setdefault("autoenv.child.main", sys.modules[__name__])
    leave(main())
