"""verifiers' docker runtime with a real Docker daemon, inside AutoEnv's bubblewrap sandbox.

The daemon is the machine's own when one answers; otherwise (root, dockerd installed: `bash setup.sh
--with-docker`) the module starts one of AutoEnv's (autoenv.containers.daemon) and stops it afterwards,
undoing what it changed on the host. The image is the local base image (autoenv.containers.image),
built from Debian's packages when missing. Containers are counted from the daemon's side (its event
stream), not from what the harness says.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autoenv.containers import daemon, image
from autoenv.containers.engine import endpoint
from autoenv.core.runtimes import engine_problem
from autoenv.containers.guard import Guard, sweep
from autoenv.sandbox.confine import _probe
from tests.conftest import autoenv, head, ledger, small_config

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]
BWRAP = _probe()
ENGINE_LOCK = "/tmp/autoenv-tests-docker-engine.lock"


@pytest.fixture(scope="module")
def engine():
    """The base image's tag, with an engine answering for the module. One module of the suite's workers at a time
    holds the engine (a lock file, waited on): another module's test stops the daemon on purpose
    (test_an_engine_stopped_mid_evaluation_is_inconclusive_not_the_candidates_crash), and a module whose fixture found
    an engine answering would lose it mid-evaluation."""
    with open(ENGINE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = False
        if engine_problem("docker") is not None:
            if shutil.which("dockerd") is None or os.geteuid() != 0:
                pytest.skip("no Docker engine answers and none can be started here (bash setup.sh --with-docker)")
            daemon.start()
            started = True
        try:
            if not image.present(image.tag()) and shutil.which("mmdebstrap") is None:
                pytest.skip("the local base image is not built and mmdebstrap is missing (bash setup.sh --with-docker)")
            yield image.build().tag
        finally:
            if started:
                daemon.stop()


def docker_config(**settings) -> str:
    # Probes through real rollouts run in containers too: one task a probe keeps the shopping example's audit short
    # (about 100 s of probes on an idle 2-core machine, twice that under the suite's load).
    text = small_config().replace('type = "subprocess"', 'type = "docker"', 1).replace("rollout_sample = 6",
                                                                                       "rollout_sample = 1")
    assert 'type = "docker"' in text
    body = "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())
    return text + ("\n[runtime.docker]\n" + body if body else "")


class ContainerEvents:
    """(action, container id, image) of every container created or destroyed while the block ran, as the daemon saw
    them, read live from its event stream: the daemon keeps only its last 256 events for a later `--since` query, and
    an evaluation's rollouts (each container's start, exec, network and stop events) overflow that."""

    def __init__(self, image_tag: str):
        self.image = image_tag
        self.seen: list[tuple[str, str, str]] = []
        self._marker_done = threading.Event()
        self._marker: str | None = None

    def __enter__(self) -> ContainerEvents:
        self._proc = subprocess.Popen(["docker", "events", "--filter", "type=container", "--filter", "event=create",
                                       "--filter", "event=destroy", "--format",
                                       "{{.Action}} {{.Actor.ID}} {{.Actor.Attributes.image}}"],
                                      stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._sync()  # the stream is subscribed before the block starts
        return self

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            parts = tuple(line.split(" ", 2))
            if len(parts) < 3:
                continue
            action, cid, img = parts[0], parts[1], parts[2].strip()
            if self._marker and cid.startswith(self._marker) and action == "destroy":
                self._marker_done.set()
            elif cid != self._marker:
                self.seen.append((action, cid, img))

    def _sync(self) -> None:
        """Wait for a marker container's destroy event: every event before it has been read."""
        self._marker_done.clear()
        self._marker = None
        made = subprocess.run(["docker", "create", "--label", "autoenv.test=marker", self.image, "true"],
                              capture_output=True, text=True, timeout=120, check=True).stdout.strip()
        self._marker = made
        subprocess.run(["docker", "rm", made], capture_output=True, timeout=120, check=True)
        assert self._marker_done.wait(120), "the daemon's event stream did not deliver the marker's removal"
        self.seen = [event for event in self.seen if not event[1].startswith(made)]

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self._sync()  # every event of the block has been read
        finally:
            self._proc.terminate()
            self._proc.wait(timeout=60)

    def created(self) -> set[str]:
        return {cid for action, cid, img in self.seen if action == "create" and img == self.image}

    def destroyed(self) -> set[str]:
        return {cid for action, cid, _ in self.seen if action == "destroy"}


@pytest.fixture
def guard_folders():
    """(share, mounts) for a guard, as autoenv.containers.guard.guarded makes them: under /tmp, since a Unix socket's
    path has at most 107 bytes and pytest's folders under xdist are long."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ae-", dir="/tmp"))
    (root / "share").mkdir()
    (root / "mounts").mkdir()
    yield root / "share", root / "mounts"
    shutil.rmtree(root, ignore_errors=True)


def leftover(created: set[str] | None = None) -> list[str]:
    """Containers of verifiers' runtime that exist now (of `created` only, when given)."""
    proc = subprocess.run(["docker", "ps", "-aq", "--filter", "label=verifiers.run"], capture_output=True, text=True,
                          timeout=60)
    return [c for c in proc.stdout.split() if created is None or any(full.startswith(c) for full in created)]


@pytest.mark.e2e
@pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
@pytest.mark.parametrize("example", ["arithmetic", "shopping"])
def test_an_example_evaluates_with_every_rollout_in_a_container_inside_the_sandbox(engine, run_repo, example):
    root = run_repo(example, docker_config())
    started = time.time()
    with ContainerEvents(engine) as seen:
        result = autoenv("eval", "--offline", cwd=root, timeout=840)
    ended = time.time()
    entry = ledger(root)[-1]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert entry["verdict"]["verdict"] == "baseline", entry["verdict"]
    assert entry["sandbox"] == "bwrap"
    job = json.loads((root / "outputs" / head(root) / "job.json").read_text())
    assert job["runtime"]["type"] == "docker" and job["runtime"]["settings"]["image"] == engine
    rollouts = sum(1 for role in ("target", "strong", "smoke")
                   for _ in (root / "outputs" / head(root) / role / "traces.jsonl").read_text().splitlines())
    created, destroyed = seen.created(), seen.destroyed()
    print(f"\n{example}: {rollouts} rollouts, {len(created)} containers of {engine} created, "
          f"{len(created & destroyed)} of them removed, {ended - started:.0f} s")
    assert len(created) >= rollouts, seen.seen  # one task container per rollout, plus each one's egress helper
    assert created <= destroyed, seen.seen
    assert leftover(created) == []


@pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
def test_autoenv_probe_plays_a_tool_envs_rollout_probes_in_containers_inside_the_sandbox(engine, run_repo):
    """`autoenv probe` (no evaluation) starts its own child: it gets the guard too."""
    root = run_repo("shopping", docker_config())
    with ContainerEvents(engine) as seen:
        result = autoenv("probe", cwd=root, timeout=840)
    created = seen.created()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "FAILED" not in result.stdout and len(created) >= 2, (len(created), result.stdout[-2000:])
    assert leftover(created) == []


@pytest.mark.attack
@pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
def test_an_engine_stopped_mid_evaluation_is_inconclusive_not_the_candidates_crash(engine, run_repo, attack_row):
    if daemon.running_ours() is None:
        pytest.skip("stops only a daemon AutoEnv started (this machine's own engine is left alone)")
    root = run_repo("arithmetic", docker_config())
    before = set(leftover())  # another test's containers (one killed at its timeout) are not this evaluation's
    proc = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "eval", "--offline"], cwd=root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})
    try:
        deadline = time.monotonic() + 600
        while not set(leftover()) - before:  # the event: the evaluation's first container exists
            assert proc.poll() is None and time.monotonic() < deadline, "no container was started"
            time.sleep(0.2)
        daemon.stop(force=True)  # an evaluation's containers run on it: only --force stops it
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        daemon.start()
    assert ledger(root), out[-3000:]
    entry = ledger(root)[-1]
    assert proc.returncode == 3, out[-3000:]
    assert entry["verdict"]["verdict"] == "inconclusive", entry["verdict"]
    assert entry["verdict"]["reason"].startswith("runtime engine unavailable"), entry["verdict"]["reason"]
    stale = leftover()
    swept = sweep()  # what the next evaluation does first
    assert stale and leftover() == [], (stale, swept)
    attack_row("the docker engine stopped mid-evaluation",
               f"exit {proc.returncode}, verdict {entry['verdict']['verdict']}: {entry['verdict']['reason'][:160]}; "
               f"its {len(stale)} stopped container(s) removed by the next evaluation")


HOSTILE = r'''
import json, os, socket, subprocess, sys
image, secret_dir, other = sys.argv[1], sys.argv[2], sys.argv[3]
share = os.environ["TMPDIR"]
def docker(*args):
    p = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    lines = (p.stdout + p.stderr).strip().splitlines()
    return p.returncode, [next((l for l in lines if "Error" in l), lines[-1] if lines else "")]
os.symlink(secret_dir, os.path.join(share, "innocent"))
report = {
  "bind the host's secret folder": docker("run", "--rm", "-v", f"{secret_dir}:/s", image, "cat", "/s/key"),
  "bind / through a link in the share folder": docker("run", "--rm", "-v", f"{share}/innocent:/s", image, "cat", "/s/key"),
  "privileged container": docker("run", "--rm", "--privileged", image, "true"),
  "host network": docker("run", "--rm", "--network", "host", image, "true"),
  "host PID namespace": docker("run", "--rm", "--pid", "host", image, "true"),
  "exec into another container": docker("exec", other, "cat", "/etc/hostname"),
  "replace the network helper image": docker("tag", image, "localhost/verifiers-network:1"),
}
try:
    s = socket.socket(socket.AF_UNIX); s.connect("/var/run/docker.sock"); report["the engine's own socket"] = (0, ["connected"])
except OSError as e:
    report["the engine's own socket"] = (1, [f"{type(e).__name__}: {e}"])
report["its own container"] = docker("run", "--rm", image, "echo", "ok")
print(json.dumps(report))
'''


@pytest.mark.attack
@pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
def test_a_child_under_the_docker_runtime_reaches_nothing_of_the_host_through_the_engine(engine, tmp_path, attack_row,
                                                                                          guard_folders):
    """The candidate's code holds the docker CLI: it tries to read a host file through a container, to escape the
    container, to touch a container not its own, to replace an image, and to reach the engine's own socket."""
    from autoenv.sandbox.confine import Sandbox

    secret_dir = tmp_path / "host-secrets"
    secret_dir.mkdir()
    (secret_dir / "key").write_text("sk-host-key")
    other = subprocess.run(["docker", "run", "-d", "--entrypoint", "sleep", engine, "infinity"], capture_output=True,
                           text=True, timeout=120, check=True).stdout.strip()
    share, mounts = guard_folders
    try:
        with Guard(endpoint(), share, mounts) as guard:
            env = {"PATH": os.environ["PATH"], "DOCKER_HOST": f"unix://{guard.socket_path}", "TMPDIR": str(share)}
            sandbox = Sandbox("bwrap", binary=BWRAP.binary)
            cmd = sandbox.wrap([sys.executable, "-c", HOSTILE, engine, str(secret_dir), other], readable=[],
                               writable=[share, Path(guard.socket_path).parent], network=True)
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["docker", "rm", "-f", other], capture_output=True, timeout=60)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report.pop("its own container") == [0, ["ok"]]
    for attack, (code, said) in report.items():
        assert code != 0 and "sk-host-key" not in " ".join(said), (attack, code, said)
        attack_row(f"docker runtime: {attack} [bwrap]", f"exit {code}: {said[0][:150]}")
    assert len(guard.refused) >= 5, guard.refused


def test_a_forced_removal_is_answered_at_once_and_done_before_the_guard_ends(engine, guard_folders):
    """`docker rm -f` of the child's own container returns without waiting for the engine; the container is gone
    once the guard has ended. A removal without force still gets the engine's own answer (a running container: no)."""
    share, mounts = guard_folders
    name, kept = f"ae-rm-{os.getpid()}", f"ae-keep-{os.getpid()}"
    with Guard(endpoint(), share, mounts) as guard:
        env = {**os.environ, "DOCKER_HOST": f"unix://{guard.socket_path}", "DOCKER_CONTEXT": ""}

        def cli(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=120, env=env)

        for made in (name, kept):
            assert cli("run", "-d", "--name", made, engine, "sleep", "infinity").returncode == 0
        unforced = cli("rm", kept)
        assert unforced.returncode != 0 and "running" in unforced.stderr.lower(), unforced.stderr
        removed = cli("rm", "-f", name)
        assert removed.returncode == 0 and name in removed.stdout, removed.stderr
        assert cli("rm", "-f", kept).returncode == 0
        assert guard.removed_apart == 2 and guard.unreachable == [] and guard.refused == []
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={name}", "--filter", f"name={kept}"],
                          capture_output=True, text=True, timeout=60)
    assert left.stdout.split() == [], left.stdout


@pytest.mark.attack
def test_a_restricted_network_refuses_egress_through_the_guard(engine, attack_row, guard_folders):
    """verifiers' restricted network mode (`allow = []`): its helper image is the local one, the cut runs through
    the guard, and a request to a host not allowed is refused by verifiers' egress proxy (nothing leaves)."""
    from verifiers.v1.runtimes import DockerConfig, make_runtime

    share, mounts = guard_folders
    probe = ("import urllib.request,socket\n"
             "try:\n urllib.request.urlopen('http://blocked.example.invalid/', timeout=10); print('reached')\n"
             "except Exception as e: print('refused:', type(e).__name__, e)\n"
             "s=socket.socket(); s.settimeout(3)\n"
             "try:\n s.connect(('127.0.0.11', 53)); print('dns reached')\n"
             "except OSError as e: print('dns refused:', e)\n")

    async def play(guard: Guard) -> str:
        runtime = make_runtime(DockerConfig(image=engine, allow=[]))
        try:
            await runtime.start()
            await runtime.prepare_execution([])
            result = await runtime.run(["python3", "-c", probe], {})
            return result.stdout
        finally:
            await runtime.stop()

    import tempfile

    saved, saved_tmp = os.environ.get("DOCKER_HOST"), tempfile.tempdir
    with Guard(endpoint(), share, mounts) as guard:
        os.environ["DOCKER_HOST"] = f"unix://{guard.socket_path}"
        tempfile.tempdir = str(share)  # the child's TMPDIR under the guard
        try:
            said = asyncio.run(play(guard))
        finally:
            tempfile.tempdir = saved_tmp
            if saved is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = saved
    assert "refused:" in said and "reached" not in said.replace("dns reached", "").replace("refused", ""), said
    assert "dns refused" in said, said
    assert guard.refused == [], guard.refused
    attack_row("docker runtime, restricted network: HTTP to a host not allowed, and DNS",
               " / ".join(line[:90] for line in said.strip().splitlines()))


def test_an_image_the_engine_cannot_get_is_the_persons_before_anything_runs(engine, run_repo):
    """A missing image would fail every rollout as an environment error: preflight names it and records nothing."""
    root = run_repo("arithmetic", docker_config(image="127.0.0.1:9/autoenv/missing:1"))
    result = autoenv("eval", "--offline", cwd=root, timeout=300)
    said = result.stdout + result.stderr
    assert result.returncode != 0 and ledger(root) == [], said[-2000:]
    assert "127.0.0.1:9/autoenv/missing:1" in said and "could not be pulled" in said, said[-2000:]
    assert "config.toml ([runtime.docker] image)" in said and "autoenv runtime image" in said, said[-2000:]
