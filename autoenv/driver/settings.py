"""The coding agent's own Claude Code settings, generated into the run's worktree (`.autoenv/agent-settings.json`).

Permission rules are the first wall: in `dontAsk` mode everything not allowed is denied,
so the allow list is the whole of what the agent may do (read anything; edit and write
only under candidate/; Bash only the allowlist of autoenv.driver.rules), and deny rules
name every protected path, the results and the network tools, because deny wins over an
allow from any other settings file (a user's ~/.claude/settings.json included). Paths are
absolute (`//abs/path/**`), so no rule depends on how Claude Code resolves a relative one.
The PreToolUse hook is the second wall.

The file is passed with `--settings`, not left in `.claude/settings.json`: measured with
Claude Code 2.1.197 in print mode, a project's `.claude/settings.json` in a workspace
nobody accepted the trust dialog for has its allow rules ignored ("this workspace has not
been trusted"), while `--settings` rules apply. It lives under `.autoenv/` (ignored by git,
protected from the agent), so it never makes the tree dirty. The CLI warns about a rule
naming a tool it does not know (MultiEdit is gone in 2.x): only real tools are named.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autoenv.driver.rules import ALLOWED_COMMANDS, EDIT_TOOLS, FORBIDDEN, NETWORK_TOOLS, WRITABLE
from autoenv.run.gitrepo import Repo

SETTINGS = Path(".autoenv/agent-settings.json")
RULE_TOOLS = ("Edit", "Write", "NotebookEdit")
"""Claude Code 2.x's file-writing tools (the hook also knows older names)."""


def settings(root: Path, python: str = sys.executable) -> dict:
    """The settings for an agent working in `root`."""
    root = root.resolve()
    absolute = f"/{root.as_posix()}"  # `//abs/path`: an absolute path in a permission rule
    allow = ["Read", "Glob", "Grep", *(f"{tool}({absolute}/{WRITABLE}/**)" for tool in RULE_TOOLS)]
    commands = [*ALLOWED_COMMANDS, f"{python} -m pytest candidate"]
    allow += [f"Bash({command}:*)" for command in commands]
    deny = ["WebFetch", "WebSearch", *(f"Bash({tool}:*)" for tool in NETWORK_TOOLS)]
    for pattern in FORBIDDEN:
        target = pattern[:-2] + "/**" if pattern.endswith("/*") else pattern
        deny += [f"{tool}({absolute}/{target})" for tool in RULE_TOOLS]
    hook = f"{json.dumps(python)} -m autoenv.driver.hook --root {json.dumps(str(root))} --python {json.dumps(python)}"
    return {
        "permissions": {"defaultMode": "dontAsk", "allow": allow, "deny": deny},
        "hooks": {"PreToolUse": [{"matcher": "|".join((*EDIT_TOOLS, "Bash", "WebFetch", "WebSearch")),
                                  "hooks": [{"type": "command", "command": hook, "timeout": 30}]}]},
        "env": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
    }


def write_settings(repo: Repo, python: str = sys.executable) -> Path:
    """Write the settings file in the worktree, kept out of git; return it."""
    path = repo.root / SETTINGS
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(settings(repo.root, python), indent=2) + "\n", encoding="utf-8")
    if SETTINGS.as_posix() in repo.dirty_paths():  # a run whose .gitignore does not cover .autoenv/
        exclude = Path(repo.run_git("rev-parse", "--path-format=absolute", "--git-common-dir")) / "info" / "exclude"
        lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.is_file() else []
        exclude.parent.mkdir(exist_ok=True)
        exclude.write_text("\n".join([*lines, "# the coding agent's settings, written by autoenv run",
                                       f"/{SETTINGS.as_posix()}"]) + "\n", encoding="utf-8")
    return path
