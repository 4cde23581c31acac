"""The derive stage's record: the models' best replies and their mutations, rescored, as typed models.

The derive stage (autoenv.child.derived, with the replay of autoenv.child.replay) runs in the
evaluation's child next to the candidate's code and writes `gates/derived.json`; the parent's
rules (autoenv.gates.derived_rules) judge it. Like the audit record (autoenv.gates.audit_record)
the parent never trusts the file: it is parsed once with `read_derived`, and anything that is
not what the stage writes (a missing or unknown key, a wrong type, a probe name the stage does
not play, a reward that is not a finite number) is an AutoEnvError naming the key, never a crash
inside a rule and never a silent pass. The child validates its own record before writing it, so
a change to what the stage writes that the model does not describe fails where it is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from autoenv.core.childfiles import load_json, validated
from autoenv.gates.audit_record import AuditPart, ProbeRecord
from autoenv.gates.probes import BLIND_PROBES, DERIVED_FILE, DERIVED_MUTATIONS
from autoenv.gates.replay_rules import REPLAY_MUTATIONS

Finite = Annotated[float, Field(allow_inf_nan=False)]
"""A reward the rules compare against a limit: a NaN would make every comparison false, a silent pass."""

PROBES = ("reference", *DERIVED_MUTATIONS, *(f"replay {name}" for name in ("reference", *REPLAY_MUTATIONS)),
          *(f"blind {name}" for name in BLIND_PROBES))
"""Every probe name the derive stage writes: the rescored reference and its mutations, the replayed ones, and the
blind probes played on the rollouts' own traces."""


class DerivedProbeRecord(ProbeRecord):
    """One reference reply or mutation of it, rescored (or replayed); a ProbeRecord with the derive stage's fields."""

    role: str | None = Field(None, description="The model whose reply is the reference (`strong` or `target`).")
    stored_reward: Finite | None = Field(None, description="The reference's reward in the stored rollout.")
    reference_reward: Finite | None = Field(None, description="The unmutated reference's reward on this task.")
    reward: Finite | None = Field(None, description="A replayed transcript's total reward (autoenv.child.replay).")
    sample: int = Field(1, ge=1, le=2, description="1, or 2 for the second draw of a randomised mutation "
                        "(swap-answer, kitchen-sink) where the references are few (autoenv.gates.derived_rules).")

    @field_validator("probe")
    @classmethod
    def _known_probe(cls, probe: str) -> str:
        if probe not in PROBES:
            raise ValueError(f"{probe!r} is not a probe the derive stage plays ({', '.join(PROBES)})")
        return probe


class DerivedRecord(AuditPart):
    """Everything the derive stage measured; `gates/derived.json` is this model as JSON."""

    records: list[DerivedProbeRecord] = Field(description="The rescored and replayed replies, skipped ones too.")
    source: str = Field("", description="The outputs directory whose rollouts gave the references.")
    references: int = Field(0, description="Single-turn reference replies rescored.")
    mutations: dict[str, str] = Field(default_factory=dict, description="The mutations played, with what they do.")
    replayed: int = Field(0, description="Multi-turn or tool transcripts replayed through real rollouts.")
    blind: int = Field(0, description="Stored single-turn rollouts the blind probes were played on.")
    blind_seconds: float | None = Field(None, description="How long the blind probes took.")
    reason: str | None = Field(None, description="Why there is no reference at all.")
    replay_reason: str | None = Field(None, description="Why the multi-turn transcripts were not replayed.")
    seconds: float | None = Field(None, description="How long the stage took.")


def parse_derived(data: object, where: str = DERIVED_FILE) -> DerivedRecord:
    """`data` (derived.json's parsed JSON) as a DerivedRecord, or an AutoEnvError naming the bad key."""
    return validated(DerivedRecord, data, "derived probes' record", "derive", "gates/", where)


def read_derived(path: Path) -> DerivedRecord:
    """Parse the derive stage's `derived.json` once, validated: the parent never trusts what the child wrote."""
    data = load_json(path, "derived probes' record", "derive", "gates/",
                     missing="the derive stage wrote no record of its probes")
    return parse_derived(data, str(path))
