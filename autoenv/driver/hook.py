"""The PreToolUse hook the generated settings install: the second wall around the coding agent.

Claude Code runs `python -m autoenv.driver.hook --root ROOT` before every Edit, Write,
MultiEdit, NotebookEdit and Bash call, with the call as JSON on stdin
(`tool_name`, `tool_input`, `cwd`). Exit 2 blocks the call and shows stderr to the model;
exit 0 lets the permission rules decide. It applies autoenv.driver.rules again, so a
permission rule that matches more than it should (or a user setting that allows more)
still cannot open a protected file. Standard library plus autoenv.driver.rules only: it
runs once per tool call and must start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoenv.driver.rules import EDIT_TOOLS, forbidden_command, forbidden_path


def decide(call: dict, root: Path, python: str | None = None) -> str | None:
    """Why the tool call is refused, or None."""
    tool = call.get("tool_name")
    args = call.get("tool_input") or {}
    cwd = Path(call["cwd"]) if isinstance(call.get("cwd"), str) else root
    if tool in EDIT_TOOLS:
        path = args.get("file_path") or args.get("notebook_path")
        if not isinstance(path, str) or not path:
            return f"{tool} without a file path"
        return forbidden_path(path, root, cwd)
    if tool == "Bash":
        command = args.get("command")
        return forbidden_command(command, root, cwd, python) if isinstance(command, str) else "Bash without a command"
    if tool in ("WebFetch", "WebSearch"):
        return f"{tool}: no network tools under autoenv run"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autoenv.driver.hook")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--python", default=None)
    args = parser.parse_args(argv)
    try:
        call = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        print("autoenv hook: the tool call was not JSON; refused", file=sys.stderr)
        return 2
    why = decide(call if isinstance(call, dict) else {}, args.root, args.python)
    if why is None:
        return 0
    print(f"autoenv run refuses this: {why}. Under `autoenv run` you may edit only candidate/ and run the "
          "allowlisted commands (program.md, 'Under autoenv run').", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
