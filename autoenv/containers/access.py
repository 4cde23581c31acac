"""How an evaluation's child reaches a container engine, decided in the harness; and whether the engine failed it.

- Another runtime, or the subprocess one: nothing (the sandbox hides every engine socket).
- docker in the bubblewrap sandbox: the guard (autoenv.containers.guard) for the evaluation's life.
- docker unconfined (AUTOENV_SANDBOX=none, or no bwrap): the engine as the user's docker CLI finds it;
  the candidate can do whatever that CLI can, which the evaluation already warns about.
- podman in the sandbox: refused. Podman has no daemon: the child would run containers with the
  user's own rights and storage, which the sandbox cannot confine; docker, or AUTOENV_SANDBOX=none.

`[runtime.docker]` without an `image` gets the local base image when it is built
(autoenv.containers.image), else verifiers' default (pulled from Docker Hub).

`AUTOENV_CONTAINER_EGRESS=off` puts the child's containers on a network with no route past the
host (autoenv.containers.guard.offline_network; with the sandbox only, where the guard can see
each container's creation).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoenv.containers import image
from autoenv.containers.engine import endpoint, guard_problem
from autoenv.core.runtimes import engine_problem
from autoenv.containers.guard import Guard, guarded
from autoenv.core import display
from autoenv.core.config import Runtime
from autoenv.core.errors import AutoEnvError, EngineUnavailable
from autoenv.core.job import Job
from autoenv.core.runtimes import CONTAINER_RUNTIMES

EGRESS_VAR = "AUTOENV_CONTAINER_EGRESS"
DEFAULT_IMAGES = {"docker": "python:3.11-slim", "podman": "docker.io/library/python:3.11-slim"}  # verifiers' own


@contextmanager
def engine_access(job: Job, sandbox_kind: str) -> Iterator[tuple[Job, dict[str, str], Guard | None]]:
    """`job` with the engine's way in for its child, the variables for it, and the guard (None without one)."""
    kind = job.runtime.type
    if kind not in CONTAINER_RUNTIMES:
        yield job, {}, None
        return
    if kind == "docker" and "image" not in job.runtime.settings:
        local = image.default_image()
        if local:
            display.note(f"docker runtime: the local base image {local} ([runtime.docker] image unset)")
            runtime = job.runtime.model_copy(update={"settings": {**job.runtime.settings, "image": local}})
            job = job.model_copy(update={"runtime": runtime})
    if sandbox_kind != "bwrap":
        if os.environ.get(EGRESS_VAR, "on").lower() == "off":
            display.note(f"{EGRESS_VAR}=off applies in the sandbox only: unconfined, containers keep their network")
        yield job, {}, None
        return
    assert kind == "docker", "preflight refuses podman in the sandbox (check_engine_ready)"
    point = endpoint()
    problem = guard_problem(point)
    if problem:
        raise AutoEnvError(problem, where="$DOCKER_HOST or the docker context", fix="serve the engine on a Unix socket "
                           "on this machine (the default), or run with AUTOENV_SANDBOX=none")
    offline = os.environ.get(EGRESS_VAR, "on").lower() == "off"
    with guarded(job, point, offline=offline) as (guarded_job, env, guard):
        yield guarded_job, env, guard


def check_engine_ready(runtime: Runtime, config_path: Path, sandbox_kind: str) -> None:
    """Preflight, after the engine answered: what a container runtime needs that is the person's to give, so that a
    missing image is never recorded as the candidate's environment errors."""
    kind = runtime.type
    if kind not in CONTAINER_RUNTIMES:
        return
    where = f"{config_path} ([runtime.{kind}] image)"
    if kind == "podman" and sandbox_kind == "bwrap":
        raise AutoEnvError("the podman runtime runs its containers from the child itself, with your rights and "
                           "storage (podman has no daemon), which the sandbox cannot confine",
                           where=f"{config_path} (runtime.type)",
                           fix="the person's: use runtime.type = \"docker\" (the sandbox hands the child a guarded "
                           "engine), or run with AUTOENV_SANDBOX=none (the candidate then runs unconfined)")
    settings = getattr(runtime, kind)
    wanted = settings.get("image") or (image.default_image(kind) if kind == "docker" else None) or \
        DEFAULT_IMAGES[kind]
    problem = image.availability(wanted, kind)
    if problem:
        raise AutoEnvError(problem, where=where, fix="the person's: build the local base image (`.venv/bin/autoenv "
                           "runtime image`, then leave [runtime.docker] image unset), or name an image this engine "
                           "has or can pull")


def engine_failure(kind: str, guard: Guard | None) -> EngineUnavailable | None:
    """When the evaluation's engine did not answer (now, or a request through the guard): infrastructure."""
    if kind not in CONTAINER_RUNTIMES:
        return None
    problem = engine_problem(kind)
    missed = guard.unreachable if guard is not None else []
    if problem is None and not missed:
        return None
    what = problem[0] if problem else f"{len(missed)} request(s) to it went unanswered (first: {missed[0]})"
    return EngineUnavailable(f"runtime engine unavailable: {what}", where="[runtime] type = " + kind,
                             fix="the candidate is not at fault and the verdict is inconclusive: the engine is the "
                             f"person's to start (`{kind} info` must answer), then run evaluate.sh again on this commit")
