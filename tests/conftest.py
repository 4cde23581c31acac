"""Shared fixtures: scratch run repositories built exactly as `autoenv demo` builds them."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

# A terminal's COLUMNS would switch `log`/`show` to their narrow layout; tests ask for it explicitly.
os.environ.pop("COLUMNS", None)
# Each test's run is a new candidate folder, so a warm child's server (autoenv.sandbox.warmchild) would outlive the
# test for its idle time: off unless a test module turns it on (`WARM = True` in the module: files whose tests
# evaluate one run several times, where every evaluation after the first forks its children instead of importing
# verifiers twice; measured in docs/development.md) or AUTOENV_WARM=1 runs the whole suite warm. `stop_warm_servers`
# stops the servers a test started when it ends, and each worker's at the end of the session.
os.environ.setdefault("AUTOENV_WARM", "0")
SUITE_WARM = os.environ["AUTOENV_WARM"]

from autoenv.core.cachedir import cache_root
from autoenv.core.paths import PROJECT
from autoenv.sandbox import warmchild
from autoenv.run.demo import make_run_repo

TESTS = Path(__file__).resolve().parent

# Small budgets keep the end-to-end suite inside CI's time while still running real
# verifiers rollouts through the real worker, endpoint and MCP tool servers.
SMALL_BUDGET = {"examples": 3, "rollouts_per_example": 2, "max_concurrent": 4, "rollout_timeout": 60,
                "min_tasks": 2}  # tests compare a few tasks; the guard itself is tested with its default


def small_config(**budget) -> str:
    text = (PROJECT / "config.toml").read_text()
    for key, value in {**SMALL_BUDGET, **budget}.items():
        text = re.sub(rf"(?m)^{key} = [^\n#]*", f"{key} = {value}  ", text)
    return text


def autoenv(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real CLI in a child process, as a user's shell would."""
    full_env = {**os.environ, **(env or {}), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "autoenv.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def as_background_job() -> None:
    """Popen's preexec_fn: the child starts with SIGINT ignored, as a script's background job (`autoenv eval &`)
    starts it; AutoEnv must still stop on `kill -INT`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def ledger(root: Path) -> list[dict]:
    path = root / "feedback_log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def head(root: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def commit_all(root: Path, message: str) -> str:
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", message], cwd=root, check=True)
    return head(root)


@pytest.fixture
def run_repo(tmp_path):
    """Factory: a git repository on autoenv/demo-<example> with that example as candidate/
    (`run_base=True`: started with `autoenv new`, as `autoenv demo` does)."""

    def make(example: str = "arithmetic", config_text: str | None = None, run_base: bool = False) -> Path:
        return make_run_repo(example, tmp_path / f"run-{example}", config_text or small_config(), run_base=run_base)

    return make


def clone_run(source: Path, target: Path) -> Path:
    """A copy of the evaluated run repository `source` (git, ledger, feedback, outputs) at `target`, as if it had
    been evaluated there: the absolute paths the evaluation wrote (outputs/<commit>/job.json, gates/derived.json)
    are rewritten to `target`."""
    shutil.copytree(source, target, symlinks=True)
    for path in (target / "outputs").rglob("*.json"):
        text = path.read_text()
        if str(source) in text:
            path.write_text(text.replace(str(source), str(target)))
    return target


@pytest.fixture(scope="session")
def evaluated_runs(tmp_path_factory):
    """Per worker, once per example: run_repo(example) (small_config(), no run base) after one real
    `autoenv eval --offline --description "first <example>"`; its CompletedProcess with it. Tests take copies
    through `evaluated_run`, never this directory."""
    done: dict[str, tuple[Path, subprocess.CompletedProcess]] = {}

    def get(example: str) -> tuple[Path, subprocess.CompletedProcess]:
        if example not in done:
            root = make_run_repo(example, tmp_path_factory.mktemp("evaluated") / f"run-{example}", small_config(),
                                 run_base=False)
            done[example] = root, autoenv("eval", "--offline", "--description", f"first {example}", cwd=root)
        return done[example]

    return get


@pytest.fixture
def evaluated_run(evaluated_runs, tmp_path):
    """Factory: a fresh copy (clone_run) of run_repo(example) after its first offline evaluation, described
    "first <example>", and that evaluation's CompletedProcess: the evaluation runs once per worker and
    example, each test mutates its own copy."""

    def make(example: str = "arithmetic") -> tuple[Path, subprocess.CompletedProcess]:
        source, result = evaluated_runs(example)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return clone_run(source, tmp_path / f"run-{example}"), result

    return make


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory):
    """A directory whose only entry is `claude`, a wrapper that execs tests/fake_claude.py
    (exec, so a timeout's kill reaches the fake itself)."""
    directory = tmp_path_factory.mktemp("fake-bin")
    wrapper = directory / "claude"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{TESTS / "fake_claude.py"}" "$@"\n')
    wrapper.chmod(0o755)
    return directory


ATTACK_ROW = "attack-row"


@pytest.fixture
def attack_row(request):
    """Add a row to the table "attack or fault -> what happened" that ends the run (see tests/attack_table.py).

    `happened` is built from what the test observed (exit codes, ledger lines, messages), never
    written in advance; the row is printed with the test's outcome, so a row whose assertions
    failed says so."""

    def add(attack: str, happened: str) -> None:
        request.node.user_properties.append((ATTACK_ROW, (attack, " ".join(happened.split()))))

    return add


def warm_servers_of(root: Path, since: float | None = None, outside: Path | None = None) -> list[Path]:
    """The warm servers' folders (autoenv.sandbox.warmchild) in the default cache whose candidate lies under `root`;
    with `since`, also those started since then for a candidate outside `outside` (`autoenv probe --env
    tests/data/...`: a folder of no test's own)."""
    found = []
    warm = cache_root() / "warm"
    for folder in warm.iterdir() if warm.is_dir() else ():
        try:
            log = folder / "server.log"
            if since is not None and log.stat().st_mtime < since:
                continue  # a server this test started has written its log since (the common case: none)
            text = log.read_text(errors="replace")
            started = re.findall(r"starting the warm server for (\S+)", text)
            fresh = since is not None and log.stat().st_mtime >= since and started \
                and outside is not None and not started[-1].startswith(str(outside))
            if str(root) in text or fresh:
                found.append(folder)
        except OSError:
            pass
    return found


@pytest.fixture(autouse=True)
def stop_warm_servers(tmp_path_factory, request):
    """After each test, the warm servers it started asked to exit (one serving an evaluation exits after it)."""
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None  # torn down after
    since = time.time()
    if request.node.get_closest_marker("cold"):  # cold even where the whole suite runs warm (AUTOENV_WARM=1)
        os.environ["AUTOENV_WARM"] = "0"
    elif getattr(request.module, "WARM", False) and SUITE_WARM == "0":
        os.environ["AUTOENV_WARM"] = "1"
    yield
    os.environ["AUTOENV_WARM"] = SUITE_WARM
    if root is not None:
        base = tmp_path_factory.getbasetemp()
        every_worker = base.parent if base.name.startswith("popen-gw") else base  # xdist: one folder per worker
        for folder in warm_servers_of(root, since, every_worker):
            warmchild.stop(folder)


def pytest_sessionfinish(session):
    """This worker's remaining servers (session fixtures' runs) asked to exit."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None and factory._basetemp is not None:
        for folder in warm_servers_of(factory.getbasetemp()):
            warmchild.stop(folder)


def pytest_addoption(parser):
    parser.addoption("--cpu-hog", action="store_true",
                     help="run the suite beside a CPU hog: one busy loop per core for the whole session (the load check)")


def pytest_configure(config):
    if config.getoption("--cpu-hog", False) and not hasattr(config, "workerinput"):  # the controller only
        from cpu_hog import cpu_hog

        config._cpu_hog = cpu_hog()
        config._cpu_hog.__enter__()


def pytest_unconfigure(config):
    hog = getattr(config, "_cpu_hog", None)
    if hog is not None:
        hog.__exit__(None, None, None)


def stop_process(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM `proc` and wait for it, SIGKILL after `grace` seconds scaled by the load (a loaded machine is slow
    to run even a signal handler); never an error in a test's teardown."""
    from cpu_hog import slack

    proc.terminate()
    try:
        proc.wait(timeout=slack(grace))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def freeze_worker(job: Path) -> list[int]:
    """SIGSTOP every process whose command line names `job` (an evaluation's child, in its sandbox), so the
    evaluation cannot finish however loaded the machine is: an interrupt sent next lands in the middle of it
    (the harness SIGKILLs the stopped child as it would a running one). The pids, for the test's cleanup."""
    found = subprocess.run(["pgrep", "-f", str(job)], capture_output=True, text=True, check=False).stdout.split()
    pids = [int(pid) for pid in found]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
    return pids


def freeze_warm_worker(candidate_dir: Path) -> list[int]:
    """freeze_worker for a child forked by the warm server (autoenv.child.forkserver): its command line is the server's,
    its name `autoenv-child` and its working folder the candidate's."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            named = Path(f"/proc/{pid}/comm").read_text().strip() == "autoenv-child"
            if named and os.readlink(f"/proc/{pid}/cwd") == str(candidate_dir):
                os.kill(int(pid), signal.SIGSTOP)
                pids.append(int(pid))
        except OSError:
            pass
    return pids


def kill_pids(pids: list[int]) -> None:
    """SIGKILL what is left of `pids` (processes this test stopped); gone ones are skipped."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


BUDGETS = TESTS / "budgets.toml"
"""Each test file's budget in worker-seconds (setup, call and teardown of all its tests), measured on the project's
2-core machine with headroom; a file without one gets DEFAULT_BUDGET."""
DEFAULT_BUDGET = 30.0
SHOWN_FILES = 12


def file_times(terminalreporter) -> dict[str, float]:
    """Worker-seconds per test file, every phase of every test (xdist's reports carry their durations too)."""
    per: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid, duration = getattr(report, "nodeid", ""), getattr(report, "duration", None)
            if nodeid and isinstance(duration, float):
                name = nodeid.split("::")[0]
                per[name] = per.get(name, 0.0) + duration
    return per


def report_budgets(terminalreporter) -> None:
    """The slowest files and every file over its budget (tests/budgets.toml): what to make faster first. Printed,
    never failed on: a loaded machine runs over; the list says where the suite's time goes."""
    per = file_times(terminalreporter)
    if len(per) < 2:
        return
    budgets = tomllib.loads(BUDGETS.read_text()).get("budget", {}) if BUDGETS.is_file() else {}
    over = {f: t for f, t in per.items() if t > budgets.get(f, DEFAULT_BUDGET)}
    terminalreporter.section("time per test file (worker-seconds; budgets in tests/budgets.toml)")
    for name, spent in sorted(per.items(), key=lambda kv: -kv[1])[:SHOWN_FILES]:
        terminalreporter.write_line(f"{spent:8.1f} s  {name}  (budget {budgets.get(name, DEFAULT_BUDGET):g} s)")
    terminalreporter.write_line(f"{sum(per.values()):8.1f} s  in all, {len(per)} files")
    for name, spent in sorted(over.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"over budget: {name} took {spent:.1f} s of "
                                    f"{budgets.get(name, DEFAULT_BUDGET):g} s")


def pytest_terminal_summary(terminalreporter):
    """The time per test file against its budget; the attack/fault table, when the run staged any (user_properties
    travel from xdist workers too)."""
    report_budgets(terminalreporter)
    rows = []
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            if getattr(report, "when", "call") != "call":
                continue
            rows += [(attack, happened, outcome, report.nodeid) for name, (attack, happened)
                     in getattr(report, "user_properties", []) if name == ATTACK_ROW]
    if not rows:
        return
    terminalreporter.section("attack or fault -> what happened")
    width = max(len(attack) for attack, *_ in rows)
    for attack, happened, outcome, nodeid in sorted(rows, key=lambda r: r[3]):
        mark = "" if outcome == "passed" else "   [TEST FAILED: " + nodeid + "]"
        terminalreporter.write_line(f"{attack:<{width}}  ->  {happened}{mark}")


def row(r) -> list:
    """A per-task row as [sum, n, disagree], the shape these hand computations use."""
    return [r.sum, r.n, int(r.disagree)]


def rows(per_task: dict) -> dict:
    return {k: row(v) for k, v in per_task.items()}


def groups(by: dict) -> dict:
    return {k: {"n": g.n, "mean": g.mean} for k, g in by.items()}
