"""README.md is a front page and docs/ holds the rest: every page reachable, every link and anchor there, the
config reference exactly what autoenv.core.configdoc writes from the config model, and every command the pages
show read as a literal reader reads it (tests/program_md.py's reading of program.md, applied to every page):
an `autoenv` command names real subcommands and options, and one in a ```bash block parses as written; a
`bash X.sh`, `python FILE` or `python -m MODULE` names a file or module that exists and flags it takes.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
from pathlib import Path

import pytest
from program_md import INLINE, PROGRAMS

from autoenv.cli import build_parser
from autoenv.core import configdoc
from autoenv.core.paths import PROJECT

README = PROJECT / "README.md"
PAGES = sorted((PROJECT / "docs").glob("*.md"))
# ```bash blocks, indented ones too (a block inside a numbered step): each line is a command to run as written
FENCED = re.compile(r"^([ \t]*)```(?:bash|sh|shell|console)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
SYNOPSIS = re.compile(r"[\[\]|<>]|\.\.\.|\b[A-Z]{2,}\b|\b[AB]\b")  # [--opt], A|B, <tag>, COMMIT, A B: a usage line


def shown_commands(page: Path) -> list[tuple[str, bool]]:
    """(command, runnable) for each command the page shows: a ```bash line (runnable) or an inline code span whose
    first word is a program (tests/program_md.py's reading; runnable unless it is a usage line)."""
    text = page.read_text()
    found = []
    for block in FENCED.finditer(text):
        for line in block.group(2).splitlines():
            line = re.sub(r"\s+#\s.*$", "", line.strip())
            if line and not line.startswith("#"):
                found.append((line, True))
    for span in INLINE.finditer(FENCED.sub("", text)):
        words = span.group(1).split()
        if words and words[0] in PROGRAMS and len(words) > 1:
            found.append((span.group(1).strip(), False))
    return found


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: p for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, p in action.choices.items()}


def autoenv_problem(words: list[str], runnable: bool) -> str | None:
    """What is wrong with `autoenv WORDS` as the CLI reads it, or None."""
    parser, path = build_parser(), []
    while words and words[0].rstrip(":") in subparsers(parser):
        path.append(words[0].rstrip(":"))
        parser = subparsers(parser)[path[-1]]
        words = words[1:]
    if not path:
        return f"no subcommand {words[:1]}"
    options = set(parser._option_string_actions)
    for word in words:
        for flag in re.findall(r"(?:^|[\[|])(--?[a-z][a-z0-9-]*)", word):
            if flag not in options:
                return f"`autoenv {' '.join(path)}` has no option {flag}"
    if runnable and not SYNOPSIS.search(" ".join(words)):
        try:
            build_parser().parse_args([*path, *words])
        except SystemExit:
            return "does not parse"
    return None


def command_problem(command: str, runnable: bool) -> str | None:
    for part in command.split("&&"):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        if not words or words[0] == "cd":
            continue
        program, args = words[0], words[1:]
        if program == "autoenv" or program.endswith("/bin/autoenv"):
            problem = autoenv_problem(args, runnable)
        elif program == "bash" and args and args[0].endswith(".sh") or args and args[0] == ".ci/run":
            script = PROJECT / args[0]
            problem = None if script.is_file() else f"no file {args[0]}"
            source = script.read_text() if script.is_file() else ""
            if args[0] == "evaluate.sh":  # it passes its arguments to `autoenv eval`
                problem = problem or autoenv_problem(["eval", *args[1:]], runnable=False)
            else:
                problem = problem or next((f"{args[0]} takes no {f}" for f in args[1:]
                                           if f.startswith("--") and f not in source), None)
        elif program.endswith("python") or program in ("python", "python3"):
            if args[:1] == ["-m"]:
                problem = None if importlib.util.find_spec(args[1]) else f"no module {args[1]}"
            elif args and args[0].endswith(".py"):
                script = PROJECT / args[0]
                flags = re.findall(r"--[a-z][a-z0-9-]*", " ".join(args[1:]))
                problem = (f"no file {args[0]}" if not script.is_file() else
                           next((f"{args[0]} takes no {f}" for f in flags if f not in script.read_text()), None))
            else:
                problem = None
        else:
            problem = None  # git, uv, npm, curl: not ours to check
        if problem:
            return problem
    return None


def test_readme_is_a_front_page_that_reaches_every_page():
    text = README.read_text()
    assert len(text.splitlines()) < 300
    linked = {(README.parent / target.split("#")[0]).resolve() for target in LINK.findall(text)}
    assert PAGES and [p.name for p in PAGES if p.resolve() not in linked] == []
    for command in ("bash setup.sh --with-model --with-docker", ".venv/bin/python -m pytest"):  # what .ci/run runs
        assert re.search(rf"(?m)^{re.escape(command)}(\s|$)", text), command
        assert command in (PROJECT / ".ci" / "run").read_text()


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"(?m)^#+ (.*)$", page.read_text())}


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_link_and_anchor_exists(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(target)
    assert broken == []


def test_the_config_reference_is_what_the_config_model_writes():
    assert (PROJECT / "docs" / "config.md").read_text() == configdoc.render(), \
        "docs/config.md is out of date: run .venv/bin/python -m autoenv.core.configdoc"
    assert configdoc.main(["--check"]) == 0


def test_a_config_key_without_a_docstring_cannot_be_documented(monkeypatch):
    docs = configdoc.field_docs()
    assert docs["Budget"]["examples"] and docs["Limits"]["memory_mb"]
    monkeypatch.setattr(configdoc, "field_docs", lambda: {**docs, "Budget": {}})
    with pytest.raises(SystemExit, match="Budget.examples has no docstring"):
        configdoc.render()


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_command_a_page_shows_runs_as_written(page):
    commands = shown_commands(page)
    assert commands or page.name in ("endpoint.md",)
    assert [(command, problem) for command, runnable in commands
            if (problem := command_problem(command, runnable))] == []


def test_the_reading_catches_a_command_that_no_longer_runs():
    assert command_problem(".venv/bin/autoenv eval --ofline", True) == "`autoenv eval` has no option --ofline"
    assert command_problem("autoenv lgo --tag x", False) == "no subcommand ['lgo']"
    assert command_problem(".venv/bin/autoenv new", True) == "does not parse"  # the tag is missing
    assert command_problem("bash setup.sh --with-gpu", True) == "setup.sh takes no --with-gpu"
    assert command_problem(".venv/bin/python bench/nope.py", True) == "no file bench/nope.py"
    assert command_problem(".venv/bin/python -m autoenv.core.nope", True) == "no module autoenv.core.nope"
    assert command_problem("autoenv model serve [--model smollm2] [--gguf PATH]", False) is None
