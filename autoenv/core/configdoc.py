"""docs/config.md, written from the config model itself, so the reference cannot drift from what is validated.

Every table and key comes from the dataclasses of autoenv.core.config (types from their hints, defaults from
their fields), and every description from the docstring under each field, read from the module's source with
`ast` (Python keeps no field docstrings at run time). A field without one is an error here, so a new key is
documented where it is defined. `python -m autoenv.core.configdoc` rewrites the page; `--check` exits 1 when the
page differs (tests/test_docs.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import types
import typing

from autoenv.core import config as model
from autoenv.core.paths import PROJECT

PAGE = PROJECT / "docs" / "config.md"
# Where a table's behaviour is explained at length.
SEE = {
    "checks": "the per-call limits: [Time limits](evaluation.md#time-limits)",
    "runtime": "[the warm child](sandbox.md#the-warm-child), [the runtimes](runtimes.md#beyond-one-machine)",
    "candidate": "[Evaluate an environment you already have](gates.md#evaluate-an-environment-you-already-have)",
    "agent": "[the agent driver](driver.md)",
    "run": "[the run lifecycle](evaluation.md#the-run-lifecycle)",
    "offline": "[the built-in endpoint](endpoint.md)",
}
INTRO = """# config.toml reference

Part of [AutoEnv](../README.md). Generated from `autoenv/core/config.py` by
`.venv/bin/python -m autoenv.core.configdoc` (tests/test_docs.py fails when this page differs
from what it writes): to change a description, edit the docstring under the field, then run it.

Every knob of an evaluation, validated: an unknown key, a wrong type or a bad value is an
error naming the file, line and key (typos never fall back to defaults silently). The shipped
`config.toml` sets the common keys, with a comment on each.
"""


def field_docs() -> dict[str, dict[str, str]]:
    """{class name: {field: the docstring under it}} from the config module's source."""
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(inspect.getsource(model)).body:
        if isinstance(node, ast.ClassDef):
            docs = found.setdefault(node.name, {})
            for stmt, after in zip(node.body, node.body[1:]):
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                        and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):
                    docs[stmt.target.id] = " ".join(after.value.value.split())
    return found


def type_name(hint: object) -> str:
    if isinstance(hint, types.UnionType):
        kinds = [k for k in typing.get_args(hint) if k is not type(None)]
        optional = len(kinds) < len(typing.get_args(hint))
        return " or ".join(type_name(k) for k in kinds) + (" (optional)" if optional else "")
    if typing.get_origin(hint) is list:
        return f"array of {type_name(typing.get_args(hint)[0])}s"
    names = {int: "integer", float: "number", str: "string", bool: "boolean", dict: "table"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))  # type: ignore[call-overload]


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


def default_of(f: dataclasses.Field) -> str:
    if f.default is None:
        return "unset"
    if f.default is not dataclasses.MISSING:
        return f"`{toml_value(f.default)}`"
    if f.default_factory is not dataclasses.MISSING:
        return f"`{toml_value(f.default_factory())}`"
    return "required"


def tables(cls: type, prefix: str) -> list[tuple[str, type]]:
    """(dotted name, dataclass) for `cls` and every table below it, depth first."""
    out = [(prefix, cls)]
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += tables(hints[f.name], f"{prefix}.{f.name}" if prefix else f.name)
    return out


def render() -> str:
    docs = field_docs()
    names: dict[type, list[str]] = {}  # one section per class: [target] and [strong] share one
    for name, cls in tables(model.Config, ""):
        names.setdefault(cls, []).append(name)
    out = [INTRO]
    for cls, dotted in names.items():
        heading = "top level" if dotted == [""] else ", ".join(f"[{d}]" for d in dotted)
        out.append(f"## {heading}\n")
        if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
            out.append(" ".join(cls.__doc__.split()) + "\n")
        if dotted[0] in SEE:
            out.append(f"More: {SEE[dotted[0]]}.\n")
        out.append("| key | type | default | what it does |\n|---|---|---|---|")
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name == "root" or dataclasses.is_dataclass(hints[f.name]):
                continue
            doc = docs.get(cls.__name__, {}).get(f.name)
            if not doc:
                raise SystemExit(f"autoenv/core/config.py: {cls.__name__}.{f.name} has no docstring; "
                                 "add one under the field: docs/config.md is written from it")
            key = f"`{f.name}`" + (f" (`[{dotted[0]}.{f.name}]`)" if hints[f.name] is dict else "")
            out.append(f"| {key} | {type_name(hints[f.name])} | {default_of(f)} | {doc.replace('|', '/')} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autoenv.core.configdoc", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/config.md differs; write nothing")
    args = parser.parse_args(argv)
    text = render()
    current = PAGE.read_text() if PAGE.is_file() else ""
    if args.check:
        if current != text:
            print(f"{PAGE} is out of date: run .venv/bin/python -m autoenv.core.configdoc", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
