"""The exploit matrix: for each reward component, what each probe harvested from it.

A probe's total can stay under its limit while one component gives itself away (a format
bonus fully paid to a wrong answer, a length bonus paid to filler); summing the
components hides that. The matrix keeps them apart: rows are the `@vf.reward` components,
columns the probes (static and derived), cells the component's mean score on the probe's
scored replies. A component some exploit harvests above its share (config
`probes.exploit_max` of 1.0; padding: above the reference's own score on it) is named
with the probe, the task and the reply. The feedback file and the judge's workspace show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoenv.core.formats import quoted
from autoenv.core.record import ExploitMatrix, Harvest
from autoenv.gates.rows import Row

REFERENCES = ("oracle", "derived reference", "replay reference")
NOT_EXPLOITS = {"derived final-only", "derived truncated", "derived case", "derived whitespace", "replay no-tools"}
"""Columns shown but not judged: the reference behaviour and the measured variants."""


@dataclass(frozen=True)
class Evidence:
    """A probe's best-scoring reply on one component: the cell's evidence."""

    idx: int | None
    """The task's idx."""
    reply: str
    """The reply, cut to 200 characters."""
    score: float
    """Its score on the component."""


@dataclass
class Matrix:
    """The exploit matrix as the rules build it, column by column; `freeze()` makes it the record's ExploitMatrix."""

    limit: float = 0.1
    """probes.exploit_max: the share of the reference's score an exploit may harvest from a component."""
    weights: dict[str, float] = field(default_factory=dict)
    """Each component's weight."""
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    """probe -> component -> mean score over the probe's played replies."""
    best: dict[str, dict[str, Evidence]] = field(default_factory=dict)
    """probe -> component -> its best reply, for the columns added since the matrix was thawed."""
    kept: list[Harvest] = field(default_factory=list)
    """The harvests a frozen matrix carried (its columns' evidence is not kept)."""

    def add_columns(self, by_probe: dict[str, list[Row]], weights: dict[str, float], prefix: str = "") -> None:
        """Add each probe's per-component means (and its best reply per component)."""
        self.weights.update(weights)
        for probe, records in by_probe.items():
            scored = [r for r in records if r.played]
            if not scored:
                continue
            column: dict[str, float] = {}
            best: dict[str, Evidence] = {}
            for component in weights:
                values = [(v, r) for r in scored if (v := r.score(component)) is not None]
                if not values:
                    continue
                column[component] = round(sum(v for v, _ in values) / len(values), 4)
                top = max(values, key=lambda pair: pair[0])
                best[component] = Evidence(idx=top[1].idx, reply=top[1].reply[:200], score=top[0])
            self.scores[prefix + probe] = column
            self.best[prefix + probe] = best

    def harvests(self, limit: float | None = None) -> list[Harvest]:
        """Components an exploit probe earned above its share, with the evidence."""
        limit = self.limit if limit is None else limit
        out = []
        for probe, column in self.scores.items():
            if probe not in self.best or probe in REFERENCES or probe in NOT_EXPLOITS:
                continue
            reference = self.scores.get("derived reference" if probe.startswith("derived ") else
                                        "replay reference" if probe.startswith("replay ") else "oracle", {})
            for component, value in column.items():
                if self.weights.get(component, 1.0) <= 0:
                    continue
                if probe.endswith("padding"):
                    over = component in reference and value > reference[component] + 1e-9
                else:
                    over = value > limit * max(reference.get(component, 1.0), 1e-9) + 1e-9
                if over:
                    evidence = self.best[probe][component]
                    out.append(Harvest(component=component, probe=probe, score=value, idx=evidence.idx,
                                       reply=evidence.reply))
        return out

    def freeze(self) -> ExploitMatrix | None:
        """The record's ExploitMatrix (None when no probe was scored)."""
        if not self.scores:
            return None
        return ExploitMatrix(weights=self.weights, scores=self.scores, harvests=[*self.kept, *self.harvests()],
                             limit=self.limit)

    @classmethod
    def thaw(cls, frozen: ExploitMatrix | None, limit: float) -> Matrix:
        """A frozen matrix back into a working one, its harvests kept as found (for more columns)."""
        if frozen is None:
            return cls(limit=limit)
        return cls(limit=limit, weights=dict(frozen.weights), scores={k: dict(v) for k, v in frozen.scores.items()},
                   kept=list(frozen.harvests))


def markdown(m: ExploitMatrix) -> list[str]:
    """The matrix as a markdown table (components as rows), then the harvests named."""
    probes = list(m.scores)
    lines = ["| component (weight) | " + " | ".join(probes) + " |", "|---|" + "---|" * len(probes)]
    for component, weight in m.weights.items():
        cells = [m.scores[p].get(component) for p in probes]
        lines.append(f"| {component} ({weight:g}) | "
                     + " | ".join("–" if c is None else f"{c:.2f}" for c in cells) + " |")
    lines.append("")
    if m.harvests:
        lines += [f"- **{h.component}** harvested by `{h.probe}`: mean {h.score:.2f}; e.g. task idx {h.idx}: "
                  f"`{quoted(h.reply, 120)}`" for h in m.harvests]
    else:
        lines.append("No component was harvested above its share by any probe.")
    return lines
