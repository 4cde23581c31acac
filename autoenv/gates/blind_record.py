"""The reproduce stage's record (autoenv.child.reproduce_stage): stored rollouts scored again in a fresh child.

Written by the child next to the candidate's code, so the parent reads it validated
(autoenv.core.childfiles): an unknown key, a wrong type or a non-finite reward is an
AutoEnvError naming it, never a silent pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from autoenv.core.childfiles import load_json, validated
from autoenv.gates.audit_record import AuditPart

REPRODUCE_FILE = "reproduced.json"
"""What the reproduce stage writes into the gates directory."""
Finite = Annotated[float, Field(allow_inf_nan=False)]


class Differ(AuditPart):
    """One stored rollout whose reward the fresh scoring did not reproduce."""

    role: str = Field(description="The model whose rollout it is.")
    idx: int | None = Field(None, description="The task's idx.")
    key: str = Field(description="The task's key.")
    stored: Finite = Field(description="The total reward the rollout was paid.")
    again: Finite = Field(description="The total the same trace earned scored again.")
    single_turn: bool = Field(True, description="One assistant turn, no tool call: the transcript holds all the "
                              "reward can read (a multi-turn or tool rollout's reward may read state kept outside it).")


class ReproduceRecord(AuditPart):
    """Everything the reproduce stage measured; `gates/reproduced.json` is this model as JSON."""

    checked: int = Field(0, ge=0, description="Stored traces scored again.")
    errors: int = Field(0, ge=0, description="Of those, scorings that raised.")
    unscored: int = Field(0, ge=0, description="Of those, scorings that gave no number from the transcript alone.")
    differ: list[Differ] = Field(default_factory=list, description="The rollouts whose reward was not reproduced.")
    reason: str | None = Field(None, description="Why no trace was scored again.")
    partial: bool = Field(False, description="The stage stopped at its limit before the last trace.")
    seconds: float | None = Field(None, description="How long the stage took.")


def read_reproduced(path: Path) -> ReproduceRecord:
    """Parse `reproduced.json` once, validated."""
    data = load_json(path, "reproduce stage's record", "reproduce", "gates/",
                     missing="the reproduce stage wrote no record")
    return validated(ReproduceRecord, data, "reproduce stage's record", "reproduce", "gates/", str(path))
