"""Install the candidate into the venv, confined, and import it in the child process to show the real error.

The install is the one stage that writes a venv, and it once ran the candidate's build backend as the
harness's user with the network (see autoenv.sandbox.buildcheck for what that backend did). Now nothing
of the candidate runs outside the sandbox: its build config is checked before anything runs, its declared
dependencies are fetched as wheels by a step that runs none of its code, and its own build runs in the
sandbox with no network; what that build leaves in site-packages beyond its own distribution is removed
and the install refused (autoenv.sandbox.sitepackages). It installs into the candidate's own venv, layered
on the harness's (autoenv.sandbox.candidatevenv), which the child runs: the harness's venv is not written.

verifiers reports a candidate whose import fails on a missing dependency as "taskset not
found"; importing the module ourselves, in the evaluation's child process (started after the
install: a package installed after an interpreter started is not importable in it), surfaces
the actual ModuleNotFoundError.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.core.job import CANDIDATE_MODULE, Job
from autoenv.sandbox import candidatevenv
from autoenv.sandbox.build import install_confined, site_packages, uv_binary
from autoenv.sandbox.buildcheck import build_plan
from autoenv.sandbox.rollouts import HarnessPatched, Worker, WorkerFailed
from autoenv.sandbox.serverenv import prepare_all

__all__ = ["inspect_candidate", "install_candidate", "site_packages", "uv_binary"]

STAMP = Path(".autoenv-candidate-stamp")  # in the venv the candidate is installed into
CONFINED = b"confined-1"  # in the stamp: an install made before the build was confined is made again


@dataclass
class CandidateInfo:
    module_file: str | None
    taskset: str
    env: str | None
    task: str | None
    has_oracle: bool
    import_seconds: float
    exports: list[str] = field(default_factory=list)


def _stamp(candidate_dir: Path) -> str:
    pyproject = candidate_dir / "pyproject.toml"
    digest = hashlib.sha256(str(candidate_dir.resolve()).encode() + CONFINED)
    digest.update(pyproject.read_bytes() if pyproject.is_file() else b"")
    return digest.hexdigest()


def install_candidate(candidate_dir: Path, force: bool = False, python: str | None = None) -> bool:
    """Editable-install the package in `candidate_dir` (with its dependencies) into `python`'s environment (by
    default the package's own venv, layered on the harness's: autoenv.sandbox.candidatevenv); return False when
    already current.

    The install is skipped when neither the package's path nor its pyproject changed:
    an editable install picks up code edits by itself. Otherwise, in order: the build config is
    checked (autoenv.sandbox.buildcheck: no backend-path, no setup.py, a known backend), the declared
    dependencies are fetched by a step that runs no code of the package (autoenv.sandbox.build), and the
    package's own build and install run in the sandbox with no network, no secret, and only site-packages
    and a private uv cache writable. What the build left in site-packages beyond the package's own
    distribution is removed and the install refused, naming it (autoenv.sandbox.sitepackages).
    A failed install leaves nothing of the package behind: the distribution it names is uninstalled (an
    earlier, working version of it would otherwise be imported as if the failed one were current) and the
    stamp removed; in the candidate's own venv, the whole venv is removed (made again next time).
    """
    pyproject = candidate_dir / "pyproject.toml"
    if not pyproject.is_file():
        raise AutoEnvError(
            "the candidate has no pyproject.toml",
            where=str(pyproject),
            fix="the candidate is a package named candidate-env (module candidate_env); "
            "see program.md, 'The candidate contract'",
        )
    plan = build_plan(candidate_dir)
    prepare_all(candidate_dir)  # OpenEnv servers in the candidate get their own venvs, before the sandbox
    layered = python is None
    python = python or candidatevenv.ensure(candidate_dir, uv_binary())
    stamp_file = Path(python).parent.parent / STAMP.name
    stamp = _stamp(candidate_dir)
    if not force and stamp_file.is_file() and stamp_file.read_text() == stamp:
        return False
    stamp_file.unlink(missing_ok=True)
    try:
        install_confined(candidate_dir, plan, python, editable=True, layered=layered)
    except AutoEnvError:
        if layered:  # the candidate's own venv is disposable: whatever its build changed goes with it
            shutil.rmtree(candidatevenv.venv_dir(candidate_dir), ignore_errors=True)
        raise
    stamp_file.write_text(stamp)
    return True


def inspect_candidate(candidate_dir: Path, worker: Worker | None = None, module: str = CANDIDATE_MODULE,
                      env_module: str | None = None) -> CandidateInfo:
    """Import the candidate's module in `worker`, the evaluation's child process (or a fresh one: then
    `module`, and `env_module` for the package of a separate env id), and read its exports."""
    if worker is None:
        with tempfile.TemporaryDirectory(prefix="autoenv-inspect-") as tmp:
            job = Job(candidate_dir=str(candidate_dir), out_dir=tmp, taskset_id=module.replace("_", "-"),
                      env_id=(env_module or "").replace("_", "-"))
            with Worker(job) as fresh:
                return inspect_candidate(candidate_dir, fresh)
    module, env_module = worker.job.module, worker.job.env_module  # what the child imports
    try:
        out = worker.run("inspect").inspected or {}
    except HarnessPatched:
        raise
    except WorkerFailed as e:
        raise AutoEnvError(f"the import check of {module} did not finish: {e.what}", where=str(candidate_dir),
                           fix=f"the person reproduces it with `python -c 'import {module}'` in the venv") from e
    if not out.get("ok"):
        raise _import_error(out, candidate_dir, module)
    tasksets, envs = out["taskset"], out["env"]
    if not tasksets and not envs and out.get("harness"):  # verifiers' `compact`: a harness package, no taskset
        raise AutoEnvError(
            f"{module} is a harness package, not an environment: its __all__ exports the vf.Harness "
            f"{', '.join(out['harness'])} and no vf.Taskset, so there are no tasks to check or evaluate",
            where=out.get("file") or str(candidate_dir),
            fix="evaluate an environment that uses this harness (its taskset's package), or, if this package is "
                "meant to be an environment, add a vf.Taskset subclass and list it in __all__")
    if len(tasksets) != 1:
        found = ", ".join(tasksets) or "none"
        raise AutoEnvError(
            f"{module}.__all__ must export exactly one vf.Taskset subclass; found {found} "
            f"(__all__ = {out['all']})",
            where=out.get("file") or str(candidate_dir),
            fix="list your Taskset class (and, for multi-turn, your vf.Env class) in __all__",
        )
    if env_module is not None:
        envs = out.get("env_module_envs") or []
        if len(envs) != 1:
            raise AutoEnvError(f"{env_module}.__all__ must export exactly one vf.Env subclass; found "
                               f"{', '.join(envs) or 'none'}", where=out.get("env_file") or str(candidate_dir),
                               fix="the person checks [candidate] env in config.toml: it names the package of the vf.Env")
    if len(envs) > 1:
        raise AutoEnvError(
            f"{module}.__all__ exports more than one vf.Env: {', '.join(envs)}",
            where=out.get("file") or str(candidate_dir),
            fix="export at most one Env subclass",
        )
    return CandidateInfo(
        module_file=out.get("file"), taskset=tasksets[0], env=envs[0] if envs else None,
        task=out.get("task"), has_oracle=bool(out.get("oracle")), import_seconds=round(out.get("import_seconds") or 0.0, 2),
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
        if module != CANDIDATE_MODULE:
            return AutoEnvError(f"there is no module `{module}`: neither installed nor in {candidate_dir}",
                                where=f"config.toml [candidate] taskset (module {module})",
                                fix="the person installs the environment (pip install ...), or sets [candidate] package to its "
                                "directory; the taskset id is its module name with `_` as `-`")
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
