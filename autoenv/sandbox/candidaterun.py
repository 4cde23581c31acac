"""The candidate's code run for a command other than an evaluation: in the sandbox, with its own venv's Python.

Three commands once imported the candidate with the harness's interpreter, the candidate's folder on
sys.path, as the harness's user: `autoenv export grpo` loading the tasks (autoenv.export.dump), the
OpenEnv check's oracle episode (autoenv.export.episode) and `autoenv serve --candidate` playing the
oracle (autoenv.cli). There the candidate's import could read $HOME, write the repository and its
.git/, and import whatever it found in the harness's venv. Now each installs the candidate into its
own venv (autoenv.sandbox.install, confined) and runs that venv's Python in the sandbox
(autoenv.sandbox.confine), with the child's environment (the allowlist: no secret), the candidate's
folder and its venv shown read-only, and nothing writable: what such a command produces comes back
on stdout. Those that talk to a server on this machine (the episode, the served endpoint) share the
harness's network, since a sandbox with a network of its own has a loopback nobody outside reaches;
they hold no key and see no file beyond the sandbox's view.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoenv.core import display
from autoenv.sandbox import candidatevenv
from autoenv.sandbox.confine import Sandbox, choose
from autoenv.sandbox.install import install_candidate
from autoenv.sandbox.rollouts import child_env


@contextmanager
def installed(candidate_dir: Path, disposable: bool = False) -> Iterator[Path]:
    """`candidate_dir` installed (confined) into its own venv; with `disposable` (a copy in a temporary folder,
    whose venv no later command finds) the venv is removed after."""
    candidate_dir = candidate_dir.resolve()
    try:
        install_candidate(candidate_dir)
        yield candidate_dir
    finally:
        if disposable:
            shutil.rmtree(candidatevenv.venv_dir(candidate_dir), ignore_errors=True)


def confined(candidate_dir: Path, module: str, args: list[str], network: bool = False,
             extra_env: dict[str, str] | None = None, sandbox: Sandbox | None = None) -> tuple[list[str], dict[str, str]]:
    """(command, environment) running `python -m module args` with the candidate's venv in the sandbox: the
    candidate's folder and venv shown read-only, nothing writable, the child's environment (no secret) and
    `extra_env`; with `network`, the harness's network (to reach a server on this machine's loopback)."""
    python = candidatevenv.child_python(candidate_dir)
    sandbox = sandbox or choose()
    if sandbox.kind != "bwrap":
        display.warn(f"the candidate's code runs unconfined (sandbox: none): {sandbox.reason}")
    cmd = sandbox.wrap([python, "-m", module, *args],
                       readable=[candidate_dir, *candidatevenv.child_paths(candidate_dir)], writable=[], network=network)
    env = child_env(candidate_dir, network=network) | (extra_env or {})
    return cmd, env
