"""Tool servers forked from the child's template (autoenv.child.toolfork), through verifiers' own subprocess runtime.

Each test runs a driver in a fresh interpreter, as the child is one: it imports verifiers, starts the forker, then
imports a "candidate" module and starts background servers with verifiers' `SubprocessRuntime.run_background`, the
call verifiers makes for a toolset's server. The servers report what they see to files."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from cpu_hog import slack

SERVER = """
import json, os, sys, threading, time
seen = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
        "comm": open("/proc/self/comm").read().strip(), "argv": sys.argv, "name": __name__, "cwd": os.getcwd(),
        "path0": sys.path[0], "env": dict(os.environ), "candidate_loaded": "candidatemod" in sys.modules,
        "verifiers_loaded": "verifiers.v1" in sys.modules}
import tempfile
seen["tempdir"] = tempfile.gettempdir()
if "numpy.random" in sys.modules:
    seen["numpy_draw"] = int(sys.modules["numpy.random"].randint(1 << 30))
print("to the log", flush=True)
print("to stderr", file=sys.stderr)
import atexit
atexit.register(lambda: open(os.environ["REPORT"] + ".atexit", "w").write("ran"))
def later():
    time.sleep(0.2)
    open(os.environ["REPORT"] + ".thread", "w").write("joined")
threading.Thread(target=later).start()
open(os.environ["REPORT"], "w").write(json.dumps(seen))
if os.environ.get("HANG"):
    open(os.environ["REPORT"] + ".hanging", "w").write("yes")
    time.sleep(3600)
sys.exit(int(os.environ.get("CODE", "0")))
"""

DRIVER = """
import asyncio, json, os, sys
sys.path.insert(0, {here!r})
import verifiers.v1, tempfile
tempfile.gettempdir()  # chosen in the template, as the child's imports may have
import numpy.random  # loaded in the template, as the warm server may load it
from autoenv.child import toolfork
started = toolfork.start({here!r})
import candidatemod  # the candidate, imported after the forker was made
from verifiers.v1.runtimes.subprocess import SubprocessRuntime, SubprocessConfig

async def main():
    rt = SubprocessRuntime(SubprocessConfig(), "toolfork-" + str(os.getpid()))
    await rt.start()
    out = {{"started": started, "workdir": str(rt.workdir), "forker": getattr(toolfork._forker, "pid", None),
            "servers": []}}
    for i, (argv_tail, env) in enumerate({calls!r}):
        await rt.run_background([sys.executable, *argv_tail], {{"REPORT": {here!r} + f"/report{{i}}", **env}},
                                f"log{{i}}.txt")
        proc = rt._background[-1]
        kind = type(proc).__name__
        if env.get("HANG"):
            while not os.path.exists({here!r} + f"/report{{i}}.hanging"):
                await asyncio.sleep(0.05)
            log = (rt.workdir / f"log{{i}}.txt").read_text()
            if not env.get("LEAVE"):
                await rt.teardown()
            code = proc.returncode
        else:
            code = await proc.wait()
            log = (rt.workdir / f"log{{i}}.txt").read_text()
        out["servers"].append({{"kind": kind, "code": code, "pid": proc.pid, "log": log}})
    print(json.dumps(out))
    if {leave!r}:
        sys.stdout.flush()
        os._exit(0)
    await rt.teardown()

asyncio.run(main())
"""


def drive(tmp_path: Path, calls: list, env: dict | None = None, leave: bool = False) -> dict:
    (tmp_path / "servermod.py").write_text(SERVER)
    (tmp_path / "candidatemod.py").write_text("STATE = 'imported'\n")
    (tmp_path / "driver.py").write_text(DRIVER.format(here=str(tmp_path), calls=calls, leave=leave))
    # the modules import from PYTHONPATH, as a candidate's from its venv: `python -m` in another folder finds them
    full = {**os.environ, "SECRET_API_KEY": "sk-not-for-servers", "PYTHONPATH": str(tmp_path), **(env or {})}
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py")], capture_output=True, text=True,
                          timeout=slack(120), env=full, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(tmp_path: Path, i: int) -> dict:
    return json.loads((tmp_path / f"report{i}").read_text())


def gone(pid: int, seconds: float) -> bool:
    """Wait for process `pid` to end (its pidfd turns readable), at most `seconds`."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], seconds)[0])
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> tuple[Path, dict]:
    """One driver, four servers: forked (exit 3), two started as processes (an interpreter flag; an interpreter
    setting in the environment), and one forked that does not end until verifiers' teardown stops it."""
    here = tmp_path_factory.mktemp("served")
    (here / "tmp").mkdir()
    return here, drive(here, [(["-m", "servermod"], {"FOO": "bar", "CODE": "3", "TMPDIR": str(here / "tmp")}), (["-u", "-m", "servermod"], {}),
                              (["-m", "servermod"], {"PYTHONHASHSEED": "7"}), (["-m", "servermod"], {"HANG": "1"})])


@pytest.mark.slow
def test_a_background_python_m_server_is_a_fork_of_the_template_and_looks_like_a_fresh_interpreter(served):
    tmp_path, out = served
    assert out["started"] is True
    server = out["servers"][0]
    seen = report(tmp_path, 0)
    assert server["kind"] == "ForkedProcess" and server["code"] == 3
    assert seen["comm"] == "autoenv-tools" and seen["ppid"] == out["forker"]
    assert seen["verifiers_loaded"] and not seen["candidate_loaded"]  # made before the candidate's import
    assert seen["pgid"] == seen["pid"] == seen["sid"]  # a session of its own, as verifiers starts its servers
    assert seen["name"] == "__main__" and seen["argv"] == [str(tmp_path / "servermod.py")]
    assert seen["cwd"] == out["workdir"] == seen["path0"]
    assert seen["env"]["FOO"] == "bar" and "SECRET_API_KEY" not in seen["env"]  # verifiers' own rule for servers
    assert server["log"].splitlines() == ["to the log", "to stderr"]
    assert seen["tempdir"] == str(tmp_path / "tmp")  # this environment's TMPDIR, not the one the template chose
    # numpy's global random state reseeded in each fork, as in each fresh interpreter
    assert seen["numpy_draw"] != report(tmp_path, 3)["numpy_draw"]
    assert (tmp_path / "report0.thread").read_text() == "joined"  # the interpreter's end: threads joined,
    assert (tmp_path / "report0.atexit").read_text() == "ran"  # then its atexit hooks


@pytest.mark.slow
def test_verifiers_teardown_stops_a_forked_server_that_does_not_end(served):
    server = served[1]["servers"][3]
    assert server["kind"] == "ForkedProcess"
    assert server["code"] == -15, server  # SIGTERM, as verifiers' teardown sends it
    assert gone(server["pid"], 1)


@pytest.mark.slow
def test_other_commands_and_interpreter_settings_start_a_process(served):
    tmp_path, out = served
    assert [s["kind"] for s in out["servers"][:3]] == ["ForkedProcess", "Process", "Process"]
    assert report(tmp_path, 1)["comm"] != "autoenv-tools" and report(tmp_path, 2)["comm"] != "autoenv-tools"
    assert report(tmp_path, 2)["env"]["PYTHONHASHSEED"] == "7" and out["servers"][1]["code"] == 0


@pytest.mark.slow
def test_turned_off_every_server_is_a_process(tmp_path):
    out = drive(tmp_path, [(["-m", "servermod"], {})], env={"AUTOENV_TOOLFORK": "0"})
    assert out["started"] is False and out["servers"][0]["kind"] == "Process" and out["servers"][0]["code"] == 0


@pytest.mark.slow
def test_the_forker_and_its_servers_end_with_the_child(tmp_path):
    """A child that ends without tearing down (killed, or `os._exit`): its socket closes, the forker kills what it
    forked and exits."""
    out = drive(tmp_path, [(["-m", "servermod"], {"CODE": "0"}), (["-m", "servermod"], {"HANG": "1", "LEAVE": "1"})],
                leave=True)
    forker = out["forker"]
    hanging = report(tmp_path, 1)["pid"]
    assert gone(forker, slack(30)), f"the forker {forker} outlived the child"
    assert gone(hanging, slack(30)), f"the server {hanging} outlived the child"


@pytest.mark.parametrize("argv", [["-m", "servermod", "--port", "1"], ["-c", "pass"], ["-m", "not a module"]])
def test_only_the_exact_server_command_is_forked(argv):
    from autoenv.child.toolfork import forkable

    assert forkable([sys.executable, *argv], dict(os.environ)) is None
    assert forkable([sys.executable, "-m", "servermod"], dict(os.environ)) == "servermod"
    assert forkable(["/usr/bin/env", "-m", "servermod"], dict(os.environ)) is None  # another program
