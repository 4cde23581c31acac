"""Probes derived from real rollouts: the models' best replies, mutated, scored by the task's own rewards.

Most environments have no oracle hook, so the probes built from the oracle's reply cannot
be played before the models run. After the rollouts they can: the best-scoring reply of
the strong model (else the target) on each task is reference behaviour, and mutating it
gives exploit probes for any environment whose tasks can be scored from a transcript,
with no hook. The `derive` stage runs in the evaluation's child process after the
rollouts (and in `autoenv probe --from COMMIT` on a finished evaluation's outputs); it
writes gates/derived.json. autoenv.gates.derived_rules.judge_derived (harness side) turns it into gate findings:
a failed exploit discards the evaluation like any other gate.

Exploits (must not earn): another task's answer swapped in, the reply hidden among other
tasks' replies, the format with the answer emptied, and padding (must not beat the
reference). Variants (measured, not judged, except that whitespace must not matter):
only the final answer, the reasoning truncated, upper case, changed whitespace.
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

from autoenv.child.replay import assistant_messages, replay_mutations
from autoenv.child.tasks import load_tasks, seat_names
from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.core.messages import Reply
from autoenv.core.record import ROLES
from autoenv.core.traces import iter_traces, to_rollout
from autoenv.endpoint.policies import GRADER_URL_VAR, Policies
from autoenv.endpoint.server import Endpoint
from autoenv.gates.derived_record import DerivedRecord
from autoenv.gates.oracle import OracleBook
from autoenv.gates.families import family_reply
from autoenv.gates.probes import BLIND_PER_ROLE, BLIND_PROBES, DERIVED_FILE, FEW_REFERENCES, FILLER, REFUSAL, _with_answer, wrong_answers
from autoenv.gates.probes import DERIVED_RESAMPLED as RESAMPLED
from autoenv.gates.probes import DERIVED_MUTATIONS as MUTATIONS
from autoenv.gates.scoring import reward_record, score_in_process, score_trace, task_messages, total_reward

SINK_SIZE = 20
REPLAY_LIMIT = 6
"""Multi-turn references replayed (each 4 rollouts: the reference and 3 mutations), like probes.rollout_sample."""


def reference_replies(directory: Path, limit: int, multi_turn: list | None = None) -> dict[str, dict]:
    """The best-scoring finished reply per task key over the roles' stored rollouts (strong first);
    rewarded multi-turn or tool rollouts, which cannot be rescored this way, are appended to `multi_turn`."""
    best: dict[str, dict] = {}
    for role in reversed(ROLES):  # strong, then target: the first of equal rewards wins
        for trace, episode in iter_traces(directory / role):
            if trace is None:
                continue
            rollout = to_rollout(trace, episode)
            if rollout.outcome != "ok" or not rollout.reward or rollout.reward <= 0:
                continue
            if rollout.turns > 1 or any(m.get("tool_calls") for m in _assistant(trace)):
                if multi_turn is not None:  # replayed through real rollouts (autoenv.child.replay)
                    kept = next((m for m in multi_turn if m["key"] == rollout.task_key), None)
                    if kept is None or rollout.reward > kept["reward"]:
                        if kept is not None:
                            multi_turn.remove(kept)
                        multi_turn.append({"key": rollout.task_key, "idx": rollout.idx, "role": role,
                                           "reward": rollout.reward, "assistant": assistant_messages(trace)})
                continue  # only single-turn transcripts can be rescored by replacing the final reply
            reply = _final_text(trace)
            if reply is None:
                continue
            old = best.get(rollout.task_key)
            if old is None or rollout.reward > old["reward"]:
                best[rollout.task_key] = {"key": rollout.task_key, "idx": rollout.idx, "role": role,
                                          "reward": rollout.reward, "reply": reply, "trace": trace}
    return dict(list(best.items())[:limit])


def stored_rollouts(directory: Path, per_role: int) -> list[dict]:
    """Up to `per_role` finished single-turn rollouts of each model (distinct tasks, in file order, whatever they
    earned), with their stored traces: what the blind probes are played on."""
    out: list[dict] = []
    for role in ROLES:
        keys: set[str] = set()
        for trace, episode in iter_traces(directory / role):
            if len(keys) >= per_role:
                break
            if trace is None:
                continue
            rollout = to_rollout(trace, episode)
            if rollout.outcome != "ok" or rollout.reward is None or rollout.task_key in keys or rollout.turns > 1 \
                    or any(m.get("tool_calls") for m in _assistant(trace)) or _final_text(trace) is None:
                continue
            keys.add(rollout.task_key)
            out.append({"key": rollout.task_key, "idx": rollout.idx, "role": role, "reward": rollout.reward,
                        "reply": _final_text(trace), "trace": trace})
    return out


def on_stored(vf, task, stored: dict, content: str):
    """The stored rollout's trace with its final reply replaced by `content` and its rewards cleared: its calls,
    usage, timing, runtime, model and sampling are the rollout's own, so a reward sees a rollout, not a probe."""
    data = {k: v for k, v in stored.items() if k not in ("rewards", "metrics")}
    trace = vf.Trace.model_validate(data)
    trace.task = vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash)
    last = max(i for i, node in enumerate(trace.nodes) if getattr(node.message, "role", None) == "assistant")
    trace.nodes[last] = trace.nodes[last].model_copy(update={"message": vf.AssistantMessage(content=content)})
    return trace


async def score_on_stored(vf, task, stored: dict | None, content: str) -> tuple[object, str | None]:
    """`content` scored as the final reply of the stored rollout `stored` (its own trace), else of a fresh scaffold
    (a stored trace verifiers cannot read back is scored the old way)."""
    if stored is not None:
        try:
            trace = on_stored(vf, task, stored, content)
        except (ValueError, TypeError, AttributeError):
            trace = None
        if trace is not None:
            return await score_trace(task, trace)
    return await score_in_process(vf, task, Reply(content=content))


async def score_blind(vf, job: Job, tasks: list, stored: list[dict], out: dict) -> None:
    """The blind probes (autoenv.gates.probes.BLIND_PROBES) on each stored rollout, into out["records"]."""
    by_key = {t.key: t for t in tasks}
    for rollout in stored:
        task = by_key.get(rollout["key"])
        if task is None:
            continue
        abstain = family_reply("abstain", messages=task_messages(task), answers=[])
        replies = {"empty": "", "refusal": REFUSAL,
                   "abstain": abstain.content if abstain is not None and abstain.content else "I don't know."}
        for name in BLIND_PROBES:
            text = replies[name]
            trace, error = await score_on_stored(vf, task, rollout["trace"], text)
            record = reward_record(trace, f"blind {name}", task, text, error)
            record.update(role=rollout["role"])
            out["records"].append(record)
            emit("probe", probe=f"blind {name}")


def _assistant(trace: dict) -> list[dict]:
    out = []
    for node in trace.get("nodes") or []:
        message = node.get("message") or {}
        if message.get("role") == "assistant":
            out.append(message)
    return out


def _final_text(trace: dict) -> str | None:
    messages = _assistant(trace)
    if not messages:
        return None
    content = messages[-1].get("content")
    return content if isinstance(content, str) else None


def mutate(name: str, reply: str, answer: str | None, others: list[str], pool: list[str],
           rng: random.Random) -> str | None:
    """The mutated reply, or None when the mutation does not apply to this reply."""
    known = answer is not None and answer != "" and _with_answer(reply, answer, "\x00") != ""
    answer = answer or ""
    if name == "swap-answer":
        if known:
            return _with_answer(reply, answer, wrong_answers(answer, pool, 1, rng)[0])
        return others[0] if others else None
    if name == "kitchen-sink":
        if known:
            options = [_with_answer(reply, answer, w) for w in wrong_answers(answer, pool, SINK_SIZE, rng)]
        else:
            options = others[:SINK_SIZE]
        if not options:
            return None
        # never first or last: a reward that reads the last (or first) answer is the defence, not the exploit,
        # and a true line that falls last by chance once paid a clean reward on 2 tasks of 12
        options.insert(rng.randrange(1, len(options)) if len(options) >= 2 else len(options), reply)
        return "\n".join(options)
    if name == "format-only":
        if known:
            return _with_answer(reply, answer, "")
        return re.sub(r"(<[^>]*>)|[A-Za-z0-9]+", lambda m: m.group(1) or "", reply)
    if name == "padding":
        return reply + "\n\n" + FILLER * 120
    lines = [line for line in reply.splitlines() if line.strip()]
    if name == "final-only":
        if known:
            return next(line for line in reversed(lines) if answer in line).strip()
        return lines[-1].strip() if lines else None
    if name == "truncated":
        if len(lines) < 3:
            return None
        return "\n".join(lines[: (len(lines) - 1) // 2] + lines[-1:])
    if name == "case":
        return reply.upper() if reply.upper() != reply else None
    if name == "whitespace":
        return "\n\n" + re.sub(r" ", "  ", reply.replace("\n", "\n\n")) + "  \n"
    raise ValueError(f"unknown mutation {name!r}")


async def derive(job: Job) -> None:
    """The child stage: score the mutations of the reference replies, write gates/derived.json."""
    import verifiers.v1 as vf  # deferred: verifiers costs seconds and is needed only inside the child

    started = time.time()
    source = Path(job.reference_dir) if job.reference_dir else job.out
    limit = job.audit.probe_sample if job.audit else 30
    multi_turn: list[dict] = []
    references = reference_replies(source, limit, multi_turn)
    multi_turn = multi_turn[:REPLAY_LIMIT]
    stored = stored_rollouts(source, BLIND_PER_ROLE)
    out = {"source": str(source), "references": len(references), "records": [], "mutations": MUTATIONS,
           "replayed": len(multi_turn), "blind": len(stored)}
    if not references and not multi_turn:
        out["reason"] = ("no rollout of the strong or target model earned reward: there is no reference "
                         "behaviour to mutate")
    if references or multi_turn or stored:
        env, tasks = await load_tasks(vf, job, "derive")
        # the rollouts stage's endpoint has stopped: a model-graded reward needs its grader again
        grader = await Endpoint(Policies(OracleBook(tasks), seed=job.seed)).start()
        os.environ[GRADER_URL_VAR] = grader.base_url
        try:
            blind_started = time.time()
            await score_blind(vf, job, tasks, stored, out)
            out["blind_seconds"] = round(time.time() - blind_started, 3)
            await score_mutations(vf, job, tasks, references, out)
            seats = seat_names(vf, job.taskset_id, job.env_id)
            if multi_turn and len(seats) > 1:  # one seat's transcript cannot be replayed at every seat
                out["replay_reason"] = f"a multi-seat env ({', '.join(seats)}): transcripts are not replayed"
                out["replayed"] = 0
            elif multi_turn:  # multi-turn and tool transcripts: replayed, mutated, through real rollouts
                await replay_mutations(vf, job, env, tasks, multi_turn, out)
        finally:
            await grader.stop()
    out["seconds"] = round(time.time() - started, 3)
    job.audit_dir.mkdir(parents=True, exist_ok=True)
    # validated as the parent will read it: a change to what the stage writes that the record does not describe fails here
    (job.audit_dir / DERIVED_FILE).write_text(DerivedRecord.model_validate(out).to_json())
    emit("finished", seconds=out["seconds"], done={})


async def score_mutations(vf, job: Job, tasks: list, references: dict[str, dict], out: dict) -> None:
    """Each reference reply rescored, then each of its mutations, into out["records"]."""
    by_key = {t.key: t for t in tasks}
    pool = sorted({str(t.data.answer) for t in tasks if getattr(t.data, "answer", None) is not None})
    replies = [r["reply"] for r in references.values()]
    for ref in references.values():
        task = by_key.get(ref["key"])
        if task is None:
            continue
        answer = getattr(task.data, "answer", None)
        answer = None if answer is None else str(answer)
        rng = random.Random(f"{job.seed}:{ref['key']}")
        others = [r for r in replies if r != ref["reply"]]
        rng.shuffle(others)
        trace, error = await score_on_stored(vf, task, ref.get("trace"), ref["reply"])
        record = reward_record(trace, "reference", task, ref["reply"], error)
        record.update(role=ref["role"], stored_reward=ref["reward"])
        out["records"].append(record)
        base = None if error else total_reward(trace)
        again = random.Random(f"{job.seed}:{ref['key']}:again")
        for name, sample in [*((n, 1) for n in MUTATIONS),
                             *((n, 2) for n in (RESAMPLED if len(references) < FEW_REFERENCES else ()))]:
            text = mutate(name, ref["reply"], answer, others, pool, rng if sample == 1 else again)
            if text is None:
                out["records"].append({"probe": name, "key": task.key, "idx": task.data.idx, "skipped": True,
                                       "reason": "does not apply to this reply", "sample": sample})
                continue
            trace, error = await score_on_stored(vf, task, ref.get("trace"), text)
            record = reward_record(trace, name, task, text, error)
            record.update(reference_reward=base, sample=sample)
            out["records"].append(record)
            emit("probe", probe=f"derived {name}")
