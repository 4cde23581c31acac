"""autoenv/core/display.py: the candidate's text is printed as it is, never read as rich markup."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import autoenv

from autoenv.core import display
from autoenv.core.record import GateFinding, GateReport, ProbeSummary

QUOTED = "most common answer '[/no]' in 90.6% of tasks; [bold]x"


def test_notes_warnings_and_gate_tables_print_candidate_text_verbatim(capsys):
    display.note(QUOTED)
    display.warn(QUOTED)
    report = GateReport(findings=[GateFinding(name="answer balance", status="fail", message=QUOTED)],
                        probes={"echo": ProbeSummary(description="d", mean=0.5, tasks=1, scored=1, skipped=0, errors=0,
                                                     harvested={"[/fmt]": "1.00 of 1.0"})})
    for table in display.gates_tables(report):
        display.console.print(table)
    out = capsys.readouterr().out
    assert out.count("'[/no]'") >= 3 and "[bold]x" in out and "[/fmt]" in out


def test_progress_off_a_terminal_is_plain_lines_at_least_every_interval(capsys):
    """An agent reading captured output sees a line while nothing finishes, then the last count."""


    from autoenv.core.display import PlainProgress, rollout_progress
    assert isinstance(rollout_progress(), PlainProgress)  # pytest's stdout is not a terminal
    progress = PlainProgress(every=0.2)
    progress.start()
    bars = {role: progress.add_task(role, total=4) for role in ("target", "strong")}
    seen = ""
    deadline = time.time() + 20
    while seen.count("progress:") < 2 and time.time() < deadline:  # two silent intervals, printed by the ticker
        time.sleep(0.05)
        seen += capsys.readouterr().out
    assert seen.count("progress:") >= 2 and "target 0/4, strong 0/4; errors 0;" in seen
    progress.update(bars["target"], completed=3, status="errors")
    progress.stop()
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("progress: target 3/4, strong 0/4; errors 1; ") and last.endswith("s elapsed")
    assert "\x1b[" not in seen + last


def test_a_silent_stage_off_a_terminal_says_it_is_still_running(capsys, monkeypatch):
    import threading

    from autoenv.core import display
    monkeypatch.setenv("AUTOENV_PROGRESS_SECONDS", "0.2")
    release = threading.Event()
    seen = ""
    with display.stage("judge", "an isolated reader"):
        deadline = time.time() + 20
        while seen.count("judge: still running") < 2 and time.time() < deadline:
            release.wait(0.05)
            seen += capsys.readouterr().out
    seen += capsys.readouterr().out
    assert seen.count("judge: still running") >= 2 and "s elapsed" in seen and "✓ judge" in seen
    after = capsys.readouterr().out
    release.wait(0.5)
    assert "still running" not in after + capsys.readouterr().out  # the heartbeat ends with its stage


@pytest.mark.slow
def test_errors_wrap_at_the_readers_width_under_their_own_text(tmp_path):
    """The real CLI's error (what, where, fix) at COLUMNS=80 and 60: no line past the width, each field's
    later lines start under its text, every word kept in order; captured output without COLUMNS keeps
    one line per field, so a grep finds the message whole."""
    fix = ("results are keyed by commit: the person runs it inside the AutoEnv clone (or makes one: "
           "`git init && git add -A && git commit -m init`)")
    for columns in (80, 60):
        done = autoenv("log", cwd=tmp_path, env={"COLUMNS": str(columns)})
        assert done.returncode == 2
        lines = done.stderr.splitlines()
        print(done.stderr)
        # past the width only a word longer than a line (the test's own path), whole after its label
        assert {line for line in lines if len(line) > columns} <= {f"error: {tmp_path}", f"  where: {tmp_path}"}
        where = next(i for i, line in enumerate(lines) if line.startswith("  where: "))
        start = next(i for i, line in enumerate(lines) if line.startswith("  fix: "))
        assert len(lines) > start + 1 and all(line.startswith(" " * 7) and line[7] != " " for line in lines[start + 1:])
        assert " ".join(line.strip() for line in lines[start:]) == f"fix: {fix}"
        assert " ".join(line.strip() for line in lines[:where]) == f"error: {tmp_path} is not inside a git repository"
        assert all(line.startswith(" " * 7) for line in lines[1:where])  # under "error: "'s text
    captured = autoenv("log", cwd=tmp_path, env={"COLUMNS": ""}).stderr.splitlines()
    assert captured == [f"error: {tmp_path} is not inside a git repository", f"  where: {tmp_path}", f"  fix: {fix}"]


def test_warnings_wrap_and_keep_a_path_longer_than_the_line_whole():
    long_path = "/tmp/" + "x" * 70 + "/config.toml"
    script = (f"from autoenv.core import display; display.warn('candidates will run unconfined: bubblewrap is "
              f"missing at {long_path}; install it (apt-get install bubblewrap) or set [sandbox] confine = none')")
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "COLUMNS": "60", "NO_COLOR": "1"},
                          capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    print(done.stdout)
    assert lines[0].startswith("  ! candidates will run") and all(line.startswith("    ") for line in lines[1:])
    assert [line for line in lines if len(line) > 60] == [f"    {long_path};"]  # the one word longer than a line
    assert " ".join(line.strip() for line in lines).endswith("or set [sandbox] confine = none")
