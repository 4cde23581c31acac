"""Hand-built audit.json dicts, shaped as autoenv/child/audit.py writes them (the record of
autoenv/gates/audit_record.py), for the gates' judgement, which validates them as it reads them."""

from __future__ import annotations

import copy
import functools

from autoenv.gates import dataset
from autoenv.gates.probes import EXPLOITS, NEEDS_TOOLS


def clean_rows(n: int = 1000) -> list[dict]:
    levels = ("easy", "medium", "hard")
    return [{"key": f"arith:{i}", "idx": i, "prompt": f"Compute: {i} * {i % 7 + 2} + {i % 11}", "system": "Answer.",
             "answer": str(i * (i % 7 + 2) + i % 11), "difficulty": levels[i % 3],
             "category": ("additive", "multiplicative")[i % 2]} for i in range(n)]


def rec(probe: str, idx: int, components: dict | None = None, weights: dict | None = None,
        error: str | None = None, **extra) -> dict:
    components = {"correct": 0.0} if components is None else components
    return {"probe": probe, "key": f"k{idx}", "idx": idx, "components": components,
            "weights": weights if weights is not None else {k: 1.0 for k in components},
            "error": error, "reply": f"reply {probe} {idx}", "reply_chars": 12, **extra}


def probe_records(oracle: float | list[float] = 1.0, exploits: dict[str, float] | None = None, tasks: int = 10,
                  weight: float = 1.0) -> list[dict]:
    """Records of a single-component reward: the oracle and every non-tool exploit, `tasks` tasks each."""
    scores = oracle if isinstance(oracle, list) else [oracle] * tasks
    records = [rec("oracle", i, {"correct": s}, {"correct": weight}) for i, s in enumerate(scores)]
    for name in EXPLOITS:
        if name in NEEDS_TOOLS:
            continue
        value = (exploits or {}).get(name, 1.0 if name == "padding" else 0.0)
        records += [rec(name, i, {"correct": value}, {"correct": weight}) for i in range(len(scores))]
    return records


@functools.cache
def clean_dataset() -> dict:
    return dataset.measure(clean_rows(), 0.9)


def audit(records: list[dict] | None = None, **overrides) -> dict:
    out = {
        "load_seconds": 0.4, "deterministic_load": True, "dataset": copy.deepcopy(clean_dataset()),
        "modules": [{"module": "candidate_env", "ok": True, "tool_server": False},
                    {"module": "candidate_env.taskset", "ok": True, "tool_server": False}],
        "mode": "in-process", "has_tools": False, "custom_env": False, "has_oracle": True,
        "probes": probe_records() if records is None else records, "deterministic_scoring": True,
        "probe_seconds": 0.1, "probe_tasks": 10,
    }
    out.update(overrides)
    return out
