"""The oracle hook: find a conversation's task and ask it for the reference next message.

Contract (taught in program.md): a candidate's task class may define

    def oracle(self, messages: list[dict]) -> str | dict | None

which receives the conversation so far in OpenAI chat format (system, user, assistant
and tool messages, as the endpoint received them) and returns the reference next
assistant message: text, or a dict `{"content": ..., "tool_calls": [{"name": ...,
"arguments": {...}}]}`. The endpoint knows the task from the rollout's identity: the harness
tells it which task each rollout plays before the rollout's first request (the task's key).
A request without one (an external client of `autoenv serve`) is matched by the conversation's
first user message, images stripped (and the system prompt when several tasks share a prompt);
where several tasks still match, `find` raises AmbiguousTask rather than guess.
"""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any, Callable, Iterable

from autoenv.core.messages import Reply, ambiguous, message_text
from autoenv.gates.answer_oracle import ANSWER, answer_of, format_reply

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


class AmbiguousTask(LookupError):
    """Several tasks match a conversation that carries no rollout identity: which one it plays is unknown."""

    def __init__(self, count: int):
        super().__init__(ambiguous(count))
        self.count = count


class OracleBook:
    """An index of a candidate's tasks by key and by first user message, answering `next_message`."""

    def __init__(self, tasks: Iterable[Any], answer_format: str | None = None, answer_field: str | None = None):
        self._by_prompt: dict[str, list[Any]] = {}
        self._by_key: dict[str, Any] = {}
        counts: Counter[str] = Counter()
        self._count = 0
        for task in tasks:
            self._count += 1
            if str(task.key) not in self._by_key:  # keys are unique in a taskset: a repeat is the same task
                self._by_key[str(task.key)] = task
                self._by_prompt.setdefault(task_prompt_text(task), []).append(task)
            answer = answer_of(task, answer_field)
            if answer is not None:
                counts[str(answer)] += 1
        self.answers = sorted(counts)
        """Every task's reference answer: the pool the wrong-answer probes draw from."""
        self.constant = counts.most_common(1)[0][0] if counts else None
        """The most common answer: what the constant probe replies."""
        self.answer_format = answer_format
        """For tasks without a hook: the answer-field oracle's format (autoenv.gates.answer_oracle)."""
        self.answer_field = answer_field or ANSWER
        """The data field that oracle reads (`answer`, or the field the audit learnt)."""
        self.surface: frozenset[str] | None = None
        """The surface family's strategies shared by every probed task (autoenv.gates.families.shared_surface),
        set by the probe stage; None: each task's own."""
        self.strategies: dict[str, list[str]] = {}
        """The strategies the audit plays of each probe of ROLLOUT_STRATEGIES, by name: `near-miss:2` plays the third."""
        self.fields_of: Callable[[Any], dict[str, Any]] | None = None
        """A task's data fields other than its answer (field-copy), set by the probe stage."""

    def __len__(self) -> int:
        return self._count

    def find(self, messages: list[dict[str, Any]], key: str | None = None) -> Any | None:
        """The task keyed `key` (the rollout's identity, which the harness gives); without one, or with a key
        no task has (a custom Env's own variant of a task), the task whose first user message the conversation
        opens with, told apart by system prompt when several share it. None when no task matches; AmbiguousTask
        when several still do."""
        if key is not None and key in self._by_key:
            return self._by_key[key]
        matches = self._by_prompt.get(first_user_text(messages))
        if not matches:
            return None
        if len(matches) > 1:
            system = system_text(messages)
            own = [task for task in matches if (prompt := _norm(task.data.system_prompt or "")) and prompt in system]
            matches = own if own else matches
        if len(matches) > 1:
            raise AmbiguousTask(len(matches))
        return matches[0]

    def task_key(self, messages: list[dict[str, Any]], key: str | None = None) -> str | None:
        task = self.find(messages, key)
        return task.key if task is not None else None

    def next_message(self, messages: list[dict[str, Any]], key: str | None = None) -> Reply | None:
        task = self.find(messages, key)
        if task is None:
            return None
        hook = getattr(task, HOOK, None)
        answer = answer_of(task, self.answer_field)
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
