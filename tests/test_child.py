"""The evaluation's one child process: stages in turn, deadlines that name the stage, no process left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import autoenv, commit_all, head, small_config
from cpu_hog import slack

from autoenv.core.errors import AutoEnvError
from autoenv.core.job import Job
from autoenv.core.paths import EXAMPLES
from autoenv.sandbox import rollouts
from autoenv.sandbox.install import inspect_candidate
from autoenv.sandbox.rollouts import Worker, WorkerFailed

pytestmark = pytest.mark.slow  # each test starts a child that imports verifiers


def candidate_with(tmp_path: Path, prelude: str) -> Path:
    """examples/arithmetic with `prelude` run first when candidate_env is imported."""
    target = tmp_path / "candidate"
    shutil.copytree(EXAMPLES / "arithmetic", target, ignore=shutil.ignore_patterns("__pycache__"))
    init = target / "candidate_env" / "__init__.py"
    init.write_text(textwrap.dedent(prelude) + "\n" + init.read_text())
    return target


def gone(pid: int) -> bool:
    """True when `pid` has exited (a zombie left for init to reap counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def leftovers(job_path: Path) -> str:
    return subprocess.run(["pgrep", "-af", str(job_path)], capture_output=True, text=True).stdout.strip()


def test_import_that_never_returns_is_stopped_at_the_stage_deadline(tmp_path, monkeypatch):
    candidate = candidate_with(tmp_path, "import time\ntime.sleep(3600)")
    monkeypatch.setattr(rollouts, "STARTUP_SECONDS", 4)
    out = tmp_path / "out"
    started = time.time()
    with pytest.raises(AutoEnvError) as caught:
        with Worker(Job(candidate_dir=str(candidate), out_dir=str(out))) as worker:
            inspect_candidate(candidate, worker)
    assert time.time() - started < 60
    assert "inspect stage was stopped after its deadline of 4 s" in caught.value.what
    assert leftovers(out / "job.json") == ""


def test_a_child_that_dies_names_the_stage_and_its_exit_code(tmp_path):
    candidate = candidate_with(tmp_path, "import os\nos._exit(7)")
    with pytest.raises(AutoEnvError) as caught:
        inspect_candidate(candidate)
    assert "died in the inspect stage with exit code 7" in caught.value.what
    assert caught.value.where == str(candidate)


def test_a_failing_stage_names_itself_and_its_log(tmp_path):
    candidate = candidate_with(tmp_path, "")
    out = tmp_path / "out"
    with Worker(Job(candidate_dir=str(candidate), out_dir=str(out))) as worker:
        assert inspect_candidate(candidate, worker).taskset == "ArithmeticTaskset"
        with pytest.raises(WorkerFailed) as caught:
            worker.run("audit")  # this job has no audit plan
    assert "the audit stage failed in the child process: ValueError: the job has no audit plan" in caught.value.what
    assert caught.value.where == str(out / "gates" / "audit.log")
    assert leftovers(out / "job.json") == ""


def test_the_child_stops_itself_when_the_harness_is_killed(tmp_path):
    candidate = candidate_with(tmp_path, "import time\ntime.sleep(3600)")
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import os, sys
        from autoenv.core.job import Job
        from autoenv.sandbox.rollouts import Worker
        worker = Worker(Job(candidate_dir={str(candidate)!r}, out_dir={str(out)!r})).__enter__()
        worker.proc.stdin.write('{{"stage": "inspect"}}\\n')
        worker.proc.stdin.flush()
        print(worker.proc.pid, flush=True)
        os._exit(0)  # as a SIGKILL would: no cleanup
    """)
    harness = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    child = int(harness.stdout.strip())
    deadline = time.time() + slack(20)
    while not gone(child) and time.time() < deadline:
        time.sleep(0.2)
    assert gone(child), "the child outlived its harness"


@pytest.mark.e2e
def test_one_evaluation_imports_the_candidate_in_two_child_processes_never_the_harness(run_repo, tmp_path):
    """The audit and the rollouts share one child; the stored rewards and the derived probes run in a fresh one
    (autoenv.child.reproduce_stage), so nothing the candidate kept in memory carries over."""
    root = run_repo("arithmetic", small_config(examples=2, rollouts_per_example=2))
    init = root / "candidate" / "candidate_env" / "__init__.py"
    init.write_text("import os as _os\n"
                    "with open(_os.environ['AUTOENV_TEST_PIDS'], 'a') as _f:\n"
                    "    _f.write(f'{_os.getpid()}\\n')\n" + init.read_text())
    commit_all(root, "record which processes import the candidate")
    pids = tmp_path / "pids"
    # Unconfined: the sandbox would (rightly) keep the candidate from writing outside outputs/.
    result = autoenv("eval", "--offline", cwd=root, env={"AUTOENV_TEST_PIDS": str(pids), "AUTOENV_SANDBOX": "none"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    imported = pids.read_text().split()
    assert len(imported) == 2 and len(set(imported)) == 2, f"the candidate was imported by: {imported}"
    out = root / "outputs" / head(root)
    assert json.loads((out / "gates" / "audit.json").read_text())["dataset"]["size"] == 1000
    assert (out / "target" / "traces.jsonl").is_file() and leftovers(out / "job.json") == ""
    assert os.getpid() not in map(int, imported)
