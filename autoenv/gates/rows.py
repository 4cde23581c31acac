"""The rows the gates' rules judge: one probe reply each, typed and frozen, and a probe's summary of its rows.

The child writes probe records (autoenv.gates.audit_record's ProbeRecord, the derive stage's
DerivedProbeRecord); the rules judge each once into a Row, which adds what they found
(`env_error`: the reply is left out of every mean) and reads its total as `total`. A row is
never changed in place: a normalised score, a reply the env rejected or a seat's gain over its
fair share is a new row (`model_copy`), so a rule can never see what another rule wrote into
the record it shares.
"""

from __future__ import annotations

from pydantic import Field

from autoenv.core.record import BestReply, ProbeSummary
from autoenv.gates.audit_record import ProbeRecord
from autoenv.gates.probes import EXPLOITS


class Row(ProbeRecord):
    """One probe reply as the rules judge it: the child's record, and what the judgement found."""

    role: str | None = Field(None, description="Derived probes: the model whose reply is the reference.")
    stored_reward: float | None = Field(None, description="Derived probes: the reference's reward in the stored "
                                        "rollout.")
    reference_reward: float | None = Field(None, description="Derived probes: the unmutated reference's reward "
                                           "on this task.")
    reward: float | None = Field(None, description="A replayed transcript's total reward as the child computed "
                                 "it (autoenv.child.replay); None for every other probe.")
    env_error: str | None = Field(None, description="Why the judgement leaves the reply out of every mean: scoring "
                                  "failed, or a component is not a finite number inside the reward's range.")

    @classmethod
    def judged(cls, record: ProbeRecord, env_error: str | None = None) -> Row:
        """`record` as a row with what the judgement found (the record was validated when it was read)."""
        return cls.model_construct(_fields_set={*record.model_fields_set, "env_error"},
                                   **{**dict(record), "env_error": env_error})

    @property
    def played(self) -> bool:
        """Scored: not skipped, no environment error, and the rollout ended ok (in process there is no outcome)."""
        return not self.skipped and not self.env_error and (self.outcome or "ok") == "ok"

    def score(self, component: str) -> float | None:
        """The component's score when it is a number (a bool counts, as Python counts it), else None."""
        value = self.components.get(component)
        return float(value) if isinstance(value, (int, float)) else None

    def numbers(self) -> dict[str, float]:
        """The components whose scores are numbers."""
        return {name: float(v) for name, v in self.components.items() if isinstance(v, (int, float))}

    def weighted(self) -> float:
        """The numeric components' scores times their weights (1.0 when a weight is missing), summed."""
        return sum(v * self.weights.get(name, 1.0) for name, v in self.numbers().items())

    @property
    def total(self) -> float | None:
        """The reply's total reward as the rules compare it: its weighted components when it was played, else
        the child's own total (a replayed transcript's), else None."""
        return self.weighted() if self.played else self.reward


def totals(rows: list[Row]) -> list[float]:
    """The played rows' weighted totals: the per-task values a probe's mean is taken over."""
    return [r.weighted() for r in rows if r.played]


def summarize(name: str, rows: list[Row], weights: dict[str, float],
              description: str | None = None) -> ProbeSummary:
    """What probe `name` earned over its rows: the mean total of the played ones, the components it earned
    anything from, and its best replies as evidence."""
    scored = [r for r in rows if r.played]
    rewards = [r.weighted() for r in scored]
    harvested = {}
    for component, weight in weights.items():
        values = [v for r in scored if (v := r.score(component)) is not None]
        if values and sum(values) > 0:
            harvested[component] = f"{sum(values) / len(values):.2f} of 1.0 (weight {weight:g})"
    best = sorted(scored, key=lambda r: r.weighted(), reverse=True)[:3]
    return ProbeSummary(
        description=description or EXPLOITS.get(name, "the candidate's reference behaviour"),
        mean=round(sum(rewards) / len(rewards), 4) if rewards else None,
        tasks=len(rows), scored=len(scored), skipped=sum(1 for r in rows if r.skipped),
        errors=sum(1 for r in rows if r.env_error or r.outcome in ("provider_error", "timeout")),
        harvested=harvested,
        best=[BestReply(idx=r.idx, key=r.key, reward=round(r.weighted(), 4), reply=r.reply[:200])
              for r in best if r.weighted() > 0],
    )
