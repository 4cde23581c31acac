"""The oracle hook: find a conversation's task and ask it for the reference next message.

Contract (taught in program.md): a candidate's task class may define

    def oracle(self, messages: list[dict]) -> str | dict | None

which receives the conversation so far in OpenAI chat format (system, user, assistant
and tool messages, as the endpoint received them) and returns the reference next
assistant message: text, or a dict `{"content": ..., "tool_calls": [{"name": ...,
"arguments": {...}}]}`. The endpoint identifies the task by the conversation's first
user message (and the system prompt when several tasks share a prompt).
"""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any, Iterable

from autoenv.core.messages import Reply, message_text
from autoenv.gates.answer_oracle import format_reply

HOOK = "oracle"


def _norm(text: str) -> str:
    return " ".join(text.split())


def first_user_text(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return _norm(message_text(message.get("content")))
    return ""


def system_text(messages: list[dict[str, Any]]) -> str:
    return _norm(
        " ".join(message_text(m.get("content")) for m in messages if m.get("role") == "system")
    )


def task_prompt_text(task: Any) -> str:
    """The first user message a rollout of `task` opens with."""
    prompt = task.data.prompt
    if prompt is None or isinstance(prompt, str):
        return _norm(prompt or "")
    messages = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in prompt]
    return first_user_text(messages)


def has_hook(task: Any) -> bool:
    return callable(getattr(task, HOOK, None))


class OracleBook:
    """An index of a candidate's tasks by first user message, answering `next_message`."""

    def __init__(self, tasks: Iterable[Any], answer_format: str | None = None):
        self._by_prompt: dict[str, list[Any]] = {}
        counts: Counter[str] = Counter()
        for task in tasks:
            self._by_prompt.setdefault(task_prompt_text(task), []).append(task)
            answer = getattr(task.data, "answer", None)
            if answer is not None:
                counts[str(answer)] += 1
        self.answers = sorted(counts)
        """Every task's reference answer: the pool the wrong-answer probes draw from."""
        self.constant = counts.most_common(1)[0][0] if counts else None
        """The most common answer: what the constant probe replies."""
        self.answer_format = answer_format
        """For tasks without a hook: the answer-field oracle's format (autoenv.gates.answer_oracle)."""

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_prompt.values())

    def find(self, messages: list[dict[str, Any]]) -> Any | None:
        matches = self._by_prompt.get(first_user_text(messages))
        if not matches:
            return None
        if len(matches) > 1:
            system = system_text(messages)
            for task in matches:
                own = _norm(task.data.system_prompt or "")
                if own and own in system:
                    return task
        return matches[0]

    def task_key(self, messages: list[dict[str, Any]]) -> str | None:
        task = self.find(messages)
        return task.key if task is not None else None

    def next_message(self, messages: list[dict[str, Any]]) -> Reply | None:
        task = self.find(messages)
        if task is None:
            return None
        hook = getattr(task, HOOK, None)
        answer = getattr(task.data, "answer", None)
        if not callable(hook) and self.answer_format and answer not in (None, ""):
            return Reply(content=format_reply(answer, self.answer_format))
        if not callable(hook):
            # nothing to play: an empty reply, which scores 0. The verdict knows from the
            # install stage (CandidateInfo.oracle_hook) and calls such evaluations inconclusive.
            return Reply(content="")
        result = hook(messages)
        if inspect.isawaitable(result):
            if hasattr(result, "close"):
                result.close()
            raise TypeError("the oracle hook must be a plain (non-async) method")
        return Reply.coerce(result)
