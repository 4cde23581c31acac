"""The local base image needs no package index, and a docker evaluation runs with its containers' egress off.

With a real Docker engine (the machine's, or one of AutoEnv's started for the module, as tests/test_docker_runtime.py
does) and the local base image (autoenv.containers.image).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from autoenv.containers import image
from autoenv.containers.guard import OFFLINE_NETWORK, offline_network
from tests.conftest import autoenv, head, ledger
from tests.test_docker_runtime import BWRAP, docker_config, engine, guard_folders  # noqa: F401 (its fixtures)

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]
REACH_PYPI = ("import socket, sys\ntry:\n    socket.create_connection(('pypi.org', 443), timeout=5)\nexcept OSError as e:\n"
              "    sys.exit(f'no egress: {e}')\nprint('reached pypi.org')")


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_the_chat_programs_preparation_needs_no_network_in_the_base_image(engine):
    """verifiers' own preparation of its stock chat program (runtimes/base.py prepare_uv_script), in a container
    without any network: the lockfile and the synced environment are baked in at the path it uses."""
    path, data = image.chat_program()
    box = docker("run", "--detach", "--network", "none", "--entrypoint", "sleep", engine, "infinity").stdout.strip()
    try:
        assert box, "the container did not start"
        written = subprocess.run(["docker", "exec", "-i", box, "sh", "-c", f"cat > {path}.new.tmp"], input=data,
                                 capture_output=True, timeout=120, check=False)
        assert written.returncode == 0, written.stderr
        prepared = docker("exec", "--env", "UV_OFFLINE=false", box, "sh", "-c",
                          f"mv -f {path}.new.tmp {path} && uv sync --script {path} -q --no-config "
                          f"&& uv python find --script {path} --no-config")
        assert prepared.returncode == 0, prepared.stderr
        interpreter = prepared.stdout.strip().splitlines()[-1]
        assert "/environments-v2/" in interpreter, interpreter
        imported = docker("exec", box, interpreter, "-c", "import openai, mcp, httpx, tenacity")
        assert imported.returncode == 0, imported.stderr
    finally:
        docker("rm", "--force", box)


def test_the_python3_check_is_answered_from_the_cache_by_image_id(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(image, "PYTHON_CACHE", tmp_path / "docker-python3.json")
    known = image.image_id(engine)
    assert known and image.has_python(engine) is True
    assert json.loads(image.PYTHON_CACHE.read_text()) == {known: True}
    # A planted answer is what the next check returns: it starts no container to ask again.
    image.PYTHON_CACHE.write_text(json.dumps({known: False}))
    assert image.has_python(engine) is False


def test_the_offline_network_has_no_route_past_the_host(engine):
    network = offline_network()
    try:
        probe = docker("run", "--rm", "--network", network, "--entrypoint", "python3", engine, "-c", REACH_PYPI)
        assert probe.returncode != 0 and "no egress" in probe.stderr, probe.stdout + probe.stderr
    finally:
        docker("network", "rm", OFFLINE_NETWORK)


@pytest.mark.e2e
@pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
def test_a_docker_evaluation_succeeds_with_its_containers_egress_off(engine, run_repo):
    root = run_repo("arithmetic", docker_config())
    seen = subprocess.Popen(["docker", "events", "--filter", "type=network", "--filter", "event=connect",
                             "--format", "{{.Actor.Attributes.name}}"], stdout=subprocess.PIPE, text=True)
    try:
        result = autoenv("eval", "--offline", cwd=root, env={"AUTOENV_CONTAINER_EGRESS": "off"}, timeout=840)
    finally:
        seen.terminate()
        joined, _ = seen.communicate(timeout=60)
        docker("network", "rm", OFFLINE_NETWORK)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    entry = ledger(root)[-1]
    assert entry["verdict"]["verdict"] == "baseline", entry["verdict"]
    job = json.loads((root / "outputs" / head(root) / "job.json").read_text())
    assert job["runtime"]["settings"]["image"] == engine
    networks = joined.split()
    assert networks and set(networks) == {OFFLINE_NETWORK}, networks  # every container joined it, none the bridge


def test_the_guard_answers_the_next_task_container_with_one_started_ahead(engine, guard_folders):
    """Two rollouts' runtimes in a row through the guard: the second `create` is answered with the spare the guard
    started after the first (renamed to the name verifiers asked for, running, usable), and the spare left unused at
    the end is removed with the guard."""
    import asyncio
    import os
    import tempfile

    from verifiers.v1.runtimes import DockerConfig, make_runtime

    from autoenv.containers.engine import endpoint
    from autoenv.containers.guard import LABEL, Guard

    async def two_rollouts() -> list[str]:
        said = []
        for _ in range(2):
            runtime = make_runtime(DockerConfig(image=engine))
            try:
                await runtime.start()
                result = await runtime.run(["sh", "-c", "echo ran in $(hostname)"], {})
                assert result.exit_code == 0, result.stderr
                said.append(result.stdout.strip())
            finally:
                await runtime.stop()
        return said

    share, mounts = guard_folders
    saved, saved_tmp = os.environ.get("DOCKER_HOST"), tempfile.tempdir
    with Guard(endpoint(), share, mounts) as guard:
        os.environ["DOCKER_HOST"] = f"unix://{guard.socket_path}"
        tempfile.tempdir = str(share)  # the child's TMPDIR under the guard
        try:
            said = asyncio.run(two_rollouts())
        finally:
            tempfile.tempdir = saved_tmp
            if saved is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = saved
    assert len(said) == 2 and all(line.startswith("ran in ") for line in said), said
    assert guard.started_ahead == 1 and guard.refused == [], (guard.started_ahead, guard.refused)
    left = docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.split()
    assert left == [], left
