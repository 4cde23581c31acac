"""Every piece of advice the harness can print to the coding agent, read from the source, and the rules it must keep.

The agent may edit only candidate/ and run only the allowlist (autoenv.driver.rules, the list program.md
shows). A fix that tells it to edit or commit a protected file or setting, or to run a command it may
not run, sends it into a refusal or a `tampered` verdict. This module finds the advice texts in every
module an agent's command reaches (the import closure of `autoenv eval`, check/probe, the review
commands, the child process, the judges and the driver's hook and prompts): the `fix=` and `reason=` of
every call (AutoEnvError and its subclasses, Cause, Priority, Verdict), the what of every error, the
messages of display.warn/note and of gate findings (`report.add`), the defence and fix tables, and what
every function named `*_fix` returns. An f-string is read with each placeholder resolved where the
source says what it is (a module constant, a local built from literals, a function's returns, a
property), else as a hole `…`.

`problems(text)` is the check: a sentence that names a protected file or a config setting together
with an edit verb must say it is the person's job (or forbid it), and every command in the text must be
one the agent may run, unless the sentence gives it to the person.
"""

from __future__ import annotations

import ast
import fnmatch
import itertools
import re
import typing
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path

from autoenv.core import config as config_module
from autoenv.core.protected import PROTECTED
from autoenv.driver.rules import HARNESS_OWNED, forbidden_command

AUTOENV = Path(config_module.__file__).resolve().parent.parent
PROJECT = AUTOENV.parent
HOLE = "…"
ROOT = Path("/work/run")
ENTRIES = ("autoenv.evaluation.pipeline", "autoenv.evaluation.commands", "autoenv.review.cli", "autoenv.child.main",
           "autoenv.driver.hook", "autoenv.driver.prompts")
"""What the agent's commands run: `bash evaluate.sh` (autoenv eval), `autoenv check/probe` (evaluation.commands),
`autoenv show/log/compare` (review.cli), the child process beside the candidate, and the driver's two texts."""
LOADED_BY_NAME = ("autoenv.judge.",)
"""Modules no import reaches: the judges, which the registry picks by name."""
LIMIT = 48  # alternatives one expression may render to


@dataclass(frozen=True)
class Advice:
    text: str
    where: str
    """module:line and what the text is (fix, reason, warn, ...)."""
    location: str = ""
    """The error's `where`, when it is an error's fix: a fix for a protected file's error is the person's."""


# --- the modules an agent's command reaches ---------------------------------------------------

def module_name(path: Path) -> str:
    parts = path.relative_to(AUTOENV.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in AUTOENV.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module else []
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            while name.startswith("autoenv."):
                found.add(name)
                name = name.rpartition(".")[0]
    return found


def agent_modules() -> list[str]:
    seen: set[str] = set()
    todo = [*ENTRIES, *(m for m in MODULES if m.startswith(LOADED_BY_NAME))]
    while todo:
        name = todo.pop()
        if name in seen or name not in MODULES:
            continue
        seen.add(name)
        todo += _imports(MODULES[name])
    return sorted(seen)


# --- reading string expressions ------------------------------------------------------------------

class Reader:
    """Renders string expressions of the given modules to the texts they can produce."""

    def __init__(self, names: list[str]):
        self.trees = {name: ast.parse(MODULES[name].read_text()) for name in names}
        self.functions: dict[str, list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]] = {}
        self.constants: dict[str, dict[str, ast.expr]] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        for name, tree in self.trees.items():
            consts = self.constants.setdefault(name, {})
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    consts[node.targets[0].id] = node.value
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                    consts[node.target.id] = node.value
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    self.parents[child] = node
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.setdefault(node.name, []).append((name, node))
        for name, tree in self.trees.items():  # names imported from another module: that module's constants
            for node in tree.body:
                if isinstance(node, ast.ImportFrom) and node.module in self.constants:
                    for alias in node.names:
                        value = self.constants[node.module].get(alias.name)
                        if value is not None:
                            self.constants[name].setdefault(alias.asname or alias.name, value)

    def scope(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None

    def texts(self, node: ast.expr | None, module: str, depth: int = 0) -> list[str]:
        if node is None or depth > 6:
            return [HOLE]
        out = self._texts(node, module, depth)
        return list(dict.fromkeys(out))[:LIMIT] or [HOLE]

    def _texts(self, node: ast.expr, module: str, depth: int) -> list[str]:
        deeper = depth + 1
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else [HOLE]
        if isinstance(node, ast.JoinedStr):
            parts = [[v.value] if isinstance(v, ast.Constant) else
                     self.texts(v.value, module, deeper) if isinstance(v, ast.FormattedValue) else [HOLE]
                     for v in node.values]
            return self._product(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._product([self.texts(node.left, module, deeper), self.texts(node.right, module, deeper)])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self.texts(node.left, module, deeper)
        if isinstance(node, ast.IfExp):
            return self.texts(node.body, module, deeper) + self.texts(node.orelse, module, deeper)
        if isinstance(node, ast.BoolOp):
            return [t for v in node.values for t in self.texts(v, module, deeper)]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [t for v in node.elts if not isinstance(v, ast.Starred) for t in self.texts(v, module, deeper)]
        if isinstance(node, ast.Dict):
            return [t for v in node.values for t in self.texts(v, module, deeper)]
        if isinstance(node, ast.Lambda):
            return self.texts(node.body, module, deeper)
        if isinstance(node, ast.Subscript):  # problem[1]: that part of the tuples `problem` holds, else any part
            index = node.slice.value if isinstance(node.slice, ast.Constant) else None
            parts = self._elements(node.value, module, index, deeper) if isinstance(index, int) else []
            return [t for p, m in parts for t in self.texts(p, m, deeper)] or self.texts(node.value, module, deeper)
        if isinstance(node, ast.Name):
            return self._name(node, module, deeper)
        if isinstance(node, ast.Attribute):
            return self._returns(node.attr, deeper, properties=True)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "join" and node.args:
                return self.texts(node.args[0], module, deeper)
            if isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Constant, ast.JoinedStr)):
                return self.texts(func.value, module, deeper)  # "...".format(...), f"...".strip()
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in ("str", "repr"):
                return [HOLE]
            return self._returns(name, deeper) if name else [HOLE]
        return [HOLE]

    def _elements(self, node: ast.expr, module: str, index: int, depth: int) -> list[tuple[ast.expr, str]]:
        """Element `index` of each tuple `node` can be (a local, or what a function returns)."""
        if depth > 6:
            return []
        if isinstance(node, ast.Tuple):
            return [(node.elts[index], module)] if index < len(node.elts) else []
        if isinstance(node, ast.Name) and (scope := self.scope(node)) is not None:
            return [e for v in self._assigned(scope, node.id) for e in self._elements(v, module, index, depth + 1)]
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            return [e for m, fn in self.functions.get(name or "", []) for ret in ast.walk(fn)
                    if isinstance(ret, ast.Return) and ret.value is not None and self.scope(ret) is fn
                    for e in self._elements(ret.value, m, index, depth + 1)]
        return []

    def _product(self, parts: list[list[str]]) -> list[str]:
        combos = itertools.islice(itertools.product(*parts), LIMIT)
        return ["".join(c) for c in combos]

    def _name(self, node: ast.Name, module: str, depth: int) -> list[str]:
        scope = self.scope(node)
        if scope is not None:
            values = self._assigned(scope, node.id)
            if values:
                return [t for v in values for t in self.texts(v, module, depth)]
            if node.id in {a.arg for a in (*scope.args.args, *scope.args.kwonlyargs)}:
                return [HOLE]
        value = self.constants.get(module, {}).get(node.id)
        return self.texts(value, module, depth) if value is not None else [HOLE]

    @staticmethod
    def _assigned(scope: ast.AST, name: str) -> list[ast.expr]:
        """What a local is built from: its assignments and whatever is appended to it."""
        values: list[ast.expr] = []
        for node in ast.walk(scope):
            target = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) else []
            if any(isinstance(t, ast.Name) and t.id == name for t in target) and getattr(node, "value", None):
                values.append(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "insert", "extend") and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == name and node.args:
                values.append(node.args[-1])
        return values

    def _returns(self, name: str, depth: int, properties: bool = False) -> list[str]:
        found = []
        for module, fn in self.functions.get(name, []):
            if properties and not any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Return) and node.value is not None and self.scope(node) is fn:
                    found += self.texts(node.value, module, depth)
        return found or [HOLE]


# --- where advice is given -------------------------------------------------------------------------

def error_types(trees: dict[str, ast.Module]) -> set[str]:
    """AutoEnvError and every class derived from it."""
    names = {"AutoEnvError"}
    classes = [n for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    while True:
        more = {c.name for c in classes if c.name not in names
                and any(isinstance(b, ast.Name) and b.id in names for b in c.bases)}
        if not more:
            return names
        names |= more


def collect() -> list[Advice]:
    names = agent_modules()
    reader = Reader(names)
    errors = error_types(reader.trees)
    found: list[Advice] = []

    def add(kind: str, module: str, node: ast.expr, location: ast.expr | None = None) -> None:
        where = f"{MODULES[module].relative_to(AUTOENV.parent)}:{node.lineno} ({kind})"
        places = reader.texts(location, module) if location is not None else [""]
        for text in reader.texts(node, module):
            for place in places:
                found.append(Advice(text, where, place))

    for module, tree in reader.trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                keywords = {k.arg: k.value for k in node.keywords if k.arg}
                if name in errors and node.args:
                    add("error", module, node.args[0])
                if "fix" in keywords:
                    add("fix", module, keywords["fix"], keywords.get("where"))
                if "reason" in keywords:
                    add("reason", module, keywords["reason"])
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    if func.value.id == "display" and func.attr in ("warn", "note") and node.args:
                        add(func.attr, module, node.args[0])
                    if func.value.id == "report" and func.attr == "add" and len(node.args) >= 3:
                        add("gate finding", module, node.args[2])
                    if func.attr == "update" and re.search("DEFENCE|FIX", func.value.id) and node.args:
                        add("table", module, node.args[0])
                if name == "print" and module.startswith("autoenv.driver.") and node.args:
                    add("print", module, node.args[0])
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and reader.scope(node) is None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if node.value is not None and any(isinstance(t, ast.Name) and re.search("DEFENCE|FIX", t.id)
                                                  for t in targets):
                    add("table", module, node.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    node.name.endswith("fix") or module == "autoenv.driver.prompts"):
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return) and ret.value is not None and reader.scope(ret) is node:
                        add(f"{node.name} returns", module, ret.value)
    return found


# --- what advice may say ---------------------------------------------------------------------------

def _file_pattern(pattern: str) -> str:
    """A protected path as text names it. A folder (`autoenv/*`) is named bare, with an entry of its own or a
    .py path, so a branch `autoenv/<tag>` is not the package."""
    if pattern.endswith("/*"):
        folder = pattern[:-2]
        entries = sorted({p.name.removesuffix(".py") for p in (PROJECT / folder).iterdir()} - {"__pycache__"}) \
            if (PROJECT / folder).is_dir() else []
        inside = "|".join(re.escape(e) for e in entries) or "(?!)"
        return rf"(?<![\w./-]){re.escape(folder)}/(?:(?:{inside})\b|[\w/.-]*\.py\b|(?=[\s,;:)`'\"]|$))"
    return rf"(?<![\w/.-])(?<!\ba )(?<!its )(?<!own ){re.escape(pattern)}(?![\w/-])"  # not "a pyproject.toml"


PROTECTED_NAMES = re.compile("|".join(_file_pattern(p) for p in (*PROTECTED, *HARNESS_OWNED)
                                      if not p.startswith((".claude", ".git/", "verifiers"))))
"""The protected files and the harness's own (run base, results) as advice names them."""


def _settings() -> re.Pattern[str]:
    tables: dict[str, list[str]] = {}
    hints = typing.get_type_hints(config_module.Config)
    for f in fields(config_module.Config):
        if is_dataclass(hints.get(f.name)):
            tables[f.name] = [g.name for g in fields(hints[f.name])]
    keys = sorted({k for ks in tables.values() for k in ks}, key=len, reverse=True)
    dotted = "|".join(rf"{t}\.(?:{'|'.join(ks)})" for t, ks in tables.items() if ks)
    bracketed = rf"\[(?:{'|'.join(tables)}|{HOLE})\](?: (?:{'|'.join(keys)})\b)?"
    return re.compile(rf"(?<![\w.])(?:{dotted})\b|{bracketed}")


SETTINGS = _settings()
"""A config.toml setting as advice names it: `budget.examples`, `[target] model`, `[judge]`."""
EDITS = re.compile(r"\b(edit|edits|set|sets|raise|raises|lower|increase|decrease|change|changes|commit|commits|add|"
                   r"adds|point|fix|adjust|export|check|move|restore|write|tune|update|rename|replace)\b", re.IGNORECASE)
REFERENCE = re.compile(r"\($")
READS = re.compile(r"\b(read|reads|see|run|runs|in|names|lists)\b", re.IGNORECASE)
"""A name cited (`(program.md, ...)`) or governed by a reading verb (`read program.md and spec.md`, `see ...`,
`run evaluate.sh`) is read or run, not changed."""
STATEMENT = re.compile(r"\b(?:can|could|would|might)\s+$", re.IGNORECASE)
"""`its code can write config.toml` says what may happen; it asks for nothing."""
UNDO = re.compile(r"`?git (restore|revert)\b[^`;]*`?")
"""Undoing a change to a protected file is what the agent may do (`git restore`, `git revert`)."""
GIVEN_AWAY = re.compile(r"\bperson\b|\bperson's\b|\bnever\b|\bnot yours\b|\bdo not\b|\bdon't\b|\bmay not\b|"
                        r"\bmust not\b|\bprotected\b|\btampered\b", re.IGNORECASE)
"""A sentence that gives a change to the person, or forbids it."""
PERSON = re.compile(r"\bperson('s)?\b", re.IGNORECASE)
PROGRAM = (r"(?:\.venv/bin/)?autoenv [a-z][\w-]*|bash [\w./-]+\.sh|"
           r"git (?:add|commit|revert|restore|checkout|stash|reset|clean|rm|mv|log|diff|status|show|notes|init|branch|"
           r"switch|worktree|push|pull|fetch|rebase|cherry-pick|update-ref)|(?:\.venv/bin/)?python3? -[mc]|"
           r"pip install|uv (?:pip|run|sync|venv)|mv|rm|cp|export [A-Z_]+=|curl|wget|sed|echo|cat")
COMMAND = re.compile(rf"`(?P<code>(?P<coded>{PROGRAM})\b[^`]*)`|"
                     rf"(?<![\w/.`$-])(?P<bare>(?P<program>{PROGRAM})(?:\b|(?<==))[^;,()`\n]*)")
ADVISED_AFTER = re.compile(r"(?:^|[:(]|\b(?:run|with|use|try|e\.g\.|then|or|and|first|again)) *$", re.IGNORECASE)
"""A bare command is advised where an instruction puts it: first, after a colon or paren, after run/with/or ..."""
MENTIONED_AFTER = re.compile(r"\b(?:by|under|another|of|from|the|when|while|that) *$", re.IGNORECASE)
SUBJECT = re.compile(r"^`?(?::|\s+(?:\(PID|relaunched|ended|refuses|drives|has|allows|launched|stopped|keeps|is|"
                     r"was|says|will|runs|made|found|wrote)\b)")
"""A command named, not advised: `launched by autoenv run`, `autoenv run ended your launch`."""


def sentences(text: str) -> list[str]:
    """A text cut where one instruction ends and the next begins (`;`, `. `, a line), never inside a code span."""
    out, current, code = [], "", False
    for i, ch in enumerate(text):
        if ch == "`":
            code = not code
        if not code and (ch in ";\n" or ch == "." and text[i + 1:i + 2] in (" ", "")):
            out.append(current)
            current = ""
            continue
        current += ch
    return [s.strip() for s in [*out, current] if s.strip()]


def commands(sentence: str) -> list[tuple[str, re.Match[str]]]:
    """The commands a sentence tells someone to run, as written (a bare one runs to the next `,`, `;` or paren,
    or to a word that ends it), with where it stands; a command the sentence only names is left out."""
    found = []
    for m in COMMAND.finditer(sentence):
        bare = m.group("bare")
        before, after = sentence[:m.start()], sentence[m.end("program" if bare else "coded"):]
        if MENTIONED_AFTER.search(before) or SUBJECT.match(after) or bare and not ADVISED_AFTER.search(before):
            continue
        command = (m.group("code") or bare).strip()
        if bare:
            command = re.split(r" (?:or|then|and|to|in|first|again|with|once|before|after|on|from)\b(?! -)",
                               command)[0]
        found.append((command.rstrip(" .:"), m))
    return found


def filled(command: str) -> str:
    """A command with its placeholders filled the way an agent fills them."""
    command = re.sub(r"<(?:run base|commit|the commit[^>]*)[^>]*>", "0123456789ab", command)
    command = re.sub(r"<[^>]+>", "x", command)
    return command.replace(HOLE, "x").replace("COMMIT", "0123456789ab")


def clauses(sentence: str) -> list[str]:
    """A sentence's alternatives and asides: cut at `, or`, ` or `, `(`, `)` and `: `."""
    return [c for c in re.split(r",? or |[()]|: ", sentence) if c.strip()]


def read(before: str) -> bool:
    """Whether a name after `before` is cited or read: right after a paren, or a reading verb governs it."""
    verbs = [*EDITS.finditer(before), *READS.finditer(before)]
    last = max(verbs, key=lambda v: v.start(), default=None)
    return bool(REFERENCE.search(before)) or last is not None and READS.fullmatch(last.group(0)) is not None


def changed_names(sentence: str) -> list[tuple[str, str]]:
    """(verb, name) when the sentence names a protected file or setting (outside a command, not cited as a
    reference) and one of its clauses asks for a change without forbidding it or giving it to the person."""
    text = COMMAND.sub(lambda m: " " * len(m.group(0)), UNDO.sub(lambda m: " " * len(m.group(0)), sentence))
    names = [m for m in (*PROTECTED_NAMES.finditer(text), *SETTINGS.finditer(text)) if not read(text[:m.start()])]
    verbs = [v for c in clauses(text) if not GIVEN_AWAY.search(c) for v in EDITS.finditer(c)
             if not STATEMENT.search(c[:v.start()])]
    return [(verbs[0].group(0), names[0].group(0))] if names and verbs else []


FILES = {p.rpartition("/")[2] for p in (*PROTECTED, *HARNESS_OWNED) if "*" not in p} | {"run.toml"}


def located(location: str) -> bool:
    """Whether an error's `where` is a protected file (by its name, in any folder) or a config setting."""
    return bool(FILES & set(re.split(r"[\s:/()\[\],]+", location))) or SETTINGS.search(location) is not None


def problems(advice: Advice) -> list[str]:
    """What in `advice` the agent could not carry out, each with the sentence that says it."""
    found = []
    text = advice.text
    if advice.location and located(advice.location) \
            and EDITS.search(UNDO.sub("", text)) and not GIVEN_AWAY.search(text):
        found.append(f"the error is in {advice.location!r}, which the agent may not change, yet its fix {text!r} "
                     "does not give it to the person")
    for sentence in sentences(text):
        for verb, name in changed_names(sentence):
            if not PERSON.search(sentence):
                found.append(f"{sentence!r} asks to {verb} {name!r}, which the agent may not change "
                             "(say it is the person's)")
        for command, _ in commands(sentence):
            why = forbidden_command(filled(command), ROOT)
            if why is not None and not PERSON.search(sentence):
                found.append(f"{sentence!r} advises `{command}`, which the agent may not run ({why[:120]}); "
                             "say it is the person's, or advise an allowed command")
    return found


def protected(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in PROTECTED)
