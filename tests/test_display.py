"""autoenv/core/display.py: the candidate's text is printed as it is, never read as rich markup."""

from __future__ import annotations

import time

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
