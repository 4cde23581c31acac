"""A probe reply's record: one reply scored in-process by the task's own `score`, and the record it leaves.

Shared by the audit's in-process probes (autoenv.child.audit), the rollouts path
(autoenv.child.rollout_probes), the derive stage (autoenv.child.derived) and the replay
(autoenv.child.replay): every probe reply, however it was played, leaves the same record
(autoenv.gates.audit_record.ProbeRecord), skipped ones with their reason.
"""

from __future__ import annotations

import math
import traceback
from typing import Any

from autoenv.core.traces import said

REPLY_PREVIEW = 400
NO_ORACLE = "needs the oracle's reply, and the candidate has no oracle hook and no inferable answer-field oracle"


def task_messages(task: Any) -> list[dict[str, Any]]:
    data = task.data
    system, prompt = getattr(data, "system_prompt", None), getattr(data, "prompt", None)
    messages = [{"role": "system", "content": system}] if system else []
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    elif prompt:
        messages.extend(m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else dict(m) for m in prompt)
    return messages


def reward_record(trace: Any, probe: str, task: Any, reply_text: str, error: str | None = None) -> dict[str, Any]:
    components, weights = {}, {}
    for name, value in (trace.rewards or {}).items() if trace is not None else []:
        components[name] = None if value is None else value.score
        weights[name] = 1.0 if value is None else value.weight
    return {"probe": probe, "key": task.key, "idx": task.data.idx, "components": components,
            "weights": weights, "error": error, "reply": reply_text[:REPLY_PREVIEW],
            "reply_chars": len(reply_text)}


class Scaffold:
    """What every reply's trace on one task shares: the prompt's nodes, the trace's task (its key and content hash
    computed once) and the agent record. Built once per task instead of once per reply (a probe scores up to ~24
    replies a task); each trace gets shallow copies of these, so scoring one reply cannot change another's."""

    def __init__(self, vf: Any, task: Any) -> None:
        from verifiers.v1.graph import MessageNode  # deferred: verifiers is imported only inside the child

        self.nodes: list[Any] = []
        for message in task_messages(task):
            cls = vf.SystemMessage if message["role"] == "system" else vf.UserMessage
            self.nodes.append(MessageNode(message=cls(content=message["content"]),
                                          parent=len(self.nodes) - 1 if self.nodes else None))
        self.task = vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash)
        self.agent = vf.AgentInfo(config=vf.AgentConfig())
        self.node_type = MessageNode

    def trace(self, vf: Any, reply: Any) -> Any:
        nodes = [node.model_copy() for node in self.nodes]
        assistant = vf.AssistantMessage(content=reply.content)
        nodes.append(self.node_type(message=assistant, parent=len(nodes) - 1 if nodes else None, sampled=True))
        return vf.Trace(task=self.task.model_copy(), agent=self.agent.model_copy(), nodes=nodes)


async def score_in_process(vf: Any, task: Any, reply: Any, scaffold: Scaffold | None = None) -> tuple[Any, str | None]:
    """Score `reply` as the single assistant turn of `task`; returns (trace, error). `scaffold` (the task's, built
    once) saves rebuilding the prompt's part of the trace for each of a task's replies."""
    return await score_trace(task, (scaffold or Scaffold(vf, task)).trace(vf, reply))


async def score_trace(task: Any, trace: Any) -> tuple[Any, str | None]:
    """Score `trace` by the task's own rewards; returns (trace, the error a reward raised, or None)."""
    try:
        await task.score(trace)
    except Exception as e:
        cause = e.__cause__ or e
        return trace, said(type(cause).__name__, str(cause), "".join(traceback.format_exception(cause)))
    return trace, None


def same_rewards(a: dict[str, Any], b: dict[str, Any]) -> bool:
    shared = set(a) & set(b)
    def value(r: Any) -> Any:
        return None if r is None else r.score
    return all((value(a[k]) == value(b[k])) or (_nan(value(a[k])) and _nan(value(b[k]))) for k in shared)


def _nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def total_reward(trace: Any) -> float | None:
    values = [(v.score, v.weight) for v in (trace.rewards or {}).values() if v is not None]
    if not values or any(not isinstance(score, (int, float)) or _nan(score) for score, _ in values):
        return None
    return float(sum(score * weight for score, weight in values))


def skipped(probe: str, task: Any, reason: str | None, error: str | None = None) -> dict[str, Any]:
    return {"probe": probe, "key": task.key, "idx": task.data.idx, "skipped": True, "reason": reason, "error": error}
