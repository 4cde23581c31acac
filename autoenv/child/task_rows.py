"""The loaded tasks as the dataset measure reads them (autoenv.gates.dataset), and how their data reaches the model.

A row holds what the model is given (prompt text, system prompt, media digests) and the
task's own data fields (those its TaskData class adds to verifiers' built-ins, which carry
verifiers' own `id` and `idx`). `data_reach` says whether those fields reach the model beyond
the prompt: only then do they make two tasks with the same prompt different tasks.
"""

from __future__ import annotations

import hashlib
import json


def own_fields(data) -> str:
    """What distinguishes a task without a prompt (a seeded game, say): its own data fields, as JSON."""
    import verifiers.v1 as vf  # deferred: verifiers is imported only inside the child

    names = set(type(data).model_fields) - set(vf.TaskData.model_fields)
    return json.dumps(data.model_dump(mode="json", include=names), sort_keys=True)


def media_parts(data) -> str:
    """Digests of the prompt's non-text content parts (images, audio), in order: two tasks with the same text
    and different images are different tasks."""
    digests = []
    for message in data.prompt if isinstance(data.prompt, list) else []:
        content = message.model_dump(exclude_none=True).get("content") if hasattr(message, "model_dump") \
            else dict(message).get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") != "text":
                digests.append(hashlib.blake2b(json.dumps(part, sort_keys=True, default=str).encode(),
                                               digest_size=8).hexdigest())
    return " ".join(digests)


def dataset_rows(tasks: list) -> list[dict]:
    rows = []
    for t in tasks:
        prompt = t.data.prompt_text
        row = {"key": t.key, "idx": t.data.idx, "prompt": prompt, "system": t.data.system_prompt or "",
               "parts": media_parts(t.data), "data": own_fields(t.data)}
        if not prompt.strip():  # no prompt: tasks differ by their data fields (and seed), not by text
            row.update(prompt=own_fields(t.data), fields=True)
        for name in ("answer", "difficulty", "category"):
            value = getattr(t.data, name, None)
            if value is not None:
                row[name] = str(value)
        rows.append(row)
    return rows


def data_reach(vf, env) -> str | None:
    """How the tasks' own data fields reach the model beyond the prompt, None where the model sees a task only
    through its prompt: a custom Env (its `run` may say anything the task holds, as verifiers' textarena plays
    the game its `info.seed` names), a task-scoped toolset given the task (`setup_task`), or tools acting on
    a runtime the task prepares (`Task.setup`). Rewards and `@vf.stop`/`@vf.intercept` hooks read the task
    but show it to the model no more than the prompt does."""
    if type(env) is not vf.SingleAgentEnv:
        return f"the custom Env {type(env).__name__}"
    taskset_cls = type(env.taskset)
    task_cls = taskset_cls.task_type()
    scoped = list(task_cls.toolsets(env.taskset.config.task))
    given = [type(t).__name__ for t in scoped if type(t).setup_task is not vf.Toolset.setup_task]
    if given:
        return f"the setup_task of the toolset {given[0]}"
    if (scoped or taskset_cls.toolsets(env.taskset.config)) and task_cls.setup is not vf.Task.setup:
        return f"{task_cls.__name__}.setup in the runtime its tools act on"
    return None
