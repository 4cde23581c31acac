"""Scripted policies: deterministic stand-ins for a model, chosen by model name.

A model name is `policy` or `policy:param` (e.g. `noisy-oracle:0.45`). Policies that
need the candidate's reference behaviour ask an `OracleBook` (see oracle.py) for the
oracle's next message; the rest need nothing. Randomness is seeded per rollout from the
server seed and the request's `X-Session-ID`, so a run can be replayed.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


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


class OracleSource(Protocol):
    answers: list[str]

    def find(self, messages: list[dict]) -> Any | None: ...

    def next_message(self, messages: list[dict]) -> Reply | None: ...

    def task_key(self, messages: list[dict]) -> str | None: ...


NO_MATCH = "no task of the candidate matches this conversation's first user message"


class PolicyError(Exception):
    """A request the policy cannot serve (HTTP 400/404 with this message)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class Policies:
    """The registry the endpoint serves: model name -> reply."""

    def __init__(self, oracle: OracleSource | None = None, seed: int = 0):
        self.oracle = oracle
        self.seed = seed
        self._handlers: dict[str, tuple[Callable[[ChatRequest, str | None], Reply], str]] = {
            "oracle": (self._oracle, "plays the candidate's oracle hook"),
            "noisy-oracle": (
                self._noisy_oracle,
                "noisy-oracle:P plays the oracle in a share P of rollouts (per-task "
                "rates drawn around P), else gives up",
            ),
        }
        from autoenv.probes import EXPLOITS

        for probe, doc in EXPLOITS.items():
            self._handlers[probe] = (self._probe, f"exploit probe: {doc}")

    def names(self) -> dict[str, str]:
        return {name: doc for name, (_, doc) in self._handlers.items()}

    def reply(self, request: ChatRequest) -> Reply:
        name, _, param = request.model.partition(":")
        if name not in self._handlers:
            raise PolicyError(
                f"unknown scripted policy {request.model!r}; served: "
                + ", ".join(sorted(self._handlers)),
                status=404,
            )
        handler, _ = self._handlers[name]
        return handler(request, param or None)

    def _need_oracle(self, messages: list[dict]) -> Reply:
        if self.oracle is None:
            raise PolicyError(
                "the oracle policies need a candidate: start the endpoint with "
                "--candidate DIR (autoenv serve) or let autoenv eval --offline embed it"
            )
        reply = self.oracle.next_message(messages)
        if reply is None:
            raise PolicyError(NO_MATCH, status=404)
        return reply

    def _oracle(self, request: ChatRequest, param: str | None) -> Reply:
        return advertised_names(self._need_oracle(request.messages), request.tools)

    def _probe(self, request: ChatRequest, param: str | None) -> Reply:
        from autoenv.probes import NEEDS_ORACLE, probe_reply

        name = request.model.partition(":")[0]
        task = self.oracle.find(request.messages) if self.oracle is not None else None
        oracle = None
        if name in NEEDS_ORACLE:
            oracle = advertised_names(self._need_oracle(request.messages), request.tools)
        answer = getattr(getattr(task, "data", None), "answer", None)
        reply = probe_reply(
            name, oracle=oracle, answer=None if answer is None else str(answer),
            answers=getattr(self.oracle, "answers", []), messages=request.messages, tools=request.tools,
            key=getattr(task, "key", request.session), seed=self.seed,
        )
        return reply if reply is not None else Reply()

    def _noisy_oracle(self, request: ChatRequest, param: str | None) -> Reply:
        try:
            p = float(param) if param is not None else 0.5
        except ValueError:
            raise PolicyError(f"noisy-oracle takes a probability, e.g. noisy-oracle:0.4; got {param!r}")
        if not 0 <= p <= 1:
            raise PolicyError(f"noisy-oracle probability must be in [0, 1], got {p}")
        if p > 0:
            # Fail the same way for every session when the oracle cannot be played at all.
            if self.oracle is None:
                self._need_oracle(request.messages)
            if self.oracle.task_key(request.messages) is None:
                raise PolicyError(NO_MATCH, 404)
        key = self.oracle.task_key(request.messages) if self.oracle else None
        # Real models find some tasks easier than others: each task gets its own success
        # rate from a Beta distribution centred on p, so rollouts of a task agree more
        # often than rollouts of different tasks.
        task_rate = p if p in (0.0, 1.0) else _rng(self.seed, "task", key).betavariate(4 * p, 4 * (1 - p))
        succeeds = _rng(self.seed, "rollout", request.session).random() < task_rate
        if succeeds:
            return advertised_names(self._need_oracle(request.messages), request.tools)
        return Reply(content="I am not sure how to solve this.")


def advertised_names(reply: Reply, tools: list[dict]) -> Reply:
    """Map the bare tool names an oracle uses (`price`) to the names the request
    advertises (a harness may prefix them with the server's name, e.g. `catalog_price`)."""
    names = [((t.get("function") or t).get("name") or "") for t in tools]
    for call in reply.tool_calls:
        if call.name in names:
            continue
        matches = [n for n in names if n.endswith(call.name) and not n[: -len(call.name)][-1:].isalnum()]
        if len(matches) == 1:
            call.name = matches[0]
    return reply
