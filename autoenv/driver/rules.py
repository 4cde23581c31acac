"""What the coding agent may do under `autoenv run`: the one list both walls are built from.

The generated settings (autoenv.driver.settings) turn it into Claude Code permission rules
(the first wall); the PreToolUse hook (autoenv.driver.hook) applies it again to every tool
call (the second wall); the run base's tamper check (autoenv.run.runbase) catches at evaluation
whatever slipped through both (the third).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from pathlib import Path

from autoenv.core.protected import PROTECTED

WRITABLE = "candidate"
"""The only folder the agent may write to."""
HARNESS_OWNED = ("outputs/*", "feedback/*", "feedback_log.jsonl", "feedback_log.jsonl.lock", ".autoenv/*",
                 ".claude/*", ".git/*", ".gitmodules", "verifiers/*")
"""Besides the protected files: results, the run base, the agent's own settings and git's internals."""
FORBIDDEN = (*PROTECTED, *HARNESS_OWNED)
EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
AGENT_COMMANDS: dict[str, str] = {
    "bash evaluate.sh": "the loop's step 3: evaluate the commit",
    "autoenv check": "the model-free checks (reward audit)",
    "autoenv probe": "the checks and probes before committing (step 2)",
    "autoenv show": "one evaluation, or one rollout as a transcript",
    "autoenv log": "the run so far",
    "autoenv compare": "two commits on the same tasks",
    "git add": "step 2: stage the candidate",
    "git commit": "step 2: commit it",
    "git revert": "a discard's revert, and the recovery after tampered",
    "git restore": "undo an uncommitted change outside candidate/ (a protected file's included) before evaluating",
    "git log": "find a commit (the run so far)",
    "git diff": "see what changed",
    "git status": "see what is uncommitted",
    "git show": "read a commit",
    ".venv/bin/python -m pytest candidate": "the candidate's own tests",
}
"""Every command the coding agent may run, with where program.md asks for it: the single source of the
driver's allowlist (both walls) and of program.md's 'What you may do' list (tests/test_program.py checks
that program.md recommends nothing outside it and mentions everything in it)."""
ALLOWED_COMMANDS = tuple(f"{prefix}{command}" for command in AGENT_COMMANDS
                         for prefix in (("", ".venv/bin/") if command.startswith("autoenv ") else ("",)))
"""Bash command prefixes the agent may run (each part of `a && b` separately)."""
PERSON_COMMANDS: dict[str, str] = {
    "bash setup.sh": "installs the venv and fills verifiers/ (network): done before the run",
    "autoenv new": "starts a run",
    "autoenv run": "the driver itself",
    "autoenv rebase-rules": "changing the rules is the person's decision",
    "autoenv verify": "run by every evaluation (--rebuild restores the ledger)",
}
"""Commands program.md names that are the person's, never the agent's (refused under autoenv run)."""
NETWORK_TOOLS = ("curl", "wget", "nc", "ncat", "ssh", "scp", "rsync", "ftp", "telnet", "socat")
SEPARATORS = re.compile(r"&&|\|\||;|\||\n")
RESTORE = "git restore"
"""May name a protected file: without --source it only brings a file back to its committed state (HEAD or
the index), which is how an uncommitted change to the rules is undone (autoenv.run.cleantree says so)."""


def forbidden_path(path: str | os.PathLike, root: Path, cwd: Path | None = None) -> str | None:
    """Why writing `path` is refused (the pattern it hits, or 'outside candidate/'), or None when it may be written."""
    given = Path(os.path.expanduser(str(path)))
    full = given if given.is_absolute() else (cwd or root) / given
    resolved = Path(os.path.realpath(full))
    root = Path(os.path.realpath(root))
    if not resolved.is_relative_to(root):
        return f"{resolved} is outside the run's worktree {root}"
    relative = resolved.relative_to(root).as_posix()
    hit = next((p for p in FORBIDDEN if fnmatch.fnmatchcase(relative, p) or relative == p.rstrip("/*")), None)
    if hit is not None:
        return f"{relative} is protected ({hit})"
    if not (relative + "/").startswith(WRITABLE + "/"):
        return f"{relative} is outside {WRITABLE}/, the only folder the agent may edit"
    return None


def forbidden_command(command: str, root: Path, cwd: Path | None = None, python: str | None = None) -> str | None:
    """Why the Bash `command` is refused, or None when every part of it is on the allowlist and touches no
    protected path."""
    if "`" in command or "$(" in command or "<(" in command or ">(" in command:
        return "command substitution is not allowed"
    allowed = ALLOWED_COMMANDS + ((f"{python} -m pytest candidate",) if python else ())
    for part in SEPARATORS.split(command):
        part = part.strip()
        if not part:
            continue
        try:
            words = shlex.split(part)
        except ValueError as e:
            return f"cannot parse {part!r}: {e}"
        if words and os.path.basename(words[0]) in NETWORK_TOOLS:
            return f"{words[0]}: no network tools"
        joined = " ".join(words)
        prefix = next((a for a in allowed if joined == a or joined.startswith(a + " ")), None)
        if prefix is None:
            return (f"{part!r} is not on the allowlist ({', '.join(ALLOWED_COMMANDS)})")
        rest = words[len(prefix.split()):]
        for word in rest:
            if word in ("2>&1", ">/dev/null", "2>/dev/null"):
                continue
            if word.startswith((">", "<")) or word.endswith((">", "<")):
                return f"redirection {word!r} is not allowed: run the command and read its output"
            for token in _paths_in(word):
                why = None if _restores(prefix, rest) else _protected_mention(token, root, cwd)
                if why:
                    return why
        if prefix.startswith("git ") and any(w in ("--no-verify", "--git-dir", "--work-tree") or w.startswith(
                ("--git-dir=", "--work-tree=", "-C")) for w in rest):
            return "git options that leave the worktree or skip its checks are not allowed"
    return None


def _restores(prefix: str, rest: list[str]) -> bool:
    """`git restore` back to the committed state: no --source (nor -s), which could bring any version."""
    source = [w for w in rest if w.startswith("--source") or w.startswith("-") and not w.startswith("--") and "s" in w]
    return prefix == RESTORE and not source


def _paths_in(word: str) -> list[str]:
    """The path-like pieces of a word (`--opt=path`, `a:b` for refs like `base:config.toml`)."""
    pieces = [word]
    for sep in ("=", ":"):
        pieces += [p for w in list(pieces) for p in w.split(sep)[1:]]
    return [p for p in pieces if p]


def _protected_mention(token: str, root: Path, cwd: Path | None) -> str | None:
    if token.startswith("-") and "/" not in token:
        return None
    given = Path(os.path.expanduser(token))
    full = given if given.is_absolute() else (cwd or root) / given
    resolved = Path(os.path.normpath(full))
    root_resolved = Path(os.path.normpath(root))
    if not resolved.is_relative_to(root_resolved):
        return None
    relative = resolved.relative_to(root_resolved).as_posix()
    hit = next((p for p in FORBIDDEN if fnmatch.fnmatchcase(relative, p) or relative == p.rstrip("/*")), None)
    return f"the command touches {relative}, which is protected ({hit})" if hit else None
