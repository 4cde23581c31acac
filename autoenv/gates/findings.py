"""The gate findings as the checks add them, frozen at the end into the evaluation record's GateReport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from autoenv.core.record import GateFinding, GateReport, GateStatus, ProbeSummary
from autoenv.gates.matrix import Matrix


@dataclass
class Gates:
    """Gate findings as the checks find them; `report()` freezes them into the record's GateReport."""

    findings: list[GateFinding] = field(default_factory=list)
    probes: dict[str, ProbeSummary] = field(default_factory=dict)
    mode: str | None = None
    seconds: float | None = None
    matrix: Matrix = field(default_factory=Matrix)

    def add(self, name: str, status: str, message: str, **data: Any) -> None:
        self.findings.append(GateFinding(name=name, status=cast(GateStatus, status), message=message, data=data))

    def report(self) -> GateReport:
        return GateReport(findings=self.findings, probes=dict(self.probes),
                          mode=self.mode, seconds=self.seconds, matrix=self.matrix.freeze())

    @property
    def failed(self) -> list[str]:
        return self.report().failed

    @property
    def passed(self) -> bool:
        return not self.failed
