"""`autoenv export openenv --check DIR`: the OpenEnv submission checklist, run without Docker.

manifest (keys, then openenv's own static validation with the pinned openenv), separation
(the client and models never import the server: read, then imported with server/ absent),
reserved MCP names, the server started in its own uv venv, `openenv validate --url` against
it, and one episode played by the candidate's oracle. Each check is PASS, FAIL or SKIP with
what it saw, reported as soon as it is known; the slow ones (the venv, openenv's CLI, the
server's start, the episode) say what they wait on while they run (display.Waiting: a live
line on a terminal, a line at least every 30 s elsewhere), so a first run's minutes are never
silent.
"""

from __future__ import annotations

import ast
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from autoenv.core import display
from autoenv.sandbox.candidaterun import confined, installed
from autoenv.sandbox.confine import choose
from autoenv.sandbox.environ import sandbox_env
from autoenv.sandbox.serverenv import prepare

REQUIRED_KEYS = ("spec_version", "name", "type", "runtime", "app", "port")
RESERVED = {"reset", "step", "state", "close"}
CLIENT_FILES = ("__init__.py", "client.py", "models.py")
READY_SECONDS = 300  # a first start compiles the venv's bytecode: minutes on a loaded 2-core machine
ORACLE_SHARE = 0.95


@dataclass
class Check:
    name: str
    status: str  # PASS | FAIL | SKIP
    detail: str


CLI_SECONDS = 900  # openenv's CLI imports gradio: minutes on a loaded 2-core machine


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """`cmd` bounded by CLI_SECONDS; a timeout comes back as exit 124 with what happened."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_SECONDS, check=False, **kwargs)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"no answer within {CLI_SECONDS} s: {' '.join(cmd[:3])}")


def run_checks(package: Path, report: Callable[[Check], None] = lambda check: None) -> list[Check]:
    """Every check in order; `report(check)` is called as each one is known."""
    package = package.resolve()
    checks: list[Check] = []

    def add(*found: Check) -> None:
        for check in found:
            checks.append(check)
            report(check)

    add(*manifest_checks(package), separation_static(package), reserved_names(package))
    if any(c.status == "FAIL" for c in checks if c.name == "manifest.keys"):
        return checks
    try:
        with display.Waiting("server.venv", "preparing the server's uv venv (minutes the first time)"):
            python = prepare(package)
    except Exception as e:  # noqa: BLE001 - reported as the failed check, with uv's own words
        add(Check("server.venv", "FAIL", str(e)))
        return checks
    add(Check("server.venv", "PASS", f"uv venv {python.parent.parent}"))
    with display.Waiting("manifest.static", "openenv validate --level static (its CLI loads for minutes)"):
        add(static_validation(package, python))
    with display.Waiting("separation.runtime", "importing the client with server/ absent"):
        add(separation_runtime(package, python))
    with display.Waiting("server.start", f"starting the server, waiting for /health (up to {READY_SECONDS} s)") \
            as waiting, serve(package, python) as (url, failure):
        waiting.stop()
        if failure:
            add(Check("server.start", "FAIL", failure))
            return checks
        add(Check("server.start", "PASS", f"{url}/health answered"))
        with display.Waiting("validate.url", f"openenv validate --url {url}"):
            add(validate_url(url, python))
        with display.Waiting("episode.oracle", "one episode played by the candidate's oracle"):
            add(oracle_episode(package, url))
    return checks


def manifest_checks(package: Path) -> list[Check]:
    path = package / "openenv.yaml"
    if not path.is_file():
        return [Check("manifest.keys", "FAIL", f"{path} is missing")]
    try:
        manifest = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        return [Check("manifest.keys", "FAIL", f"{path}: not YAML: {e}")]
    if not isinstance(manifest, dict):
        return [Check("manifest.keys", "FAIL", f"{path}: not a mapping")]
    missing = [k for k in REQUIRED_KEYS if k not in manifest]
    problems = [f"missing {', '.join(missing)}"] if missing else []
    if manifest.get("runtime") not in (None, "fastapi"):
        problems.append(f"runtime is {manifest.get('runtime')!r}, not fastapi")
    if ":" not in str(manifest.get("app", ":")):
        problems.append(f"app {manifest.get('app')!r} is not module:attribute")
    out = [Check("manifest.keys", "FAIL" if problems else "PASS", "; ".join(problems) or f"{path.name}: "
                  + ", ".join(f"{k}={manifest[k]}" for k in REQUIRED_KEYS))]
    out.append(Check("manifest.validation_block", "PASS" if "validation" in manifest else "FAIL",
                     "present" if "validation" in manifest else "openenv 0.10 wants a `validation:` block"))
    return out


def static_validation(package: Path, python: Path) -> Check:
    cli = python.parent / "openenv"
    proc = _run([str(cli), "validate", str(package), "--level", "static", "--skip-build"])
    said = " ".join((proc.stdout + proc.stderr).split())[-300:]
    return Check("manifest.static", "PASS" if proc.returncode == 0 else "FAIL",
                 f"openenv validate --level static: exit {proc.returncode}: {said}")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def separation_static(package: Path) -> Check:
    bad = [f"{name}: {imp}" for name in CLIENT_FILES if (package / name).is_file()
           for imp in _imports(package / name) if imp.lstrip(".").split(".")[0] == "server"
           or f"{package.name}.server" in imp or imp.startswith(".server")]
    return Check("separation.static", "FAIL" if bad else "PASS",
                 "; ".join(bad) or f"{', '.join(n for n in CLIENT_FILES if (package / n).is_file())} import no server module")


def separation_runtime(package: Path, python: Path) -> Check:
    """Import the client from a copy of the package with server/ removed."""
    with tempfile.TemporaryDirectory(prefix="autoenv-separation-") as tmp:
        copy = Path(tmp) / package.name
        shutil.copytree(package, copy, ignore=shutil.ignore_patterns("server", ".autoenv", "candidate", ".venv"))
        code = (f"import sys, {package.name}.client as c; "
                f"bad = [m for m in sys.modules if m.startswith('{package.name}.server')]; "
                "print('server modules imported:', bad) if bad else None; sys.exit(1 if bad else 0)")
        cmd, env = confined_server([str(python), "-c", code], [Path(tmp)], network=False)
        proc = _run(cmd, cwd=tmp, env=env)
    said = " ".join((proc.stdout + proc.stderr).split())[-300:]
    return Check("separation.runtime", "PASS" if proc.returncode == 0 else "FAIL",
                 f"import {package.name}.client with server/ absent: " + ("ok" if proc.returncode == 0 else said))


def reserved_names(package: Path) -> Check:
    """No MCP tool named reset/step/state/close: a tool-decorated function with a reserved name."""
    bad = []
    for path in sorted((package / "server").rglob("*.py")) if (package / "server").is_dir() else []:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in RESERVED
                    and any("tool" in ast.unparse(d) for d in node.decorator_list)):
                bad.append(f"{path.relative_to(package)}:{node.lineno} {node.name}")
    return Check("mcp.reserved_names", "FAIL" if bad else "PASS", "; ".join(bad) or "no MCP tool uses a reserved name")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(package: Path, python: Path) -> Iterator[tuple[str, str | None]]:
    """The package's server on a free loopback port, in its venv; yields (url, failure or None)."""
    app = str(yaml.safe_load((package / "openenv.yaml").read_text())["app"])
    cwd = package.parent if app.startswith(package.name + ".") else package
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as errors:
        cmd, env = confined_server([str(python), "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
                                    "--log-level", "warning"], [cwd], network=True)
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors, env=env)
        try:
            failure: str | None = f"no answer from {url}/health within {READY_SECONDS} s"
            deadline = time.monotonic() + READY_SECONDS
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    errors.seek(0)
                    failure = f"the server exited with {proc.returncode}: {errors.read().decode(errors='replace')[-600:]}"
                    break
                try:
                    with urllib.request.urlopen(url + "/health", timeout=2):
                        failure = None
                        break
                except OSError:
                    time.sleep(0.2)
            yield url, failure
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def confined_server(cmd: list[str], readable: list[Path], network: bool) -> tuple[list[str], dict[str, str]]:
    """(command, environment) running `cmd` (the package's server code, in its venv) in the sandbox: `readable` and
    the server venvs shown read-only, nothing writable, the allowlisted environment (no secret); with `network`,
    this machine's (the server listens on its loopback for openenv's CLI and the episode)."""
    return choose().wrap(cmd, readable=readable, writable=[], network=network), sandbox_env(network=network)


def validate_url(url: str, python: Path) -> Check:
    proc = _run([str(python.parent / "openenv"), "validate", "--url", url, "--json"])
    try:
        report = json.loads(proc.stdout)
        criteria = report.get("criteria") or report.get("checks") or []
        summary = (f"{sum(1 for c in criteria if c.get('passed'))}/{len(criteria)} criteria passed"
                   if isinstance(criteria, list) else json.dumps(report)[:200])
    except ValueError:
        summary = " ".join((proc.stdout + proc.stderr).split())[-300:]
    return Check("validate.url", "PASS" if proc.returncode == 0 else "FAIL",
                 f"openenv validate --url: exit {proc.returncode}: {summary}")


def oracle_episode(package: Path, url: str) -> Check:
    info_path = package / ".autoenv" / "export.json"
    if not info_path.is_file():
        return Check("episode.oracle", "SKIP", "not an AutoEnv export (.autoenv/export.json missing): no oracle to play")
    info = json.loads(info_path.read_text())
    candidate = package / info["candidate"]
    # the candidate's code in the sandbox, its own venv's Python (autoenv.sandbox.candidaterun); the harness's network
    # (the server listens on this machine's loopback), no secret, nothing writable
    with installed(candidate, disposable=True) as folder:
        cmd, env = confined(folder, "autoenv.export.episode", [url, str(folder), info["kind"]], network=True)
        proc = _run(cmd, env=env, cwd=folder)
    if proc.returncode != 0:
        return Check("episode.oracle", "FAIL", "the oracle's episode crashed: " + proc.stderr.strip()[-500:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    best = float(info.get("max_reward") or 1.0)
    ok = result["reward"] >= ORACLE_SHARE * best
    return Check("episode.oracle", "PASS" if ok else "FAIL",
                 f"reward {result['reward']:.3f} of {best:g} in {result['steps']} step(s)")
