"""The warm child (autoenv.sandbox.warmchild, autoenv.child.forkserver): verifiers imported once, a sandboxed child forked per
evaluation, with the same results as a cold child and nothing of one evaluation left for the next."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from autoenv.sandbox import warmchild
from autoenv.run.demo import make_run_repo
from autoenv.sandbox.confine import choose
from tests.conftest import autoenv, commit_all, ledger, small_config

WARM_NOTE = "warm child: forked by the warm server"
needs_sandbox = pytest.mark.skipif(choose().kind != "bwrap", reason="the sweep and the private /tmp need bubblewrap")


@pytest.fixture
def warm_cache(tmp_path, monkeypatch):
    """AUTOENV_WARM on with a cache of the test's own; every server it started is stopped at the end."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTOENV_CACHE", str(cache))
    yield {"AUTOENV_WARM": "1", "AUTOENV_CACHE": str(cache)}
    warmchild.stop_all()


def outcomes(entry: dict) -> dict:
    """What an evaluation concluded (its verdict and each gate's outcome), without timings or the sampled noise of
    the scripted target (which replies get its noise depends on the order rollouts finish in, warm or cold)."""
    return {"verdict": entry["verdict"]["verdict"], "sandbox": entry["sandbox"],
            "gates": [(f["name"], f["status"]) for f in entry["gates"]["findings"]]}


def processes_naming(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


DAEMON = '''
import os, subprocess, sys
_marker = "{marker}"
_left = os.path.join("/tmp", _marker)
print("TMP LEFTOVER:", "yes" if os.path.exists(_left) else "no", file=sys.stderr, flush=True)
open(_left, "w").write("left by an earlier evaluation")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", _marker], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("DAEMON STARTED", file=sys.stderr, flush=True)
'''


def left_behind(root: Path, commit: str, marker: str) -> str:
    """What the candidate's import said of an earlier evaluation's file, after checking that its daemon is gone."""
    said = (root / "outputs" / commit / "worker.stderr").read_text()
    assert "DAEMON STARTED" in said, said[-2000:]  # the attempt was made ...
    assert processes_naming(marker) == []  # ... and nothing of it is left once the evaluation has returned
    return "yes" if "TMP LEFTOVER: yes" in said else "no"


@needs_sandbox
@pytest.mark.e2e
def test_a_warm_evaluation_concludes_what_a_cold_one_does_and_leaves_nothing_behind(run_repo, warm_cache):
    """Warm, cold (the server held by another evaluation), warm again on one run, with a candidate whose import
    leaves a daemon in a session of its own and a file in /tmp: the same conclusions, and the next evaluation
    forked by the same server finds neither. Then new settings: a new server, the old one stopped."""
    marker = f"autoenv-daemon-{uuid.uuid4().hex}"
    root = run_repo("arithmetic")
    module = root / "candidate" / "candidate_env" / "__init__.py"
    module.write_text(module.read_text() + DAEMON.format(marker=marker))
    commit = commit_all(root, "a candidate that leaves a daemon and a file behind")
    warm = autoenv("eval", "--offline", cwd=root, env=warm_cache)
    assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr[-3000:]
    assert WARM_NOTE in warm.stdout  # the first evaluation starts the server and is forked by it too
    assert left_behind(root, commit, marker) == "no"
    (folder,) = (Path(warm_cache["AUTOENV_CACHE"]) / "warm").iterdir()
    with open(folder / "lock", "w") as held:  # another evaluation holds the server: a cold child, not a wait
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        cold = autoenv("eval", "--offline", "--force", cwd=root, env=warm_cache)
    again = autoenv("eval", "--offline", "--force", cwd=root, env=warm_cache)
    assert again.returncode == 0 and cold.returncode == 0, again.stdout[-2000:] + cold.stdout[-2000:]
    assert WARM_NOTE in again.stdout and WARM_NOTE not in cold.stdout
    assert left_behind(root, commit, marker) == "no"  # forked by the server whose first child wrote the file
    first, second, third = ledger(root)
    assert outcomes(second) == outcomes(third)  # re-evaluations, cold then warm: compared with the first alike
    assert outcomes(first)["gates"] == outcomes(second)["gates"]
    out = root / "outputs" / commit
    assert (out / "gates" / "audit.json").is_file() and (out / "target" / "traces.jsonl").is_file()
    assert json.loads((out / "job.json").read_text())["out_dir"] == str(out)  # the record names the real folder
    assert list((folder / "slot").iterdir()) == []  # between evaluations the staging folder is empty

    assert warmchild.connect(folder) is not None
    config = root / "config.toml"
    config.write_text(config.read_text().replace("warm_seconds = 600", "warm_seconds = 300"))
    commit_all(root, "a shorter idle time for the warm server")
    assert WARM_NOTE in autoenv("eval", "--offline", cwd=root, env=warm_cache).stdout
    assert len(set((Path(warm_cache["AUTOENV_CACHE"]) / "warm").iterdir())) == 2
    deadline = time.monotonic() + 60  # the old server exits on the stop it was sent: wait for that event
    while warmchild.connect(folder) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert warmchild.connect(folder) is None


def test_warm_seconds_zero_or_the_variable_means_a_cold_child(monkeypatch):
    from autoenv.core.job import Job, RuntimeSpec

    job = Job(candidate_dir="/c", out_dir="/o", runtime=RuntimeSpec(warm_seconds=600))
    monkeypatch.setenv("AUTOENV_WARM", "1")
    assert warmchild.wanted(job)
    assert not warmchild.wanted(job.model_copy(update={"runtime": RuntimeSpec(warm_seconds=0)}))
    monkeypatch.setenv("AUTOENV_WARM", "0")
    assert not warmchild.wanted(job)
    monkeypatch.setenv("AUTOENV_WARM", "1")  # a forwarder socket the server's sandbox cannot show: cold
    assert not warmchild.wanted(job.model_copy(update={"forward_socket": "/elsewhere/fw-1/forwarder.sock"}))


def server(sandboxed: bool, token: str, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """A fork server started by hand, outside any sandbox, told whether it is in one."""
    name = f"\0autoenv-warm-test-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(name)
    listener.listen(4)
    read_end, write_end = os.pipe()
    os.write(write_end, token.encode())
    os.close(write_end)
    proc = subprocess.Popen([sys.executable, "-m", "autoenv.child.forkserver", str(listener.fileno()), str(read_end), "60",
                             "1" if sandboxed else "0"], pass_fds=(listener.fileno(), read_end),
                            stdout=subprocess.PIPE, text=True, env=env)
    os.close(read_end)
    listener.close()
    return proc, name


def ask(name: str, message: dict) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(120)  # the server's verifiers import comes first
        conn.connect(name)
        try:
            conn.sendall(json.dumps(message).encode() + b"\n")
            return conn.recv(64)
        except ConnectionResetError:  # closed unread: refused
            return b""


@pytest.mark.slow
def test_a_sandboxed_server_serves_only_peers_outside_its_pid_namespace():
    """Inside a sandbox the candidate's processes share the server's pid namespace, and SO_PEERCRED names them with
    a pid there; a process outside shows as pid 0. A server told it is sandboxed, run here where every peer has a
    pid, serves nobody, with the right token or not; told it is not, it takes the same request."""
    token = secrets.token_hex(8)
    for sandboxed, wanted in ((True, b""), (False, b"stopping\n")):
        proc, name = server(sandboxed, token)
        try:
            assert ask(name, {"token": token, "stop": True}) == wanted
            if sandboxed:
                assert proc.poll() is None  # refused, still serving
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_request_without_the_token_is_refused():
    proc, name = server(False, secrets.token_hex(8))
    try:
        assert ask(name, {"token": "guessed", "stop": True}) == b""
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_a_server_whose_imported_code_changed_says_stale_and_exits(tmp_path):
    """An install that replaced a module the server imported (here: a sitecustomize it imported at start) must not be
    forked from: the server answers `stale` and exits, and the harness starts a new one."""
    (tmp_path / "sitecustomize.py").write_text("IMPORTED_AT_START = True\n")
    token = secrets.token_hex(8)
    proc, name = server(False, token, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    try:
        assert ask(name, {"token": token, "stop": False, "probe": True}) == b""  # no descriptors: not a request
        os.utime(tmp_path / "sitecustomize.py", ns=(1, 1))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(120)
            conn.connect(name)
            read_end, write_end = os.pipe()
            socket.send_fds(conn, [json.dumps({"token": token, "job": "/nowhere", "env": {}, "cwd": "/"}).encode()
                                   + b"\n"], [read_end, write_end, write_end, write_end])
            os.close(read_end)
            os.close(write_end)
            assert conn.recv(64) == b"stale\n"
        assert proc.wait(timeout=60) == 0
        assert "sitecustomize.py changed since the server started" in proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()


@needs_sandbox
def test_emptying_the_private_tmp_leaves_what_is_mounted_into_it(tmp_path):
    """The sweep empties the sandbox's own /tmp and $HOME; the folders mounted into them (the staging folder, the
    Python install, caches) are on other file systems and keep every file."""
    staged = tmp_path / "staged"
    (staged / "target").mkdir(parents=True)
    (staged / "target" / "traces.jsonl").write_text("an episode not yet published\n")
    script = ("import os, pathlib; from autoenv.child.forkserver import empty; "
              "os.makedirs('/tmp/left/deep'); open('/tmp/left/deep/f', 'w').write('x'); open('/tmp/top', 'w').write('x'); "
              "empty(pathlib.Path('/tmp')); print(sorted(os.listdir('/tmp')), sorted(os.listdir('/tmp/mnt/staged')))")
    inside = choose().wrap([sys.executable, "-c", script], readable=[], writable=[])
    inside = inside[:inside.index("--")] + ["--bind", str(staged), "/tmp/mnt/staged"] + inside[inside.index("--"):]
    result = subprocess.run(inside, capture_output=True, text=True, timeout=120, cwd=str(Path(__file__).parent.parent))
    assert result.returncode == 0, result.stderr[-2000:]
    left, mounted = result.stdout.strip().split("] [")
    assert "mnt" in left and "left" not in left and "top" not in left, left  # mount parents stay, tmpfs files go
    assert "target" in mounted
    assert (staged / "target" / "traces.jsonl").read_text() == "an episode not yet published\n"


def test_publish_copies_what_the_child_wrote_appends_what_grew_and_follows_no_link(tmp_path):
    out, slot = tmp_path / "out", tmp_path / "slot"
    out.mkdir()
    slot.mkdir()
    (out / "target").mkdir()
    (out / "target" / "traces.jsonl").write_text("one\n")
    (out / "run.log").write_text("the harness's log")
    seen = warmchild.seed(out, slot)
    assert (slot / "target" / "traces.jsonl").read_text() == "one\n"
    child = warmchild.WarmChild.__new__(warmchild.WarmChild)
    child.slot, child.out, child._seen, child.unpublished = slot, out, seen, {}
    with open(slot / "target" / "traces.jsonl", "a") as f:
        f.write("two\n")
    (slot / "gates").mkdir()
    (slot / "gates" / "audit.json").write_text("{}")
    secret = tmp_path / "secret"
    secret.write_text("not for the record")
    (slot / "planted").symlink_to(secret)
    child.publish()
    assert (out / "target" / "traces.jsonl").read_text() == "one\ntwo\n"
    assert (out / "gates" / "audit.json").read_text() == "{}"
    assert not (out / "planted").exists() and (out / "run.log").read_text() == "the harness's log"
    # a folder swapped for a link to elsewhere after the snapshot: the copy does not follow it
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "audit.json").write_text("not for the record")
    (slot / "gates" / "audit.json").write_text('{"a": 1}')
    (slot / "gates").rename(tmp_path / "moved")
    (slot / "gates").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        warmchild.open_beneath(slot, "gates/audit.json")
    (slot / "gates").unlink()
    (tmp_path / "moved").rename(slot / "gates")
    (slot / "gates" / "audit.json").write_text("[]")  # rewritten, same size: copied whole
    os.utime(slot / "gates" / "audit.json", ns=(1, 1))
    child.publish()
    assert (out / "gates" / "audit.json").read_text() == "[]"
    (slot / "gates" / "audit.json").write_text('{"longer": "and not what was published"}')  # rewritten, longer
    child.publish()
    assert json.loads((out / "gates" / "audit.json").read_text()) == {"longer": "and not what was published"}
    assert list(slot.iterdir())  # the staging folder itself is never removed (the server's sandbox shows it)
    warmchild.empty(slot)
    assert slot.is_dir() and list(slot.iterdir()) == []


def test_the_config_rejects_a_negative_idle_time(tmp_path):
    from autoenv.core.config import load_config
    from autoenv.core.errors import AutoEnvError

    path = tmp_path / "config.toml"
    path.write_text(small_config().replace("warm_seconds = 600", "warm_seconds = -1"))
    with pytest.raises(AutoEnvError, match="warm_seconds"):
        load_config(path)


@needs_sandbox
@pytest.mark.e2e
def test_a_run_folder_deleted_and_made_again_at_its_path_gets_a_server_of_its_own(tmp_path, warm_cache):
    """A warm server binds the run's folders into its sandbox; delete the run and make it again at the same path,
    and that server's binds lead to the deleted folders (its chdir into the candidate failed, and the evaluation
    crashed). The folders' identity is part of the server's key: the new run gets a new server."""
    path = tmp_path / "run"
    first = make_run_repo("arithmetic", path, small_config())
    done = autoenv("eval", "--offline", cwd=first, env=warm_cache)
    assert done.returncode == 0 and WARM_NOTE in done.stdout, done.stdout[-2000:]
    shutil.rmtree(path)
    again = make_run_repo("arithmetic", path, small_config())
    done = autoenv("eval", "--offline", cwd=again, env=warm_cache)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert WARM_NOTE in done.stdout and ledger(again)[0]["verdict"]["verdict"] == "baseline"
