"""What the candidate module exports, read inside the evaluation's child process.

verifiers reports a candidate whose import fails on a missing dependency as "taskset not
found"; importing the module ourselves first keeps the real exception (its type, the
missing module's name and the traceback) for autoenv.sandbox.install to explain.
"""

from __future__ import annotations

import importlib
import inspect
import time
import traceback
from typing import Any


def inspect_module(module_name: str) -> dict[str, Any]:
    """Import `module_name` and sort its `__all__` into tasksets, envs, harnesses and others."""
    import verifiers.v1 as vf  # deferred: verifiers is imported only inside the child

    out: dict[str, Any] = {"ok": False}
    started = time.perf_counter()
    try:
        module = importlib.import_module(module_name)
        out["import_seconds"] = round(time.perf_counter() - started, 3)
        names = list(getattr(module, "__all__", []) or [])
        kinds: dict[str, list[str]] = {"taskset": [], "env": [], "harness": [], "other": []}
        for name in names:
            obj = getattr(module, name, None)
            if obj is None:
                kinds["other"].append(name + " (missing)")
            elif inspect.isclass(obj) and issubclass(obj, vf.Taskset):
                kinds["taskset"].append(name)
            elif inspect.isclass(obj) and issubclass(obj, vf.Env):
                kinds["env"].append(name)
            elif inspect.isclass(obj) and issubclass(obj, vf.Harness):
                kinds["harness"].append(name)
            else:
                kinds["other"].append(name)
        out.update(ok=True, all=names, file=getattr(module, "__file__", None), **kinds)
        if len(kinds["taskset"]) == 1:
            task_cls = getattr(module, kinds["taskset"][0]).task_type()
            out["task"] = task_cls.__name__
            out["oracle"] = callable(getattr(task_cls, "oracle", None))
    except BaseException as e:  # the candidate's import may raise anything, SystemExit included
        out.update(error=type(e).__name__, message=str(e), missing=getattr(e, "name", None),
                   traceback=traceback.format_exc())
    return out
