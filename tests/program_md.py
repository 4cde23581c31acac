"""The commands program.md tells the coding agent to run, read as a literal reader reads them.

A command is an inline code span (or a line of a ```bash block) whose first word is a program
(`bash`, `git`, `autoenv`, `.venv/bin/...`, `python`, ...). Placeholders are filled the way an
agent fills them: `<commit>` with a commit, `"<what ...>"` with a description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROGRAMS = ("bash", "git", "autoenv", ".venv/bin/autoenv", ".venv/bin/python", "python", "python3", "grep", "sed",
            "cat", "rm", "cp", "mv", "cd", "echo", "uv", "pip", "claude", "curl")
FENCED = re.compile(r"^```(?:bash|sh|shell|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
SECTION = re.compile(r"^(#+) (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Command:
    text: str
    """As program.md writes it."""
    section: str
    """The heading it stands under."""
    line: int

    def filled(self, commit: str = "0123456789ab") -> str:
        """With its placeholders filled in, ready to run."""
        text = re.sub(r"<(?:run base|commit|the commit[^>]*)>", commit, self.text)
        text = re.sub(r"<[^>]+>", "the change and what I expect", text)
        return text.replace("COMMIT", commit)


def commands(path: Path) -> list[Command]:
    """Every command program.md names, in order of appearance."""
    text = path.read_text(encoding="utf-8")
    heads = [(m.start(), m.group(2)) for m in SECTION.finditer(text)]
    found: list[tuple[int, str]] = []
    for block in FENCED.finditer(text):
        for offset, line in _lines(block.group(1), block.start(1)):
            if line.strip() and not line.lstrip().startswith("#"):
                found.append((offset, line.strip()))
    for span in INLINE.finditer(text):
        words = span.group(1).split()
        if words and words[0] in PROGRAMS and len(words) > 1:
            found.append((span.start(1), span.group(1).strip()))
    result = []
    for at, command in sorted(found):
        section = next((name for start, name in reversed(heads) if start <= at), "")
        result.append(Command(command, section, text.count("\n", 0, at) + 1))
    return result


def _lines(block: str, start: int):
    at = start
    for line in block.splitlines(keepends=True):
        yield at, line.rstrip("\n")
        at += len(line)


def loop(path: Path) -> list[Command]:
    """The commands of 'The loop', in order: what the literal reader runs."""
    return [c for c in commands(path) if c.section.startswith("The loop")]
