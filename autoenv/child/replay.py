"""Derived probes for multi-turn and tool transcripts: the best rollout replayed through real rollouts, mutated.

A multi-turn or tool rollout cannot be rescored by swapping its final reply in-process: the env's
tools, turns and game state must run again. So the derive stage replays the best rewarded
transcript of each task through the built-in endpoint (policy `replay`, turn by turn: the k-th
assistant message of the stored transcript answers the k-th request) with its final answer
mutated: another task's final answer swapped in (tool calls and moves kept), the final answer
dropped, or the final answer alone without the tool calls before it. The unchanged replay is
the reference. autoenv.gates.derived_rules.judge_derived adds the findings: a mutation that destroys
the final answer yet keeps nearly all of the reference's reward means the answer is not scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from typing import Any

from autoenv.child.worker import LOCAL_KEY_VAR
from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.core.messages import ChatRequest, Reply, message_text
from autoenv.endpoint.policies import Policies, PolicyError
from autoenv.endpoint.server import Endpoint
from autoenv.gates.oracle import OracleBook
from autoenv.gates.replay_rules import REPLAY_MUTATIONS
from autoenv.gates.scoring import reward_record, total_reward

POLICY = "replay"


def transcript(mutation: str, assistant: list[dict], other_final: str | None) -> list[dict] | None:
    """The assistant messages a mutation replays, or None when it does not apply to this transcript."""
    if not assistant:
        return None
    final = dict(assistant[-1])
    if mutation == "reference":
        return assistant
    if mutation == "swap-answer":
        if other_final is None or other_final == final.get("content"):
            return None
        return [*assistant[:-1], {**final, "content": other_final, "tool_calls": None}]
    if mutation == "drop-answer":
        return [*assistant[:-1], {**final, "content": "", "tool_calls": None}]
    if mutation == "no-tools":
        if not any(m.get("tool_calls") for m in assistant[:-1]):
            return None
        return [{**final, "tool_calls": None}]
    raise ValueError(f"unknown replay mutation {mutation!r}")


def replay_policy(book: Any, scripts: dict[tuple[str, str], list[dict]]):
    """The endpoint handler of `replay:<mutation>`: the k-th scripted assistant message of the task's transcript."""
    def reply(request: ChatRequest, param: str | None) -> Reply:
        task = book.find(request.messages, request.task)
        script = scripts.get((param or "reference", str(getattr(task, "key", ""))))
        if script is None:
            raise PolicyError(f"no replay script for this task ({param or 'reference'})", status=404)
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        return Reply.coerce(script[turn]) if turn < len(script) else Reply()
    return reply


async def replay_mutations(vf, job: Job, env, tasks: list, references: list[dict], out: dict) -> None:
    """Each multi-turn reference replayed unchanged and mutated through real rollouts, into out["records"]."""
    by_key = {t.key: t for t in tasks}
    finals = [r["assistant"][-1].get("content") or "" for r in references]
    scripts: dict[tuple[str, str], list[dict]] = {}
    played: list[tuple[str, object]] = []
    for ref in references:
        task = by_key.get(ref["key"])
        if task is None:
            continue
        rng = random.Random(f"{job.seed}:{ref['key']}")
        others = [f for f in finals if f and f != (ref["assistant"][-1].get("content") or "")]
        for mutation in ("reference", *REPLAY_MUTATIONS):
            script = transcript(mutation, ref["assistant"], rng.choice(others) if others else None)
            if script is None:
                out["records"].append({"probe": f"replay {mutation}", "key": task.key, "idx": task.data.idx,
                                       "skipped": True, "reason": "does not apply to this transcript"})
                continue
            scripts[(mutation, task.key)] = script
            played.append((mutation, task))
    if not played:
        return
    policies = Policies(OracleBook(tasks), seed=job.seed)
    policies.serve(POLICY, replay_policy(policies.oracle, scripts), "replays a stored transcript, mutated")
    endpoint = await Endpoint(policies).start()
    os.environ[LOCAL_KEY_VAR] = "local"
    semaphore = asyncio.Semaphore(job.max_concurrent)

    async def play(mutation: str, task) -> None:
        ctx = vf.ModelContext(model=f"{POLICY}:{mutation}", sampling=vf.SamplingConfig(),
                              client=vf.EvalClientConfig(base_url=endpoint.base_url, api_key_var=LOCAL_KEY_VAR))
        episode = await env.run_slot(env.slots(task, 1)[0], ctx, semaphore, on_trace=endpoint.follow)
        for trace in episode.traces[:1]:
            reply = trace.assistant_messages[-1].content if trace.assistant_messages else ""
            error = "; ".join(e.message for e in episode.errors) or None
            record = reward_record(trace, f"replay {mutation}", task, reply or "", error)
            record["reward"] = total_reward(trace)
            out["records"].append(record)
        if not episode.traces:
            out["records"].append({"probe": f"replay {mutation}", "key": task.key, "idx": task.data.idx,
                                   "components": {}, "weights": {}, "error": "no trace"})
        emit("probe", probe=f"replay {mutation}")

    try:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(env.serving())
            await asyncio.gather(*(play(mutation, task) for mutation, task in played))
    finally:
        await endpoint.stop()
    # in the order played, never the order finished (the machine's load decides that)
    place = {(f"replay {m}", t.key): i for i, (m, t) in enumerate(played)}  # type: ignore[attr-defined]
    out["records"].sort(key=lambda r: place.get((r.get("probe"), r.get("key")), -1))


def assistant_messages(trace: dict) -> list[dict]:
    """A stored trace's assistant messages, as the replay policy plays them (content and tool calls)."""
    out = []
    for node in trace.get("nodes") or []:
        message = node.get("message") or {}
        if message.get("role") == "assistant":
            calls = [{"name": (c.get("function") or c).get("name"), "id": c.get("id"),
                      "arguments": (c.get("function") or c).get("arguments") or "{}"}
                     for c in message.get("tool_calls") or []]
            content = message.get("content")
            out.append({"content": content if isinstance(content, str) else message_text(content),
                        "tool_calls": calls or None})
    return out

