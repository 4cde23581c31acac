"""autoenv/containers/policy.py and engine.py without a daemon: what the guard lets a sandboxed child ask the
engine, and what preflight says when no engine answers."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from autoenv.containers import engine
from autoenv.containers.guard import Guard
from autoenv.containers.policy import Owned, decide
from autoenv.core.config import check_runtime_ready
from autoenv.core.errors import AutoEnvError
from autoenv.sandbox.engines import masked_sockets

SHARE = Path("/tmp/autoenv-ce-test/share")
TASK_CONTAINER = {  # what verifiers' DockerRuntime.start sends for a task container
    "Image": "autoenv/base:x", "Entrypoint": ["sleep"], "Cmd": ["infinity"], "Labels": {"verifiers.run": "r"},
    "HostConfig": {"NetworkMode": "bridge", "PortBindings": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]}},
}
HELPER = {  # its egress proxy's helper: our container's network, the share folder bound, DAC_OVERRIDE
    "Image": "autoenv/base:x",
    "HostConfig": {"NetworkMode": "container:vf-1", "Binds": [f"{SHARE}/vf-proxy-abc:/run/vf:Z"],
                   "CapDrop": ["ALL"], "CapAdd": ["DAC_OVERRIDE"], "SecurityOpt": ["no-new-privileges"]},
}


def owned() -> Owned:
    return Owned(containers={"a" * 64}, names={"vf-1"}, execs={"e" * 64})


def test_what_verifiers_docker_runtime_asks_is_allowed():
    mine = owned()
    assert decide("POST", "/v1.41/containers/create?name=vf-2", TASK_CONTAINER, mine, SHARE) is None
    assert decide("POST", "/v1.41/containers/create", HELPER, mine, SHARE) is None
    for method, target in [("HEAD", "/_ping"), ("GET", "/v1.41/version"), ("GET", "/v1.41/containers/vf-1/json"),
                           ("POST", "/v1.41/containers/vf-1/exec"), ("POST", f"/v1.41/exec/{'e' * 64}/start"),
                           ("GET", f"/v1.41/exec/{'e' * 12}/json"), ("DELETE", "/v1.41/containers/vf-1?force=1"),
                           ("POST", f"/v1.41/containers/{'a' * 12}/attach?stream=1"),
                           ("GET", "/v1.41/images/localhost/verifiers-network:1/json"),
                           ("POST", "/v1.41/images/create?fromImage=python&tag=3.11-slim")]:
        assert decide(method, target, {}, mine, SHARE) is None, (method, target)


@pytest.mark.parametrize("change, words", [
    ({"Binds": ["/:/host"]}, "binding / is not allowed"),
    ({"Binds": [f"{SHARE}/../../etc:/x"]}, "is not allowed"),
    ({"Mounts": [{"Type": "volume", "Source": "data", "Target": "/d"}]}, "volume mount"),
    ({"Privileged": True}, "privileged"),
    ({"CapAdd": ["SYS_ADMIN"]}, "SYS_ADMIN"),
    ({"NetworkMode": "host"}, "network host"),
    ({"NetworkMode": "container:someone-else"}, "not a container of this evaluation"),
    ({"PidMode": "host"}, "PidMode host"),
    ({"UsernsMode": "host"}, "UsernsMode host"),
    ({"SecurityOpt": ["seccomp=unconfined"]}, "seccomp=unconfined"),
    ({"Devices": [{"PathOnHost": "/dev/sda"}]}, "devices"),
    ({"VolumesFrom": ["other"]}, "volumes"),
    ({"PortBindings": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "2222"}]}}, "beyond loopback"),
])
def test_a_container_that_would_reach_the_host_is_refused(change, words):
    body = {**TASK_CONTAINER, "HostConfig": {**TASK_CONTAINER["HostConfig"], **change}}
    problem = decide("POST", "/v1.41/containers/create", body, owned(), SHARE)
    assert problem is not None and words in problem, problem


@pytest.mark.parametrize("method, target, words", [
    ("GET", "/v1.41/containers/someone-else/json", "not created by this evaluation"),
    ("POST", "/v1.41/containers/someone-else/exec", "not created by this evaluation"),
    ("POST", f"/v1.41/exec/{'f' * 64}/start", "not created by this evaluation"),
    ("POST", "/v1.41/build?t=localhost/verifiers-network:1", "not an operation"),
    ("POST", "/v1.41/images/autoenv/base:x/tag?repo=localhost/verifiers-network&tag=1", "not an operation"),
    ("POST", "/v1.41/images/load", "not an operation"),
    ("POST", "/v1.41/images/create?fromSrc=-&repo=localhost/verifiers-network&tag=1", "importing"),
    ("POST", "/v1.41/images/create?fromImage=localhost/verifiers-network&tag=1", "loopback"),
    ("POST", "/v1.41/volumes/create", "not an operation"),
    ("POST", "/v1.41/containers/vf-1/update", "not an operation"),
    ("POST", "/v1.41/commit?container=vf-1", "not an operation"),
    ("GET", "/v1.41/containers/json?all=1", "not an operation"),
    ("GET", "/v1.41/events", "not an operation"),
    ("GET", "/v1.41/info", "not an operation"),
])
def test_anything_beyond_its_own_containers_is_refused(method, target, words):
    problem = decide(method, target, {}, owned(), SHARE)
    assert problem is not None and words in problem, problem


def test_a_privileged_exec_is_refused():
    assert "privileged" in decide("POST", "/v1.41/containers/vf-1/exec", {"Privileged": True}, owned(), SHARE)


def test_a_bind_of_the_share_folder_is_a_folder_of_the_guards_with_its_sockets_only(tmp_path):
    """The child may have swapped the bound folder for a link to /: the engine gets a copy it cannot touch."""
    import socket

    share, mounts = tmp_path / "share", tmp_path / "mounts"
    (share / "proxy").mkdir(parents=True)
    mounts.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(share / "proxy" / "control.sock"))
    (share / "proxy" / "secret-link").symlink_to("/etc/shadow")
    (share / "proxy" / "file.txt").write_text("not a socket")
    (share / "to-root").symlink_to("/")
    guard = Guard(engine.Endpoint("unix:///nonexistent"), share, mounts)
    mirrored = guard._mirror(str(share / "proxy"))
    assert mirrored is not None and Path(mirrored).parent == mounts
    assert sorted(os.listdir(mirrored)) == ["control.sock"]
    assert stat.S_ISSOCK(os.stat(Path(mirrored) / "control.sock").st_mode)
    assert guard._mirror(str(share / "to-root")) is None  # a link is never followed
    body = {"HostConfig": {"Binds": [f"{share}/to-root:/host"]}}
    assert "not a folder" in guard._mount_shares(body)
    listener.close()


def test_preflight_asks_the_engine_not_the_path(tmp_path, monkeypatch):
    """A docker CLI on PATH with no engine behind it: refused before anything runs, with how to start one."""
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI here")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    config = tmp_path / "config.toml"
    config.write_text('[runtime]\ntype = "docker"\n')
    with pytest.raises(AutoEnvError) as info:
        check_runtime_ready("docker", config)
    assert "not reachable" in info.value.what, info.value.what
    assert info.value.where == f"{config}:2 (runtime.type)"
    assert "autoenv runtime daemon start" in info.value.fix and "subprocess" in info.value.fix


def test_the_sandbox_covers_every_engine_socket(tmp_path, monkeypatch):
    sock = tmp_path / "run" / "docker.sock"
    sock.parent.mkdir()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    files, _ = masked_sockets()
    assert sock.resolve() in files
    s.close()
