"""Long waits say what they wait on: display.Waiting (a live line on a terminal, a line at least every interval
elsewhere), the driver's heartbeat while an evaluation runs (its commit and stage), `export openenv --check`
reporting each check as it is known; driver lines are cut at clause or word boundaries, never in a number."""

from __future__ import annotations

import fcntl
import io
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import TESTS
from rich.console import Console

from autoenv.core import display
from autoenv.core.formats import shorten
from autoenv.core.paths import EXAMPLES
from autoenv.driver.loop import RunOptions, drive

TAG = "demo-arithmetic"


class Lines:
    """A child process's stdout, line by line, as it prints them."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.seen, self.queue = proc, [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def until(self, pattern: str, count: int = 1, timeout: float = 120) -> list[str]:
        """Every line so far once `count` lines match `pattern` (fails naming what was printed)."""
        deadline = time.monotonic() + timeout
        while sum(bool(re.search(pattern, line)) for line in self.seen) < count:
            try:
                line = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"no {count} line(s) matching {pattern!r}; printed:\n" + "\n".join(self.seen))
            self.seen.append(line)
        return self.seen


def test_waiting_off_a_terminal_says_what_then_how_long_at_every_interval(capsys):
    seen = ""
    with display.Waiting("server.venv", "preparing the venv", every=0.2) as waiting:
        deadline = time.monotonic() + 20
        while seen.count("s elapsed") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            seen += capsys.readouterr().out
        waiting.update("installing")
        seen += capsys.readouterr().out
    lines = [line for line in seen.splitlines() if line.strip()]
    assert lines[0] == "  server.venv: preparing the venv …"
    assert re.fullmatch(r"  server\.venv: preparing the venv, \d+ s elapsed", lines[1]), lines
    assert lines[-1] == "  server.venv: installing …"  # a new stage is said at once
    time.sleep(0.3)
    assert "elapsed" not in capsys.readouterr().out  # nothing after it ended


def test_waiting_on_a_terminal_is_a_live_line_with_the_elapsed_time(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(display, "console", Console(file=screen, force_terminal=True, width=100))
    with display.Waiting("manifest.static", "openenv validate", every=30):
        deadline = time.monotonic() + 20
        while "manifest.static: openenv validate, 1 s elapsed" not in screen.getvalue() \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    shown = screen.getvalue()
    assert "manifest.static: openenv validate, 1 s elapsed" in shown and "\x1b[" in shown  # drawn live, not a line
    assert "openenv validate …" not in shown


def test_shorten_cuts_at_a_clause_or_a_word_never_inside_a_number():
    reason = ("first evaluation of the run autoenv/demo with target small and strong oracle: kept as the reference "
              "its next evaluations are compared with. Target 0.487 [0.377, 0.599] is inside its band 0.2–0.7")
    assert shorten(reason, 400) == reason
    for limit in range(20, len(reason)):
        cut = shorten(reason, limit)
        assert len(cut) <= limit and cut.endswith(" …"), (limit, cut)
        kept = cut.removesuffix(" …")
        assert reason.startswith(kept) and reason[len(kept)] in " .;:,", (limit, cut)  # ends where a word ends
    assert shorten(reason, 175).endswith("compared with. …")  # a clause end is preferred to a word end
    assert shorten("x" * 50, 10) == "x" * 50  # nothing to cut at: whole


@pytest.mark.slow
def test_the_driver_says_which_stage_a_running_evaluation_is_in_at_every_interval(run_repo, tmp_path):
    """A command agent holds the evaluation lock in a stage until the test releases it; the driver's output
    (piped) names the stage when it starts and then every AUTOENV_PROGRESS_SECONDS, with the elapsed time."""
    root = run_repo(run_base=True)
    release = tmp_path / "release"
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import pathlib, sys, time\n"
        "from autoenv.core import display\n"
        "from autoenv.evaluation.pipeline import one_at_a_time\n"
        "from autoenv.run.gitrepo import Repo\n"
        "repo = Repo(pathlib.Path.cwd())\n"
        "with one_at_a_time(repo, repo.head().commit), display.stage('check + probe', 'stand-in'):\n"
        f"    while not pathlib.Path({str(release)!r}).exists():\n"
        "        time.sleep(0.05)\n")
    driver = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "run", TAG, "--command",
                               f"{sys.executable} {agent}"], cwd=root, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "NO_COLOR": "1", "AUTOENV_PROGRESS_SECONDS": "0.3"})
    out = Lines(driver)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout[:12]
        stage = rf"^  evaluation running on {commit}: check \+ probe"
        seen = out.until(stage + r", \d+ s elapsed$", count=2)
        assert any(re.fullmatch(stage + " …", line) for line in seen), seen  # said once when it is first seen
        launch = next(line for line in seen if line.startswith("  launch 1:"))
        assert launch.startswith("  launch 1: command agent, new session, transcript "), launch  # not "resumed"
        release.touch()
        seen = out.until(r"^  launch 1 ended")
        assert not [line for line in seen[seen.index(launch):] if re.search(r"\d\.$", line)]  # no line ends "0."
    finally:
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=60)


@pytest.fixture
def openenv_package(tmp_path) -> Path:
    package = tmp_path / "codebreaker_env"
    shutil.copytree(EXAMPLES / "openenv-codebreaker" / "codebreaker_env", package)
    return package


def test_export_check_reports_each_check_as_known_and_says_it_waits_on_the_venv(openenv_package, tmp_path,
                                                                                monkeypatch):
    """The server venv's build is held (the test owns its lock, as a second build would): the command has said
    the static checks already, and says every AUTOENV_PROGRESS_SECONDS that it waits on the venv."""
    from autoenv.sandbox.serverenv import venv_dir
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    venv = venv_dir(openenv_package)
    venv.parent.mkdir(parents=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        check = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "export", "openenv", "--check",
                                  str(openenv_package)], cwd=TESTS.parent, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "NO_COLOR": "1", "AUTOENV_PROGRESS_SECONDS": "0.3",
                                      "XDG_CACHE_HOME": str(tmp_path / "cache")})
        try:
            seen = Lines(check).until(r"^  server\.venv: preparing the server's uv venv .*, \d+ s elapsed$", count=2)
        finally:
            check.kill()
            check.wait(timeout=60)
    assert [line.split()[:2] for line in seen[:4]] == [["PASS", "manifest.keys"], ["PASS", "manifest.validation_block"],
                                                       ["PASS", "separation.static"], ["PASS", "mcp.reserved_names"]]
    assert seen[4] == "  server.venv: preparing the server's uv venv (minutes the first time) …", seen


@pytest.mark.slow
def test_an_env_evaluation_under_the_driver_is_printed_and_priced_but_not_counted(run_repo, tmp_path, capsys):
    """The agent runs `eval --env` (its record, from test_env_apart): the driver says so, but it is not one of the
    run's evaluations (max_evals, the count, the last verdict, the launch's progress)."""
    root = run_repo(run_base=True)
    agent = tmp_path / "agent.py"
    agent.write_text(f"import pathlib, sys\nsys.path.insert(0, {str(TESTS)!r})\n"
                     "from test_env_apart import evaluate_env\n"
                     "evaluate_env(pathlib.Path.cwd(), [2, 2, 2, 2, 0, 0])\n")
    summary = drive(RunOptions(cwd=root, tag=TAG, command=f"{sys.executable} {agent}", max_failures=1, max_evals=1))
    printed = capsys.readouterr().out
    assert summary.spend.evals == 0 and summary.spend.env_evals == 1 and summary.last is None, printed
    assert "made no progress" in summary.stop  # not "max_evals: 1 of 1"
    assert re.search(r"(?m)^  --env evaluation of tiny-glossary@[0-9a-f]{12} \(recorded apart, not counted\): "
                     r"baseline: first evaluation of the environment", printed), printed
    assert not re.search(r"(?m)^  evaluation 1:", printed)
