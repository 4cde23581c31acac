"""A Docker daemon started for AutoEnv where no service manager runs one (CI, containers), and stopped cleanly.

`autoenv runtime daemon start` (root, dockerd installed, no engine answering) starts `dockerd`
detached with its log and PID under /run/autoenv-dockerd, and waits until the engine answers.
dockerd changes the host and does not undo it when it stops: it turns on IP forwarding, adds
firewall tables (`ip filter` with a FORWARD policy of drop and DOCKER chains, `ip nat` with a
MASQUERADE rule) and the `docker0` bridge. `start` records how the host was; `stop` ends the
daemon it started (by its PID), then removes the bridge, the tables the daemon added (or, in
tables that were there before, its DOCKER chains and the rules that use them) and restores IP
forwarding. A daemon AutoEnv did not start is never stopped.

The daemon is host-wide, so it is owned per start: a `start` while AutoEnv's daemon runs counts one more
holder, and a `stop` releases one; only the last stops it, and not while an evaluation's containers run
(named in the refusal; `--force` stops it anyway, and those evaluations end inconclusive).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from autoenv.containers.guard import LABEL
from autoenv.core.errors import AutoEnvError
from autoenv.core.runtimes import engine_problem

STATE_DIR = Path("/run/autoenv-dockerd")
READY_SECONDS = 60.0
STOP_SECONDS = 30.0
FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
DOCKER_TABLES = ("ip filter", "ip nat", "ip6 filter", "ip6 nat")


def state_file() -> Path:
    return STATE_DIR / "state.json"


def running_ours() -> int | None:
    """The PID of the daemon AutoEnv started, while it runs."""
    try:
        pid = int(json.loads(state_file().read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError):
        return None
    return pid


def _state() -> dict:
    try:
        return json.loads(state_file().read_text())
    except (OSError, ValueError):
        return {}


def _write(state: dict) -> None:
    tmp = state_file().with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(state_file())


def start() -> str:
    """Start dockerd unless an engine answers (AutoEnv's own: one more holder); a line saying what happened."""
    ours = running_ours()
    if ours is not None:
        state = _state()
        state["holders"] = int(state.get("holders", 1)) + 1
        _write(state)
        return (f"AutoEnv's dockerd (pid {ours}) runs already: this start holds it too ({state['holders']} starts); "
                "each `autoenv runtime daemon stop` releases one, and the last stops it")
    if engine_problem("docker") is None:
        return ("a Docker engine answers already, not one AutoEnv started: nothing started, and `autoenv runtime "
                "daemon stop` leaves it alone")
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise AutoEnvError("dockerd is not installed", fix="apt-get install docker.io (as root), or bash setup.sh "
                           "--with-docker")
    if os.geteuid() != 0:
        raise AutoEnvError("starting dockerd needs root", fix="run it as root, or start Docker's service "
                           "(`sudo systemctl start docker`) and add yourself to the `docker` group")
    STATE_DIR.mkdir(mode=0o700, exist_ok=True)
    before = {"forward": FORWARD.read_text().strip() if FORWARD.exists() else "", "tables": nft_tables()}
    log = open(STATE_DIR / "dockerd.log", "ab")
    proc = subprocess.Popen([dockerd, "--pidfile", str(STATE_DIR / "dockerd.pid")], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    _write({"pid": proc.pid, "before": before, "holders": 1})
    deadline = time.monotonic() + READY_SECONDS
    while engine_problem("docker") is not None:  # the engine's own answer is the event waited for
        if proc.poll() is not None:
            tail = (STATE_DIR / "dockerd.log").read_text(errors="replace").strip().splitlines()[-5:]
            stop()
            raise AutoEnvError(f"dockerd exited with code {proc.returncode}:\n" + "\n".join(tail),
                               where=str(STATE_DIR / "dockerd.log"), fix="read the log")
        if time.monotonic() > deadline:
            stop()
            raise AutoEnvError(f"dockerd did not answer within {READY_SECONDS:.0f} s", where=str(STATE_DIR / "dockerd.log"),
                               fix="read the log")
        time.sleep(0.2)
    return f"dockerd started (pid {proc.pid}, log {STATE_DIR / 'dockerd.log'})"


def in_use(engine: str = "docker") -> list[str]:
    """The names of the running containers an evaluation's guarded child started (autoenv.containers.guard)."""
    try:
        proc = subprocess.run([engine, "ps", "--filter", f"label={LABEL}", "--filter", "status=running", "--format",
                               "{{.Names}}"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return proc.stdout.split() if proc.returncode == 0 else []


def stop(force: bool = False) -> str:
    """Release one start of the daemon AutoEnv started; the last stops it (not while an evaluation's containers
    run, unless `force`) and undoes what it changed on the host. A line saying what happened."""
    state = _state()
    if not state:
        return "no daemon started by AutoEnv: nothing stopped"
    pid = int(state.get("pid", 0))
    holders = int(state.get("holders", 1))
    if pid and _alive(pid) and not force:
        if holders > 1:
            state["holders"] = holders - 1
            _write(state)
            return (f"released one start of AutoEnv's dockerd (pid {pid}); it keeps running for the other "
                    f"{holders - 1}")
        running = in_use()
        if running:
            raise AutoEnvError(f"AutoEnv's dockerd (pid {pid}) is in use: {len(running)} evaluation container(s) "
                               f"run on it ({', '.join(running[:5])}{', ...' if len(running) > 5 else ''})",
                               where=str(state_file()),
                               fix="stop it once those evaluations end, or `autoenv runtime daemon stop --force` "
                                   "(the evaluations using it end inconclusive, not as their candidates' fault)")
    if pid and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    undone = undo(state.get("before") or {})
    state_file().unlink(missing_ok=True)
    return f"dockerd (pid {pid}) stopped; undone: {', '.join(undone) or 'nothing'}"


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie that is not ours to reap counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def undo(before: dict) -> list[str]:
    """Remove the bridge, the daemon's firewall tables and chains, and restore IP forwarding."""
    done = []
    if subprocess.run(["ip", "link", "show", "docker0"], capture_output=True, check=False).returncode == 0:
        subprocess.run(["ip", "link", "delete", "docker0"], capture_output=True, check=False)
        done.append("docker0 bridge")
    had = set(before.get("tables") or [])
    for table in nft_tables():
        if table in DOCKER_TABLES and table not in had:
            subprocess.run(["nft", "delete", "table", *table.split()], capture_output=True, check=False)
            done.append(f"nft table {table}")
    for family in ("iptables", "ip6tables"):
        if shutil.which(f"{family}-save") and _drop_docker_chains(family):
            done.append(f"{family} DOCKER chains")
    if before.get("forward") in ("0", "1") and FORWARD.exists() and FORWARD.read_text().strip() != before["forward"]:
        FORWARD.write_text(before["forward"])
        done.append(f"net.ipv4.ip_forward={before['forward']}")
    return done


def nft_tables() -> list[str]:
    if shutil.which("nft") is None:
        return []
    proc = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=False)
    return [line.removeprefix("table ").strip() for line in proc.stdout.splitlines() if line.startswith("table ")]


def _drop_docker_chains(family: str) -> bool:
    """In tables that were there before the daemon: its DOCKER chains and the rules that use them, removed."""
    saved = subprocess.run([f"{family}-save"], capture_output=True, text=True, check=False).stdout
    if "DOCKER" not in saved and "docker0" not in saved:
        return False
    kept = [line for line in saved.splitlines() if "DOCKER" not in line and "docker0" not in line]
    subprocess.run([f"{family}-restore"], input="\n".join(kept) + "\n", capture_output=True, text=True, check=False)
    return True
