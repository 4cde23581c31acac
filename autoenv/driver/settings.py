"""The coding agent's own Claude Code settings, generated into the run's worktree (`.claude/settings.json`).

Permission rules are the first wall: in `dontAsk` mode everything not allowed is denied,
so the allow list is the whole of what the agent may do (read anything; edit and write
only under candidate/; Bash only the allowlist of autoenv.driver.rules), and deny rules
name every protected path, the results and the network tools, because deny wins over an
allow from any other settings file (a user's ~/.claude/settings.json included). Paths are
absolute (`//abs/path/**`), so no rule depends on how Claude Code resolves a relative one.
The PreToolUse hook is the second wall. `.claude/` is kept out of git (info/exclude), so
the file never makes the tree dirty.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autoenv.driver.rules import ALLOWED_COMMANDS, EDIT_TOOLS, FORBIDDEN, NETWORK_TOOLS, WRITABLE
from autoenv.gitrepo import Repo

SETTINGS = Path(".claude/settings.json")


def settings(root: Path, python: str = sys.executable) -> dict:
    """The settings for an agent working in `root`."""
    root = root.resolve()
    absolute = f"/{root.as_posix()}"  # `//abs/path`: an absolute path in a permission rule
    allow = ["Read", "Glob", "Grep", *(f"{tool}({absolute}/{WRITABLE}/**)" for tool in EDIT_TOOLS)]
    commands = [*ALLOWED_COMMANDS, f"{python} -m pytest candidate"]
    allow += [f"Bash({command}:*)" for command in commands]
    deny = ["WebFetch", "WebSearch", *(f"Bash({tool}:*)" for tool in NETWORK_TOOLS)]
    for pattern in FORBIDDEN:
        target = pattern[:-2] + "/**" if pattern.endswith("/*") else pattern
        deny += [f"{tool}({absolute}/{target})" for tool in EDIT_TOOLS]
    hook = f"{json.dumps(python)} -m autoenv.driver.hook --root {json.dumps(str(root))} --python {json.dumps(python)}"
    return {
        "permissions": {"defaultMode": "dontAsk", "allow": allow, "deny": deny},
        "hooks": {"PreToolUse": [{"matcher": "|".join((*EDIT_TOOLS, "Bash", "WebFetch", "WebSearch")),
                                  "hooks": [{"type": "command", "command": hook, "timeout": 30}]}]},
        "env": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
    }


def write_settings(repo: Repo, python: str = sys.executable) -> Path:
    """Write `.claude/settings.json` in the worktree and keep `.claude/` out of git; return the file."""
    path = repo.root / SETTINGS
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(settings(repo.root, python), indent=2) + "\n", encoding="utf-8")
    exclude = Path(repo.run_git("rev-parse", "--path-format=absolute", "--git-common-dir")) / "info" / "exclude"
    lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.is_file() else []
    if "/.claude/" not in lines:
        exclude.parent.mkdir(exist_ok=True)
        exclude.write_text("\n".join([*lines, "# the coding agent's settings, written by autoenv run", "/.claude/"])
                           + "\n", encoding="utf-8")
    return path
