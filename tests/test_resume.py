"""Resume: an evaluation stopped by SIGINT continues from its finished rollouts when run again."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import as_background_job, autoenv, freeze_warm_worker, freeze_worker, head, kill_pids, ledger, small_config

from autoenv.core.traces import finished_episodes, trim_partial_line
from autoenv.evaluation.preflight import unfinished_run
from autoenv.run.demo import make_run_repo
from autoenv.sandbox import warmchild

pytestmark = pytest.mark.e2e

EXAMPLES, ROLLOUTS = 6, 2
TOTAL = EXAMPLES * ROLLOUTS * 2


def slow_config() -> str:
    """Enough rollouts, slowly enough answered, that a SIGINT lands in the middle of them: one at a time, after
    the sixth is stored, at least 18 x 0.4 s of replies remain, however loaded the machine is."""
    config = small_config(examples=EXAMPLES, rollouts_per_example=ROLLOUTS, max_concurrent=1)
    return re.sub(r"(?m)^latency = [^\n#]*", "latency = 0.4  ", config)


def stored(out: Path) -> int:
    return sum(sum(finished_episodes(out / role).values()) for role in ("target", "strong"))


@pytest.mark.parametrize("stop, child", [(signal.SIGINT, "cold"), (signal.SIGTERM, "warm")])
def test_a_stopped_evaluation_rerun_reuses_the_finished_rollouts(tmp_path, stop, child, monkeypatch):
    """Cold, and with the child forked by the warm server (autoenv.sandbox.warmchild), whose episodes reach outputs/ from
    its staging folder while it runs and when it is killed."""
    root = make_run_repo("arithmetic", tmp_path / "run", slow_config())
    commit = head(root)
    out = root / "outputs" / commit
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTOENV_CACHE", str(cache))
    monkeypatch.setenv("AUTOENV_WARM", "1" if child == "warm" else "0")
    try:
        resumed(root, commit, out, stop)
    finally:
        warmchild.stop_all()


def resumed(root: Path, commit: str, out: Path, stop: signal.Signals) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "eval", "--offline"], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_background_job)
    deadline = time.time() + 300
    while stored(out) < 6 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    # the child is stopped first: under load the rest of the rollouts could otherwise finish before the signal is
    # handled (a wall-clock race); stopped, it is in the middle of them until the harness kills it
    warm = os.environ["AUTOENV_WARM"] == "1"
    frozen = freeze_warm_worker(root / "candidate") if warm else freeze_worker(out / "job.json")
    assert frozen, "no worker process names the job"
    proc.send_signal(stop)
    try:
        _, err = proc.communicate(timeout=300)  # a bound, not a wait: it returns on exit
    finally:
        kill_pids(frozen)
    assert proc.returncode == 130, err
    assert ledger(root) == [] and unfinished_run(out, []) is not None
    kept = stored(out)
    tasks = (out / "tasks.json").read_text()
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("warm child: forked" in result.stdout) == warm
    (entry,) = ledger(root)  # one entry for the one evaluation
    assert entry["reused_rollouts"] == kept and 6 <= kept < TOTAL
    assert re.search(rf"(?m)^reused_rollouts:\s+{kept}$", result.stdout)
    assert (out / "tasks.json").read_text() == tasks  # the same tasks
    assert not (out / "previous").exists()  # continued, not archived
    for role in ("target", "strong"):
        assert entry["stats"][role]["rollouts"] == EXAMPLES * ROLLOUTS
        finished = finished_episodes(out / role)  # the canaries, picked among all rollouts, are moved out: a task
        assert sum(finished.values()) == EXAMPLES * ROLLOUTS  # may hold fewer or more than ROLLOUTS, even none (both
        assert set(finished) <= {row["key"] for row in json.loads(tasks)}  # its rollouts drawn as canaries)
    print(f"resume after {stop.name}: {kept} of {TOTAL} rollouts reused ({kept / TOTAL:.0%})")
    assert f"- resumed: {kept} finished rollouts" in (root / "feedback" / f"{commit}.md").read_text()
    if stop == signal.SIGINT:  # --restart does not depend on how the evaluation was stopped: one full rerun suffices
        assert autoenv("eval", "--offline", "--restart", "--force", cwd=root).returncode == 0
        assert len(ledger(root)) == 2 and (out / "previous").is_dir()


def test_a_cut_last_line_is_trimmed(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps({"task": {"key": "a"}}) + "\n" + '{"task": {"ke')
    assert finished_episodes(tmp_path) == {"a": 1}
    trim_partial_line(tmp_path)
    assert path.read_text() == json.dumps({"task": {"key": "a"}}) + "\n"
