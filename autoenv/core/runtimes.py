"""`[runtime]` settings checked before anything runs: the runtime types, the harnesses, and what each needs.

verifiers runs each rollout's chat program in a runtime: `subprocess` (this machine, the
default) or its container and sandbox runtimes (`docker`, `podman`, `modal`, `prime`, `e2b`). Their
settings pass through unchanged from a sub-table (`[runtime.docker]`, ...) and are validated
against verifiers' own config models, so a typo names its config.toml line before anything
runs. How the child uses them is autoenv.child.runtime.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from pydantic import TypeAdapter, ValidationError


RUNTIME_TYPES = ("subprocess", "docker", "podman", "modal", "prime", "e2b")
CONTAINER_RUNTIMES = ("docker", "podman")  # a local engine (autoenv.containers)


HARNESSES = ("inprocess", "stock")
INFO_SECONDS = 30
START_HINT = {
    "docker": "start the Docker daemon (`sudo systemctl start docker`, or without systemd, as root, "
              "`.venv/bin/autoenv runtime daemon start`), or set runtime.type = \"subprocess\"",
    "podman": "check `podman info` (rootless podman needs subuid/subgid entries for your user), "
              "or set runtime.type = \"subprocess\"",
}


def settings_problems(kind: str, settings: dict) -> list[tuple[str, str]]:
    """(key, message) for each setting verifiers' own runtime config model rejects."""
    if kind == "subprocess":
        return [(key, "is not a setting of the subprocess runtime (it has none)") for key in settings]
    from verifiers.v1.runtimes import RuntimeConfig  # deferred: verifiers only for a non-default runtime

    try:
        TypeAdapter(RuntimeConfig).validate_python({**settings, "type": kind})
    except ValidationError as e:
        out = []
        for error in e.errors():
            loc = [str(part) for part in error["loc"] if str(part) != kind]
            key = ".".join(loc) or kind
            if error["type"] == "extra_forbidden":
                out.append((key, f"is not a setting of verifiers' {kind} runtime"))
            else:
                out.append((key, f"is rejected by verifiers' {kind} runtime config: {error['msg']}"))
        return out
    return []


def readiness_problem(kind: str) -> tuple[str, str] | None:
    """(what is missing, how to fix it) when `kind`'s client library or credentials are absent."""
    if kind == "subprocess":
        return None
    if kind in CONTAINER_RUNTIMES:
        return engine_problem(kind)  # the engine asked, not the PATH
    library = {"modal": "modal", "prime": "prime_sandboxes", "e2b": "e2b"}[kind]
    package = {"modal": "modal", "prime": "prime-sandboxes", "e2b": "e2b"}[kind]
    if importlib.util.find_spec(library) is None:
        return (f"the {kind} runtime needs the `{library}` Python package, which is not installed in this venv",
                f".venv/bin/python -m pip install {package}, or set runtime.type = \"subprocess\"")
    if kind == "modal":
        if not (os.environ.get("MODAL_TOKEN_ID") and os.environ.get("MODAL_TOKEN_SECRET")) and \
                not Path(os.environ.get("MODAL_CONFIG_PATH", Path.home() / ".modal.toml")).is_file():
            return ("the modal runtime needs Modal credentials: neither $MODAL_TOKEN_ID/$MODAL_TOKEN_SECRET "
                    "nor ~/.modal.toml is set", "run `modal token new` or export MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
    if kind == "prime":
        from verifiers.v1.utils.prime import load_prime_config  # deferred: verifiers only for this runtime

        if not (os.environ.get("PRIME_API_KEY") or load_prime_config().get("api_key")):
            return ("the prime runtime needs a Prime key: $PRIME_API_KEY is not set and `prime login` was not run",
                    "run `prime login` or export PRIME_API_KEY=...")
    if kind == "e2b" and not os.environ.get("E2B_API_KEY"):
        return ("the e2b runtime needs $E2B_API_KEY, which is not set", "export E2B_API_KEY=... (from e2b.dev)")
    return None


def engine_problem(engine: str) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) when `engine`'s CLI is missing or its engine does not answer `info`."""
    if shutil.which(engine) is None:
        return (f"the {engine} runtime needs the `{engine}` CLI on PATH, and it was not found",
                f"install {engine.capitalize()} (Debian: apt-get install {'docker.io' if engine == 'docker' else 'podman'}), "
                "or set runtime.type = \"subprocess\"")
    try:
        proc = subprocess.run([engine, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=INFO_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return (f"`{engine} info` did not answer within {INFO_SECONDS} s: the engine is hung or overloaded",
                START_HINT[engine])
    except OSError as e:
        return (f"`{engine} info` could not run: {e}", START_HINT[engine])
    if proc.returncode != 0 or not proc.stdout.strip():
        said = (proc.stderr or proc.stdout).strip().splitlines()
        detail = said[-1] if said else f"exit {proc.returncode}"
        if "permission denied" in detail.lower():
            return (f"the {engine} engine refused this user: {detail}",
                    "add yourself to the `docker` group (`sudo usermod -aG docker $USER`, then log in again)")
        return (f"the {engine} engine is not reachable: {detail}", START_HINT[engine])
    return None
