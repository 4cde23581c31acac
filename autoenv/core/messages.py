"""Chat messages as the scripted policies, the probes and the oracle hook exchange them.

The lowest layer of the endpoint and the gates: both the policies (which serve replies)
and the probes (which build them) need these types, so they live below both.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as the OpenAI wire format carries it
    id: str = ""


@dataclass
class Reply:
    """One assistant message produced by a policy."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)

    @classmethod
    def coerce(cls, value: Any) -> "Reply":
        """Normalise what an oracle hook returns: text, a dict, a Reply, or None."""
        if value is None:
            return cls()
        if isinstance(value, Reply):
            return value
        if isinstance(value, str):
            return cls(content=value)
        if isinstance(value, dict):
            calls = []
            for i, call in enumerate(value.get("tool_calls") or []):
                fn = call.get("function", call)
                args = fn.get("arguments", {})
                calls.append(
                    ToolCall(
                        name=str(fn["name"]),
                        arguments=args if isinstance(args, str) else json.dumps(args),
                        id=str(call.get("id") or f"call_{i}"),
                    )
                )
            return cls(content=str(value.get("content") or ""), tool_calls=calls)
        raise TypeError(
            "an oracle hook must return a string, a dict with 'content' and/or "
            f"'tool_calls', or None; got {type(value).__name__}"
        )


@dataclass
class ChatRequest:
    """What a policy sees of one /v1/chat/completions request."""

    model: str
    messages: list[dict]
    tools: list[dict]
    session: str
    """The rollout's id (X-Session-ID header), or a per-request id when absent."""
    task: str | None = None
    """The key of the task this rollout plays, as the harness told the endpoint (autoenv.endpoint.server
    Endpoint.assign, or the X-AutoEnv-Task header); None: the task is found by the conversation's text."""
    rollout: str = ""
    """What a policy seeds a rollout's randomness with: where the task is known, the task's key, the model and the
    rollout's ordinal among that model's rollouts of that task (`key#model#2`), the same in every run whatever the
    order the rollouts start or finish in; else the session. Never the session where a task is known: verifiers mints
    trace ids at random, so a draw seeded by one would differ in every run."""

    def __post_init__(self) -> None:
        self.rollout = self.rollout or self.session


AMBIGUOUS = "tasks share this first user message: the scripted model cannot tell which task it plays"
"""Why a scripted reply that needs the task's answer could not be built: no rollout identity, and the text
fallback (the first user message, images stripped, and the system prompt) matches several tasks."""


GRADER_UNSURE = "the offline grader could not tell what form to answer in"
"""The scripted grader's HTTP 422 where a grading request names no verdict form it can read
(autoenv.endpoint.grader): the harness's limit, not the environment's error (autoenv.core.traces.grader_mismatch)."""


def ambiguous(count: int) -> str:
    """The reason, as the endpoint answers it and the probes record it (`8 tasks share ...`)."""
    return f"{count} {AMBIGUOUS}"


def ambiguity(text: str) -> str | None:
    """The reason `ambiguous` gave, found in an error's text (a rollout's provider error quotes the endpoint)."""
    found = re.search(rf"\d+ {re.escape(AMBIGUOUS)}", text)
    return found.group(0) if found else None


def message_text(content: Any) -> str:
    """The text of an OpenAI message `content` (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return str(content)


def seeded_rng(*parts: object) -> random.Random:
    """A random generator seeded from `parts`: the same parts replay the same choices."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def tool_names(tools: list[dict]) -> list[str]:
    """The names of the tools a chat request advertises (OpenAI `{"function": {...}}` or flat)."""
    return [((t.get("function") or t).get("name") or "") for t in tools]
