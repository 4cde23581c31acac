"""The canary rollouts taken out of the models' traces after the rollouts stage, before anything reads them.

Whoever answered the seats (the built-in endpoint offline, the forwarder online: autoenv.core.canaries)
appended each canary's rollout id and probe to `canaries.jsonl`. Here every role's stored episodes are
read once: an episode whose trace is a recorded canary *and* whose every assistant turn is that canary's
reply is moved to `canaries/<role>/traces.jsonl`; the rest stay, in order. The reply check means a record
written by anyone else (offline the endpoint runs beside the candidate) cannot take a model's rollout out
of the statistics. What each canary was paid is returned for the rules (autoenv.gates.blind_rules).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoenv.core.canaries import CANARY_FILE, canary_text, read_record
from autoenv.core.record import ROLES
from autoenv.core.traces import TRACES_FILE, to_rollout

FOLDER = "canaries"


@dataclass
class CanaryRow:
    role: str
    probe: str
    key: str
    idx: int | None
    total: float | None
    weights: dict[str, float]


@dataclass
class CanarySplit:
    planned: int = 0
    rows: list[CanaryRow] = field(default_factory=list)
    unmatched: int = 0
    """Recorded canaries whose stored rollout does not hold only the canary's reply: left with the model's."""


def _assistant_texts(trace: dict[str, Any]) -> list[object]:
    out = []
    for node in trace.get("nodes") or []:
        message = node.get("message") or {}
        if message.get("role") == "assistant":
            out.append(None if message.get("tool_calls") else message.get("content") or "")
    return out


def split_canaries(out: Path, planned: int) -> CanarySplit:
    """Move the recorded canaries of `out`'s roles to out/canaries/<role>/; what they earned."""
    served = read_record(out / CANARY_FILE)
    split = CanarySplit(planned=planned)
    if not served:
        return split
    matched: set[str] = set()
    for role in ROLES:
        path = out / role / TRACES_FILE
        if not path.is_file():
            continue
        keep: list[str] = []
        moved: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                episode = json.loads(line)
            except ValueError:
                keep.append(line)
                continue
            traces = [t for t in episode.get("traces") or [] if isinstance(t, dict)]
            ids = [str(t.get("id")) for t in traces if str(t.get("id")) in served]
            if not ids:
                keep.append(line)
                continue
            canary = [t for t in traces if str(t.get("id")) in served]
            if any(not (texts := _assistant_texts(t)) or any(text != canary_text(served[str(t.get("id"))])
                                                             for text in texts) for t in canary):
                keep.append(line)
                continue
            moved.append(line)  # the whole episode (a multi-seat game's other seats played against a canary)
            matched.update(ids)
            for trace in canary:
                probe = served[str(trace.get("id"))]
                rollout = to_rollout(trace, episode)
                weights = {name: float(value.get("weight", 1.0)) for name, value in (trace.get("rewards") or {}).items()
                           if isinstance(value, dict)}
                split.rows.append(CanaryRow(role, probe, rollout.task_key, rollout.idx, rollout.reward, weights))
        if moved:
            folder = out / FOLDER / role
            folder.mkdir(parents=True, exist_ok=True)
            with (folder / TRACES_FILE).open("a", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in moved)
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
            os.replace(temporary, path)
    split.unmatched = len(set(served) - matched)
    return split
