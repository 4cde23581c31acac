"""autoenv/display.py: the candidate's text is printed as it is, never read as rich markup."""

from __future__ import annotations

from autoenv import display
from autoenv.record import GateFinding, GateReport, ProbeSummary

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
