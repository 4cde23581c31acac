"""Rollouts as readable transcripts: messages, tool calls and results, per-component rewards.

A rollout's id is `<role>-<first 8 characters of the trace id>`, the same id the judge
cites as evidence in the feedback, so `autoenv show <commit> --rollout target-ab12cd34`
opens what the judge pointed at. Read from verifiers' traces.jsonl as plain JSON (see
autoenv.core.traces); the messages are untrusted model output, escaped wherever shown.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.core.messages import Reply, ToolCall, message_text
from autoenv.core.record import ROLES
from autoenv.core.traces import Rollout, episode_failure, iter_traces, to_rollout

ID_LENGTH = 8


@dataclass(frozen=True)
class Message:
    role: str
    text: str
    name: str | None = None
    """The tool's name, on a tool result."""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Transcript:
    id: str
    role: str
    model: str | None
    rollout: Rollout
    messages: tuple[Message, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    stop: str | None = None


def rollout_id(role: str, trace_id: str) -> str:
    return f"{role}-{trace_id[:ID_LENGTH]}"


def read_transcripts(directory: Path, role: str) -> list[Transcript]:
    """Every rollout under `directory/traces.jsonl` as a transcript, in file order."""
    out = []
    for trace, episode in iter_traces(directory):
        if trace is None:
            rollout = episode_failure(episode)
            out.append(Transcript(id=rollout_id(role, rollout.trace_id), role=role, model=None, rollout=rollout))
            continue
        out.append(Transcript(
            id=rollout_id(role, str(trace.get("id", ""))), role=role,
            model=((trace.get("agent") or {}).get("config") or {}).get("model"),
            rollout=to_rollout(trace, episode),
            messages=tuple(_message(node.get("message") or {}) for node in trace.get("nodes") or []),
            metrics={k: v for k, v in (trace.get("metrics") or {}).items() if isinstance(v, (int, float))},
            stop=trace.get("stop_condition"),
        ))
    return out


def evaluation_transcripts(outputs: Path, roles: tuple[str, ...] = ROLES) -> list[Transcript]:
    """The transcripts of both models of one evaluation (outputs/<commit>/)."""
    return [t for role in roles for t in read_transcripts(outputs / role, role)]


def find_transcript(outputs: Path, wanted: str) -> Transcript:
    """The rollout `wanted` names (`target-ab12cd34`, or a trace id prefix) in one evaluation."""
    transcripts = evaluation_transcripts(outputs)
    key = wanted.strip().lower()
    role, _, rest = key.partition("-")
    if role in ROLES:  # target-ab12cd34: that model's rollout whose trace id starts with ab12cd34
        hits = [t for t in transcripts if t.role == role and len(rest) >= 4 and t.rollout.trace_id.startswith(rest)]
    else:  # a bare trace id prefix, from either model
        hits = [t for t in transcripts if len(key) >= 4 and t.rollout.trace_id.startswith(key)]
    if len(hits) == 1:
        return hits[0]
    if not transcripts:
        raise AutoEnvError("this evaluation has no rollout traces", where=str(outputs),
                           fix="evaluations that failed before the rollouts have none; see the feedback file")
    if hits:
        raise AutoEnvError(f"{wanted!r} matches {len(hits)} rollouts", where=str(outputs),
                           fix="use the full id: " + ", ".join(t.id for t in hits[:6]))
    close = difflib.get_close_matches(key, [t.id for t in transcripts], n=4, cutoff=0.3)
    raise AutoEnvError(
        f"no rollout {wanted!r} in this evaluation",
        where=str(outputs),
        fix="ids look like " + ", ".join(close or [t.id for t in transcripts[:4]])
        + " (`autoenv show <commit>` lists some; the judge's evidence ids work too)",
    )


def _message(message: dict) -> Message:
    try:
        calls = tuple(Reply.coerce({"tool_calls": message.get("tool_calls") or []}).tool_calls)
    except (KeyError, TypeError, AttributeError):  # a malformed call is shown, not fatal
        calls = (ToolCall(name="?", arguments=json.dumps(message.get("tool_calls"), default=str)),)
    return Message(role=str(message.get("role", "?")), text=message_text(message.get("content")),
                   name=message.get("name"), tool_calls=calls)
