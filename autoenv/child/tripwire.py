"""The tripwire: AutoEnv's code in the child is still the code it loaded before the candidate was imported.

The audit, the derived probes and the rollouts run in the candidate's own interpreter (a reward
is the candidate's code), so the candidate's code can reach AutoEnv's: wrap the stage table to
know when it is audited, replace a probe's scoring, swap a function's code. Before the first
stage (the candidate not yet imported) the child records every function and class of every
`autoenv` module it has loaded (each module's names, each class's methods, each function's code
object and defaults) and the stage table; before and after every stage it compares. A name
that changed is reported as a `patched` event and the child stops: the harness records the
commit as `tampered`, naming what was patched (autoenv.evaluation.decision). A trace or profile
function set in the child (`sys.settrace`, `sys.setprofile`: a way to watch the harness's frames)
is reported the same way.

This is a check inside the process it guards, so it is a tripwire and no wall: code that knows it
can undo its patch before the check, or patch the check. What the candidate cannot tell apart from
the evaluation is the derived probes played on the rollouts' own traces (autoenv.child.derived);
this makes the plain patch, the one that works, a named cause instead of a silent `keep`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

WATCHED = "autoenv"
"""The package whose modules are watched."""


def _parts(value: Any) -> tuple[Any, ...]:
    """What must stay the same of one module-level value: a function's object, code, defaults and closure cells'
    contents' identities; a class's object and its own methods (each with its code); the value itself otherwise."""
    if isinstance(value, types.FunctionType):
        cells = tuple(id(c.cell_contents) if _filled(c) else None for c in value.__closure__ or ())
        return value, value.__code__, value.__defaults__, value.__kwdefaults__, cells
    if isinstance(value, type):
        methods = []
        for name, member in vars(value).items():
            inner = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            if isinstance(inner, types.FunctionType):
                methods.append((name, member, inner.__code__))
        return (value, tuple(methods))
    return (value,)


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y or (type(x) is tuple and type(y) is tuple and x == y)
                                    for x, y in zip(a, b, strict=True))


class Tripwire:
    """A record of AutoEnv's loaded code, taken before the candidate is imported; `changed()` names what differs."""

    def __init__(self, tables: dict[str, dict[str, Any]] | None = None) -> None:
        self.modules = {name: module for name, module in sys.modules.items()
                        if isinstance(module, types.ModuleType) and (name == WATCHED or name.startswith(WATCHED + "."))}
        self.seen: dict[tuple[str, str], tuple[Any, ...]] = {}
        for module_name, module in self.modules.items():
            for name, value in list(vars(module).items()):
                if isinstance(value, (types.FunctionType, type)) and not name.startswith("__"):
                    self.seen[(module_name, name)] = _parts(value)
        self.tables = {label: dict(table) for label, table in (tables or {}).items()}
        self.live_tables = tables or {}

    def changed(self) -> list[str]:
        """What was patched since the record: `module.name` (or `module.Class.method`), a stage table's entry,
        a replaced module, a trace or profile function; empty when all is as loaded."""
        found: list[str] = []
        for module_name, module in self.modules.items():
            if sys.modules.get(module_name) is not module:
                found.append(f"{module_name} (the module was replaced in sys.modules)")
        for (module_name, name), parts in self.seen.items():
            now = vars(self.modules[module_name]).get(name)
            if now is None:
                found.append(f"{module_name}.{name} (deleted)")
                continue
            current = _parts(now)
            if _same(parts, current):
                continue
            if isinstance(now, type) and parts[0] is now:
                before = {m: (obj, code) for m, obj, code in parts[1]}
                after = {m: (obj, code) for m, obj, code in current[1]}
                for method in sorted(set(before) | set(after)):
                    if before.get(method, (None, None))[0] is not after.get(method, (None, None))[0] \
                            or before.get(method, (None, None))[1] is not after.get(method, (None, None))[1]:
                        found.append(f"{module_name}.{name}.{method}")
            else:
                found.append(f"{module_name}.{name}" + (" (its code replaced)" if parts[0] is now else ""))
        for label, table in self.tables.items():
            live = self.live_tables[label]
            for key in sorted(set(table) | set(live)):
                if table.get(key) is not live.get(key):
                    found.append(f"{label}[{key!r}]")
        if sys.gettrace() is not None:
            found.append(f"sys.settrace (a trace function is set: {_name(sys.gettrace())})")
        if sys.getprofile() is not None:
            found.append(f"sys.setprofile (a profile function is set: {_name(sys.getprofile())})")
        return found


def _name(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__name__)}"
