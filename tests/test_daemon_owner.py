"""The docker daemon AutoEnv starts is owned per start (autoenv.containers.daemon): a start while it runs holds it
too, a stop releases one start, and the last stop refuses while an evaluation's containers run on it.

A real process stands in for dockerd (a `sleep`, started here, whose pid the state file records as the daemon's):
starting the real dockerd needs root and changes the host's firewall, which tests/test_docker_runtime.py covers
where it can. The engine's answers are the one thing replaced: whether an engine answers, and which containers run.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from autoenv.containers import daemon
from autoenv.core.errors import AutoEnvError


@pytest.fixture
def ours(tmp_path, monkeypatch):
    """A stand-in daemon recorded as AutoEnv's, one start holding it; undo() records instead of touching the host."""
    monkeypatch.setattr(daemon, "STATE_DIR", tmp_path)
    monkeypatch.setattr(daemon, "engine_problem", lambda kind: None)  # the engine answers
    undone: list[dict] = []
    monkeypatch.setattr(daemon, "undo", lambda before: undone.append(before) or ["nothing"])
    proc = subprocess.Popen(["sleep", "300"])
    (tmp_path / "state.json").write_text(json.dumps({"pid": proc.pid, "before": {"forward": "0"}, "holders": 1}))
    yield proc, undone
    proc.kill()
    proc.wait()


def test_a_second_start_holds_the_daemon_and_the_first_stop_only_releases_it(ours, monkeypatch):
    proc, undone = ours
    monkeypatch.setattr(daemon, "in_use", lambda: [])
    said = daemon.start()
    assert f"pid {proc.pid}" in said and "2 starts" in said
    said = daemon.stop()
    assert "released one start" in said and "keeps running for the other 1" in said
    assert proc.poll() is None and undone == []
    said = daemon.stop()
    assert proc.wait(timeout=30) is not None and undone == [{"forward": "0"}]
    assert said.startswith(f"dockerd (pid {proc.pid}) stopped") and not daemon.state_file().exists()
    assert daemon.stop() == "no daemon started by AutoEnv: nothing stopped"


def test_the_last_stop_refuses_while_an_evaluations_containers_run_and_force_stops_it(ours, monkeypatch):
    proc, undone = ours
    monkeypatch.setattr(daemon, "in_use", lambda: ["autoenv-rollout-1", "autoenv-rollout-2"])
    with pytest.raises(AutoEnvError) as refused:
        daemon.stop()
    assert "2 evaluation container(s)" in refused.value.what and "autoenv-rollout-1" in refused.value.what
    assert "--force" in refused.value.fix and proc.poll() is None and daemon.state_file().exists()
    daemon.stop(force=True)
    assert proc.wait(timeout=30) is not None and undone


def test_an_engine_autoenv_did_not_start_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(daemon, "STATE_DIR", tmp_path)
    monkeypatch.setattr(daemon, "engine_problem", lambda kind: None)
    said = daemon.start()
    assert "not one AutoEnv started" in said and "leaves it alone" in said and not daemon.state_file().exists()
    assert daemon.stop() == "no daemon started by AutoEnv: nothing stopped"
