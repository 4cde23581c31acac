"""Install the candidate into the venv and import it in a fresh process to show the real error.

verifiers reports a candidate whose import fails on a missing dependency as "taskset not
found"; importing the module ourselves, in a child process (a package installed after an
interpreter started is not importable in it), surfaces the actual ModuleNotFoundError.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.errors import AutoEnvError

MODULE = "candidate_env"
STAMP = Path(sys.prefix) / ".autoenv-candidate-stamp"

_INSPECT = r"""
import importlib, inspect, json, sys, traceback
out = {"ok": False}
try:
    module = importlib.import_module(sys.argv[1])
    import verifiers.v1 as vf
    names = list(getattr(module, "__all__", []) or [])
    kinds = {"taskset": [], "env": [], "harness": [], "other": []}
    for name in names:
        obj = getattr(module, name, None)
        if obj is None:
            kinds["other"].append(name + " (missing)")
        elif inspect.isclass(obj) and issubclass(obj, vf.Taskset):
            kinds["taskset"].append(name)
        elif inspect.isclass(obj) and issubclass(obj, vf.Env):
            kinds["env"].append(name)
        elif inspect.isclass(obj) and issubclass(obj, vf.Harness):
            kinds["harness"].append(name)
        else:
            kinds["other"].append(name)
    out.update(ok=True, all=names, file=getattr(module, "__file__", None), **kinds)
    if len(kinds["taskset"]) == 1:
        task_cls = getattr(module, kinds["taskset"][0]).task_type()
        out["task"] = task_cls.__name__
        out["oracle"] = callable(getattr(task_cls, "oracle", None))
except BaseException as e:
    out.update(error=type(e).__name__, message=str(e), missing=getattr(e, "name", None),
               traceback=traceback.format_exc())
print("AUTOENV-INSPECT " + json.dumps(out))
"""


@dataclass
class CandidateInfo:
    module_file: str | None
    taskset: str
    env: str | None
    task: str | None
    has_oracle: bool
    import_seconds: float
    exports: list[str] = field(default_factory=list)


def child_env(candidate_dir: Path) -> dict[str, str]:
    """Environment for child processes: this venv's tools first, this candidate's code first."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(candidate_dir), env.get("PYTHONPATH", "")] if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stamp(candidate_dir: Path) -> str:
    pyproject = candidate_dir / "pyproject.toml"
    digest = hashlib.sha256(str(candidate_dir.resolve()).encode())
    digest.update(pyproject.read_bytes() if pyproject.is_file() else b"")
    return digest.hexdigest()


def install_candidate(candidate_dir: Path, force: bool = False) -> bool:
    """Editable-install the candidate (with its dependencies); return False when already current.

    The install is skipped when neither the candidate's path nor its pyproject changed:
    an editable install picks up code edits by itself.
    """
    pyproject = candidate_dir / "pyproject.toml"
    if not pyproject.is_file():
        raise AutoEnvError(
            "the candidate has no pyproject.toml",
            where=str(pyproject),
            fix="the candidate is a package named candidate-env (module candidate_env); "
            "see program.md, 'The candidate contract'",
        )
    stamp = _stamp(candidate_dir)
    if not force and STAMP.is_file() and STAMP.read_text() == stamp:
        return False
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:
        cmd = [uv, "pip", "install", "--python", sys.executable, "-e", str(candidate_dir)]
    else:
        cmd = [sys.executable, "-m", "pip", "install", "-q", "-e", str(candidate_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(candidate_dir))
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise AutoEnvError(
            f"installing the candidate failed:\n{tail}",
            where=str(pyproject),
            fix="fix the package metadata or dependencies named above, commit, and run again",
        )
    STAMP.write_text(stamp)
    return True


def inspect_candidate(candidate_dir: Path, module: str = MODULE) -> CandidateInfo:
    """Import the candidate in a fresh interpreter and report what it exports."""
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", _INSPECT, module],
        capture_output=True, text=True, env=child_env(candidate_dir), cwd=candidate_dir,
    )
    seconds = time.time() - started
    line = next((l for l in proc.stdout.splitlines() if l.startswith("AUTOENV-INSPECT ")), None)
    if line is None:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise AutoEnvError(
            f"importing {module} crashed the interpreter (exit {proc.returncode}):\n{tail}",
            where=str(candidate_dir),
            fix="run `python -c 'import candidate_env'` in the venv to reproduce",
        )
    out = json.loads(line[len("AUTOENV-INSPECT "):])
    if not out["ok"]:
        raise _import_error(out, candidate_dir, module)
    tasksets, envs = out["taskset"], out["env"]
    if len(tasksets) != 1:
        found = ", ".join(tasksets) or "none"
        raise AutoEnvError(
            f"{module}.__all__ must export exactly one vf.Taskset subclass; found {found} "
            f"(__all__ = {out['all']})",
            where=out.get("file") or str(candidate_dir),
            fix="list your Taskset class (and, for multi-turn, your vf.Env class) in __all__",
        )
    if len(envs) > 1:
        raise AutoEnvError(
            f"{module}.__all__ exports more than one vf.Env: {', '.join(envs)}",
            where=out.get("file") or str(candidate_dir),
            fix="export at most one Env subclass",
        )
    return CandidateInfo(
        module_file=out.get("file"), taskset=tasksets[0], env=envs[0] if envs else None,
        task=out.get("task"), has_oracle=bool(out.get("oracle")), import_seconds=round(seconds, 2),
        exports=out["all"],
    )


def _import_error(out: dict, candidate_dir: Path, module: str) -> AutoEnvError:
    trace_tail = "\n".join(out.get("traceback", "").strip().splitlines()[-8:])
    missing = out.get("missing")
    if out["error"] == "ModuleNotFoundError" and missing and missing.split(".")[0] != module:
        return AutoEnvError(
            f"the candidate imports `{missing}`, which is not installed "
            f"(verifiers would report this as 'taskset not found')\n{trace_tail}",
            where=str(candidate_dir / "pyproject.toml"),
            fix=f"add the distribution that provides `{missing}` to [project].dependencies, commit, run again",
        )
    if out["error"] == "ModuleNotFoundError" and missing == module:
        return AutoEnvError(
            f"there is no module `{module}` in the candidate",
            where=str(candidate_dir),
            fix=f"the package must be candidate/{module}/ (distribution name candidate-env)",
        )
    return AutoEnvError(
        f"importing the candidate failed: {out['error']}: {out['message']}\n{trace_tail}",
        where=str(candidate_dir),
        fix="fix the error above, commit, and run again",
    )
