"""Source reading: the reply formats and constants a reward parses, learnt from its source text alone.

A probe that plays a reply the reward cannot parse learns nothing, and a reward-search probe needs a
dictionary. So the gates read the modules that define an environment's reward functions and collect the
formats they parse (regex captures, XML tags, split delimiters, JSON keys) and the constants they compare
the reply with. The code is never run: only `ast` reads it and only the regex parser reads its patterns,
so a hostile module cannot act here. A module that does not parse, or a pattern that does not compile, is
skipped: the reading is best effort and never raises. No verifiers import.

Everything comes in order of appearance (modules in the order given, nodes in source order), deduplicated
and capped. Formats: regex templates (the simplest text a pattern matches, its answer group as "{}"), then
tags (`<t>{}</t>` where "<t>" and "</t>" are both literals), then delimiters (`Verdict: {}` from
`reply.split("Verdict:")`), then JSON objects (modules that call json.loads). Strings: the constants the
reply is compared with or searched for (== and in targets, string-method arguments, the literal runs of
patterns), then the simplest match of each pattern without a template, then the module's other short
literals (never docstrings or f-string parts). A template that is only the slot (from `^\\s*(\\d+)$`)
says nothing about the format and is left out.
"""

from __future__ import annotations

import ast
import json
import re
import string
import warnings
from dataclasses import dataclass, field
from typing import Any

from autoenv.gates.regex_templates import literal_runs, parse_pattern, regex_example, regex_template

MAX_FORMATS = 12
MAX_STRINGS = 80
MAX_NUMBERS = 20
MAX_KEYS = 20
MAX_SOURCE_CHARS = 400_000
MAX_STRING_CHARS = 60
REGEX_CALLS = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3,
               "sub": 4, "subn": 4}
"""The regex functions read, each with the position of its flags argument."""
SEARCH_METHODS = frozenset({"startswith", "endswith", "count", "find", "rfind", "index", "rindex", "split",
                            "rsplit", "partition", "rpartition", "removeprefix", "removesuffix"})
DELIMITER_METHODS = frozenset({"split", "rsplit", "partition", "rpartition", "startswith", "removeprefix",
                               "index", "find", "rfind"})
TAG = re.compile(r"<(/?)([A-Za-z_][\w\-]*)>")


@dataclass(frozen=True)
class SourceReading:
    """What the reward code parses. `formats` are reply templates with exactly one "{}", the answer's slot:
    in a JSON template the slot stands where the value goes unquoted (the caller json-dumps the value there)."""

    formats: tuple[str, ...]
    strings: tuple[str, ...]
    numbers: tuple[float, ...]
    keys: tuple[str, ...]


@dataclass
class _Found:
    """What the reading found so far, each list in order of appearance."""

    templates: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    delimiters: list[str] = field(default_factory=list)
    json_templates: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    literals: list[str] = field(default_factory=list)
    numbers: list[float] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)


@dataclass
class _Module:
    """One module's context: its imports (local name to qualified name), its names bound to literals, the names
    it uses as dicts, and what the reading found only this module needs (its patterns, keys read, collections)."""

    imports: dict[str, str]
    constants: dict[str, ast.expr]
    dicts: set[str]
    patterns: set[str] = field(default_factory=set)
    read_keys: list[str] = field(default_factory=list)
    collections: list[list[str]] = field(default_factory=list)
    loads_json: bool = False


def _unique(items: list[Any], limit: int) -> tuple[Any, ...]:
    """The items without repeats, in order, at most `limit`."""
    return tuple(dict.fromkeys(items))[:limit]


def _is_short(text: str) -> bool:
    """Whether a string is worth keeping: 1 to 60 characters on one line."""
    return 0 < len(text) <= MAX_STRING_CHARS and "\n" not in text and "\r" not in text


def read_sources(sources: list[str]) -> SourceReading:
    """The formats, strings, numbers and keys the reward modules' source texts parse; never raises."""
    found = _Found()
    total = 0
    for source in sources:
        total += len(source)
        if total > MAX_SOURCE_CHARS:
            break
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(source)
            _read_module(tree, found)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # a module nested too deep to walk keeps what was read of it before
    formats = found.templates + found.tags + found.delimiters + found.json_templates
    strings = [text for text in found.targets + found.examples + found.literals if _is_short(text)]
    return SourceReading(formats=_unique(formats, MAX_FORMATS), strings=_unique(strings, MAX_STRINGS),
                         numbers=_unique(found.numbers, MAX_NUMBERS), keys=_unique(found.keys, MAX_KEYS))


def _position(node: ast.AST) -> tuple[int, int]:
    """Where a node starts in the source."""
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _read_module(tree: ast.Module, found: _Found) -> None:
    """Reads one parsed module into `found`."""
    nodes: list[ast.AST] = [node for node in ast.walk(tree) if isinstance(node, (ast.expr, ast.stmt))]
    nodes.sort(key=_position)
    module = _Module(imports=_imports(nodes), constants=_constants(nodes), dicts=_dict_names(nodes))
    skipped = _docstrings_and_fstring_parts(tree)
    module_strings = []
    for node in nodes:
        if isinstance(node, ast.Call):
            _read_call(node, module, found)
        elif isinstance(node, ast.Compare):
            _read_compare(node, module, found)
        elif isinstance(node, ast.Subscript) and _qualified(node.value, module) != "os.environ":
            _read_key(_string_value(node.slice, module), module, found)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            _read_collection(node.iter, module, found)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in node.generators:
                _read_collection(generator.iter, module, found)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            module_strings.append(node.value)
    found.literals += [text for text in module_strings if text not in module.patterns]
    found.tags += _tag_templates(module_strings)
    if module.loads_json:
        found.json_templates += _json_templates(module)


def _imports(nodes: list[ast.AST]) -> dict[str, str]:
    """Each imported local name with the qualified name it stands for (`from re import search` gives re.search)."""
    imports = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return imports


def _constants(nodes: list[ast.AST]) -> dict[str, ast.expr]:
    """The names bound to a literal string or collection (`PATTERN = r"..."`, `REQUIRED = ("a", "b")`)."""
    constants: dict[str, ast.expr] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(value, (ast.Constant, ast.Tuple, ast.List, ast.Set)):
            constants[target.id] = value
    return constants


def _dict_names(nodes: list[ast.AST]) -> set[str]:
    """The names used as dicts: subscripted with a string, read with .get, or assigned a json.loads result."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                names.add(node.value.id)
        elif isinstance(node, ast.Attribute) and node.attr == "get" and isinstance(node.value, ast.Name):
            names.add(node.value.id)
        elif isinstance(node, ast.Assign) and _calls_loads(node.value):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def _calls_loads(node: ast.AST) -> bool:
    """Whether an expression calls a function named loads (json.loads, orjson.loads, an imported loads)."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute):
        return node.func.attr == "loads"
    return isinstance(node.func, ast.Name) and node.func.id == "loads"


def _docstrings_and_fstring_parts(tree: ast.Module) -> set[int]:
    """The ids of the string constants that are docstrings or parts of f-strings, never read as literals."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
        elif isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in ast.walk(node))
    return skipped


def _string_value(node: ast.AST, module: _Module) -> str | None:
    """A literal string, or the literal a name is bound to."""
    if isinstance(node, ast.Name) and node.id in module.constants:
        node = module.constants[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _string_members(node: ast.AST, module: _Module) -> list[str] | None:
    """The strings of a literal tuple, list or set (or of the one a name is bound to); None for anything else."""
    if isinstance(node, ast.Name) and node.id in module.constants:
        node = module.constants[node.id]
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return None
    members = [_string_value(element, module) for element in node.elts]
    return [member for member in members if member is not None]


def _qualified(node: ast.AST, module: _Module) -> str | None:
    """The qualified name a call's function stands for: `re.search` for `re.search` or an imported `search`."""
    if isinstance(node, ast.Name):
        return module.imports.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module.imports:
        return f"{module.imports[node.value.id]}.{node.attr}"
    return None


def _regex_flags(node: ast.AST, module: _Module) -> int:
    """The value of a flags argument built from re's names (`re.I | re.M`); unknown parts count as none."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _regex_flags(node.left, module) | _regex_flags(node.right, module)
    name = _qualified(node, module) or ""
    module_name, _, flag = name.rpartition(".")
    flag_value = getattr(re.RegexFlag, flag, None) if module_name == "re" else None
    return int(flag_value) if isinstance(flag_value, re.RegexFlag) else 0


def _read_call(node: ast.Call, module: _Module, found: _Found) -> None:
    """Reads a call: a regex function's pattern, json.loads, a string method's argument, a dict's .get key."""
    name = _qualified(node.func, module) or ""
    module_name, _, function = name.rpartition(".")
    if module_name in ("re", "regex") and function in REGEX_CALLS and node.args:
        position = REGEX_CALLS[function]
        flags_node = node.args[position] if len(node.args) > position else None
        flags_node = next((word.value for word in node.keywords if word.arg == "flags"), flags_node)
        pattern = _string_value(node.args[0], module)
        if pattern is not None:
            _read_pattern(pattern, 0 if flags_node is None else _regex_flags(flags_node, module), module, found)
    if name == "json.loads":
        module.loads_json = True
    if not isinstance(node.func, ast.Attribute) or not node.args:
        return
    method = node.func.attr
    argument = _string_value(node.args[0], module)
    if method == "get" and _qualified(node.func.value, module) != "os.environ":
        _read_key(argument, module, found)
    elif method in SEARCH_METHODS and argument is not None:
        found.targets.append(argument)
    elif method in SEARCH_METHODS:
        found.targets += _string_members(node.args[0], module) or []  # str.startswith takes a tuple too
    template = _delimiter_template(argument) if method in DELIMITER_METHODS and argument is not None else None
    if template is not None:
        found.delimiters.append(template)


def _read_pattern(pattern: str, flags: int, module: _Module, found: _Found) -> None:
    """Reads a regex: its literal parts as strings, and its template when it captures the answer, else its simplest
    match as a string."""
    module.patterns.add(pattern)
    parsed = parse_pattern(pattern, flags)
    try:
        found.targets += [] if parsed is None else literal_runs(parsed)
    except RecursionError:
        pass  # a pattern nested too deep to walk gives no literal parts
    template = regex_template(pattern, flags)
    if template is not None and template.strip() != "{}":
        found.templates.append(template)
    elif template is None:
        example = regex_example(pattern, flags)
        if example:
            found.examples.append(example)


def _delimiter_template(delimiter: str) -> str | None:
    """The reply a delimiter makes (`Verdict:` gives `Verdict: {}`), or None for a blank, a lone punctuation mark,
    or a delimiter shorter than 2 or longer than 30 characters."""
    stripped = delimiter.strip()
    if not 2 <= len(delimiter) <= 30 or not stripped or "{}" in delimiter:
        return None
    if len(stripped) == 1 and stripped in string.punctuation:
        return None
    return delimiter + "{}" if delimiter[-1].isspace() else delimiter + " {}"


def _number(node: ast.AST) -> float | None:
    """A numeric literal's value (a negative one too); None for anything else, booleans included."""
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        node = node.operand
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return None
    if not isinstance(node.value, (int, float)):
        return None
    try:
        return sign * float(node.value)
    except OverflowError:
        return None


def _read_compare(node: ast.Compare, module: _Module, found: _Found) -> None:
    """Reads a comparison: the strings the reply is compared with or searched for, the numbers it is held to,
    the keys tested with `in`, and the collections of keys it is tested against."""
    operands = [node.left, *node.comparators]
    for index, operator in enumerate(node.ops):
        left, right = operands[index], operands[index + 1]
        if isinstance(operator, (ast.Is, ast.IsNot)):
            continue
        if not isinstance(operator, (ast.In, ast.NotIn)):
            found.numbers += [value for value in (_number(left), _number(right)) if value is not None]
            found.targets += [text for text in (_string_value(left, module), _string_value(right, module)) if text]
            continue
        needle = _string_value(left, module)
        if needle:
            found.targets.append(needle)
        found.targets += _string_members(right, module) or []  # each member of `verdict in ("yes", "no")`
        if needle is not None and isinstance(right, ast.Name) and right.id in module.dicts:
            found.keys.append(needle)
        if isinstance(right, ast.Name):
            _read_collection(right, module, found)


def _read_key(key: str | None, module: _Module, found: _Found) -> None:
    """Reads a key the code takes from parsed data (`data["amount"]`, `data.get("amount")`)."""
    if key is not None and _is_short(key):
        found.keys.append(key)
        module.read_keys.append(key)


def _read_collection(node: ast.AST, module: _Module, found: _Found) -> None:
    """Reads a collection of 2 to 12 identifier strings looped over or tested with `in`: the keys a reply needs."""
    members = _string_members(node, module)
    if members is None or not 2 <= len(members) <= 12 or not all(member.isidentifier() for member in members):
        return
    if members not in module.collections:
        module.collections.append(members)
        found.keys += members


def _tag_templates(texts: list[str]) -> list[str]:
    """`<tag>{}</tag>` for each tag whose opening and closing strings both appear as literals."""
    templates = []
    for text in texts:
        match = TAG.fullmatch(text)
        if match and not match.group(1) and f"</{match.group(2)}>" in texts:
            templates.append(f"<{match.group(2)}>{{}}</{match.group(2)}>")
    return templates


def _json_templates(module: _Module) -> list[str]:
    """JSON replies a json.loads module parses: `{"key": {}}` for each of the first 3 keys read, and one object
    per collection of required keys, the first key's value the slot and the others empty strings."""
    templates = ["{" + json.dumps(key) + ": {}}" for key in dict.fromkeys(module.read_keys)][:3]
    for collection in module.collections:
        fields = [json.dumps(key) + (": {}" if index == 0 else ': ""') for index, key in enumerate(collection)]
        templates.append("{" + ", ".join(fields) + "}")
    return [template for template in templates if template.count("{}") == 1]
