"""A task's data fields other than its answer, for the probes that write them back (field-copy)."""

from __future__ import annotations

from typing import Any

from autoenv.gates import shapes
from autoenv.gates.answer_oracle import answer_of


def answer_forms(tasks: list[Any], answer_field: str | None) -> set[str]:
    """The data fields that are another form of the answer across `tasks` (autoenv.gates.shapes.answer_forms)."""
    known = [(t, str(a)) for t in tasks if (a := answer_of(t, answer_field)) is not None]
    return shapes.answer_forms([(a, other_fields(t, answer_field)) for t, a in known])


def other_fields(task: Any, answer_field: str | None, forms: set[str] | frozenset[str] = frozenset()
                 ) -> dict[str, Any]:
    """The task's data fields but the answer (`answer_field`, else `answer`), the fields that are another form of
    it (`forms`: autoenv.gates.shapes.answer_forms) and those at their declared default, for the field-copy probe."""
    try:
        data = task.data.model_dump() if hasattr(task.data, "model_dump") else {}
        defaults = declared_defaults(type(task.data))
    except Exception:  # noqa: BLE001 - a data model the candidate broke: nothing to write back
        return {}
    # a field at its declared default carries nothing of the task (verifiers' own `artifact_max_bytes`, `skills`)
    return {k: v for k, v in data.items() if k != (answer_field or "answer") and k not in forms
            and not (k in defaults and v == defaults[k])}


_DEFAULTS: dict[type, dict[str, Any]] = {}


def declared_defaults(model: type) -> dict[str, Any]:
    """The optional fields' defaults of a task data model, as dumped; read once per model (pydantic inspects a
    default factory's signature on every call: most of a probe's time when read per task)."""
    if model not in _DEFAULTS:
        declared = getattr(model, "model_fields", {})
        _DEFAULTS[model] = {k: dumped(f.get_default(call_default_factory=True)) for k, f in declared.items()
                            if not f.is_required()}
    return _DEFAULTS[model]


def dumped(value: Any) -> Any:
    """A default as model_dump writes it (a nested model as its dict)."""
    return value.model_dump() if hasattr(value, "model_dump") else value
