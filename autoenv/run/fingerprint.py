"""What a commit changed that could change a rollout: the candidate's code outside its rewards, and the sampled tasks.

Two checks decide whether an evaluation may re-score stored rollouts (autoenv.evaluation.rescore)
instead of calling the models again; both must prove "nothing a rollout sees changed":

- `rollout_changes` (harness side, from git): the candidate's files between two commits.
  Docs (`.md`, `.rst`) never matter. A Python module may differ only inside functions
  decorated `@vf.reward` / `@vf.metric` (any decorator named `reward` or `metric`), in
  module-level helpers and constants that only those functions reach, and in the module's
  docstring (a function's docstring may be a tool's description, a class's a schema's).
  Anything else (another file, a stop condition, a tool, the oracle hook, load(), a file
  added or deleted) is named as the reason to roll out.
- `task_fingerprint` (child side, from the loaded environment): a hash of the sampled
  tasks' data and prompts, their tools' schemas and code, their stop conditions and the
  env's own code (every method of the env, taskset and task classes but rewards and
  metrics), stored beside the rollouts so a later evaluation compares its own.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
from pathlib import PurePosixPath
from typing import Any

from autoenv.core.events import emit
from autoenv.core.job import Job
from autoenv.run.gitrepo import Repo

DOC_SUFFIXES = (".md", ".rst")
SCORING = ("reward", "metric")
FINGERPRINT_FILE = "fingerprint.json"
"""outputs/<commit>/fingerprint.json: the rollouts stage's task_fingerprint, what a rescore compares."""
RESCORE_FILE = "rescore.json"
"""outputs/<commit>/rescore.json: {"rescored": bool, "reason": why not, "source": dir, counts} (autoenv.child.rescore_stage)."""


def rollout_changes(repo: Repo, old: str, new: str, candidate: str) -> list[str]:
    """Why the candidate at `new` could roll out differently from `old` ([] when only rewards, metrics and docs
    changed); `candidate` is the candidate folder relative to the repository."""
    out = repo.run_git("diff", "--name-status", "--no-renames", old, new, "--", candidate)
    reasons = []
    for line in out.splitlines():
        status, _, path = line.partition("\t")
        if PurePosixPath(path).suffix in DOC_SUFFIXES:
            continue
        if status != "M":
            reasons.append(f"{path} was {'added' if status == 'A' else 'deleted' if status == 'D' else 'changed'}")
            continue
        if not path.endswith(".py"):
            reasons.append(f"{path} changed (not a Python module or a doc: task data, config or packaging)")
            continue
        changed = module_changes(repo.run_git("show", f"{old}:{path}"), repo.run_git("show", f"{new}:{path}"))
        if changed:
            reasons.append(f"{path} changed outside reward and metric functions: {', '.join(changed)}")
    return reasons


def module_changes(old: str, new: str) -> list[str]:
    """The top-level names (or `module code`) whose rollout-relevant code differs between two versions of a module."""
    try:
        a, b = skeleton(old), skeleton(new)
    except SyntaxError as e:
        return [f"does not parse ({e.msg}, line {e.lineno})"]
    if a == b:
        return []
    names = [name for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
    return names or ["module code"]


def skeleton(source: str) -> dict[str, str]:
    """The module as {top-level name: normalised code} with reward and metric functions, the helpers and
    constants only they reach, and the module docstring taken out."""
    tree = ast.parse(source)
    scoring: list[ast.stmt] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.Module)):
            kept: list[ast.stmt] = []
            for child in node.body:
                (scoring if _is_scoring(child) else kept).append(child)
            node.body = kept or [ast.Pass()]
    _strip_docstrings(tree)
    while True:  # helpers only scoring code reaches, and the helpers only those reach
        used = _names(tree.body)
        reached = _names(scoring)
        only = [n for n in tree.body if (_defined(n) & reached) and not (_defined(n) & used)]
        if not only:
            break
        scoring.extend(only)
        tree.body = [n for n in tree.body if n not in only] or [ast.Pass()]
    parts: dict[str, str] = {}
    for node in tree.body:
        name = node.name if isinstance(node, ast.ClassDef) else next(iter(sorted(_defined(node))), "module code")
        parts[name] = parts.get(name, "") + ast.dump(node)
    return parts


def _is_scoring(node: ast.AST) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
        if name in SCORING:
            return True
    return False


def _strip_docstrings(tree: ast.Module) -> None:
    """The module's own docstring only: a function's is a tool's description, a class's a schema's."""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        tree.body = body[1:] or [ast.Pass()]


def _defined(node: ast.AST) -> set[str]:
    """The names a top-level statement defines (functions, and constants assigned plainly)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {node.name}
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return {node.target.id}
    return set()


def _names(nodes: list) -> set[str]:
    """Every name and attribute a list of statements mentions, but the names they define themselves."""
    out: set[str] = set()
    for top in nodes:
        own = _defined(top)
        for node in ast.walk(top):
            if isinstance(node, ast.Name) and node.id not in own:
                out.add(node.id)
            elif isinstance(node, ast.Attribute):
                out.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)  # getattr(self, "name"), __all__ entries
    return out


def task_fingerprint(env: Any, tasks: list, settings: dict) -> dict[str, str]:
    """{part: SHA-256} of what the sampled `tasks` put before a model: data and prompts, tools, stop conditions,
    the env's own code and the rollout settings. Runs in the child (the objects are the candidate's)."""
    task_cls = type(tasks[0]) if tasks else None
    parts: dict[str, Any] = {
        "tasks": [[t.key, t.data.model_dump(mode="json", exclude_none=True)] for t in tasks],  # prompts included
        "stops": sorted(_source(fn) for fn in tasks[0].hooks("stop")) if tasks else [],
        "tools": _tools(env, task_cls),
        "env code": [_class_code(c) for c in (type(env), type(env.taskset), task_cls) if c is not None],
        "settings": settings,
    }
    return {name: hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode()).hexdigest()
            for name, value in parts.items()}


def _tools(env: Any, task_cls: Any) -> list:
    out = []
    toolsets = []
    if task_cls is not None:
        toolsets += list(task_cls.toolsets(env.taskset.config.task))
    toolsets += list(type(env.taskset).toolsets(env.taskset.config))
    for toolset in toolsets:
        dumped = toolset.model_dump(mode="json") if hasattr(toolset, "model_dump") else repr(toolset)
        out.append([type(toolset).__qualname__, dumped, _class_code(type(toolset))])
    return out


def _class_code(cls: type) -> list:
    """The source of every method of `cls` and its candidate-defined bases, but reward and metric hooks."""
    out = []
    for klass in cls.__mro__:
        if klass.__module__.startswith(("verifiers", "builtins", "pydantic", "typing")):
            continue
        for name, value in sorted(vars(klass).items()):
            fn = getattr(value, "__func__", value)
            fn = getattr(fn, "fget", fn)
            if not callable(fn) or any(hasattr(fn, kind) for kind in SCORING):
                continue
            out.append([klass.__qualname__, name, _source(fn)])
    return out


def _source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return repr(fn)


def job_settings(job: Job) -> dict[str, Any]:
    """The rollout settings a fingerprint covers besides the tasks: turns, timeouts, runtime, the seats."""
    plan = job.rollouts
    return {"max_turns": job.max_turns, "rollout_timeout": job.rollout_timeout,
            "runtime": job.runtime.model_dump(exclude={"warm_seconds"}),  # how the child starts changes no rollout
            "tool_seconds": job.limits.tool_seconds, "seed": job.seed,
            "roles": {r: [s.model, s.sampling.model_dump(), s.embedded] for r, s in plan.roles.items()} if plan else {},
            "examples": plan.examples if plan else None, "rollouts": plan.rollouts if plan else None}


def write_fingerprint(job: Job, env: Any, chosen: list) -> None:
    """Called by the rollouts stage: what a later rescore of these rollouts compares against."""
    try:
        print_ = task_fingerprint(env, chosen, job_settings(job))
    except Exception as e:  # noqa: BLE001 - no fingerprint only means no later rescore
        emit("note", message=f"no task fingerprint ({type(e).__name__}: {e}): later commits roll out in full")
        return
    (job.out / FINGERPRINT_FILE).write_text(json.dumps(print_, indent=1))
