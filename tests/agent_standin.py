#!/usr/bin/env python3
"""A stand-in coding agent that behaves like Claude Code's print mode, for `autoenv run` tests.

Standard library only. It takes the real CLI's flags (`-p PROMPT`, `--session-id` or
`--resume`, `--output-format stream-json --verbose`, `--permission-mode`, `--tools`,
`--settings FILE`; an unknown option is an error), prints stream-json lines (a system init
with the session id, one assistant line with usage per tool call, a tool result, and a
final `result` with `total_cost_usd` and `session_id`) and exits. It does real work in its
cwd, launch by launch, from the JSON script named by $STANDIN_SCRIPT: a list with one list
of actions per launch (past the end, the last repeats):

- {"edit": "candidate/README.md", "append": "text"}: an Edit tool call;
- {"bash": "git add -A && git commit -qm x"}: a Bash tool call, run with bash in the cwd;
- {"stop": true}: end this launch now (a print-mode run that stops early);
- {"hang": true}: sleep until killed;
- {"fail": "Invalid API key · Please run /login"}: an is_error result, exit 1.

Before each Edit or Bash it runs the PreToolUse hooks of the settings file exactly as the
CLI does (the hook's command with the call as JSON on stdin; exit 2 blocks the call and
becomes a permission denial). Every launch's argv and outcome go to $STANDIN_LOG (jsonl).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

VALUED = {"-p", "--print", "--output-format", "--permission-mode", "--tools", "--settings", "--session-id",
          "--resume", "--model", "--allowedTools", "--disallowedTools", "--max-turns"}
SWITCHES = {"--verbose"}
COST = float(os.environ.get("STANDIN_COST", "0.05"))


def parse(argv: list[str]) -> dict:
    opts, i = {}, 0
    while i < len(argv):
        if argv[i] in SWITCHES:
            opts[argv[i]] = True
            i += 1
        elif argv[i] in VALUED and i + 1 < len(argv):
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            print(f"error: unknown option '{argv[i]}'", file=sys.stderr)
            sys.exit(1)
    return opts


def emit(event: dict) -> None:
    print(json.dumps(event), flush=True)


def run_hooks(settings: dict, tool: str, tool_input: dict) -> str | None:
    """The PreToolUse hooks' verdict: the refusal message, or None."""
    for group in (settings.get("hooks") or {}).get("PreToolUse", []):
        if not re.fullmatch(group.get("matcher") or ".*", tool):
            continue
        for hook in group.get("hooks", []):
            call = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "cwd": os.getcwd()}
            done = subprocess.run(hook["command"], shell=True, input=json.dumps(call), capture_output=True, text=True,
                                  timeout=hook.get("timeout", 60))
            if done.returncode == 2:
                return done.stderr.strip()
    return None


def main() -> int:
    opts = parse(sys.argv[1:])
    if "-p" not in opts or opts.get("--output-format") != "stream-json" or "--verbose" not in opts:
        print("error: this stand-in needs -p, --output-format stream-json and --verbose", file=sys.stderr)
        return 1
    session = opts.get("--resume") or opts.get("--session-id") or str(uuid.uuid4())
    settings = json.loads(Path(opts["--settings"]).read_text()) if "--settings" in opts else {}
    script = json.loads(Path(os.environ["STANDIN_SCRIPT"]).read_text())
    count_file = Path(os.environ["STANDIN_SCRIPT"] + ".count")
    launch = int(count_file.read_text()) if count_file.exists() else 0
    count_file.write_text(str(launch + 1))
    actions = script[min(launch, len(script) - 1)]
    record = {"launch": launch + 1, "argv": sys.argv[1:], "session": session, "pid": os.getpid(), "denials": [],
              "done": []}
    log = os.environ.get("STANDIN_LOG")

    def write_log() -> None:
        if log:
            with open(log, "a") as f:
                f.write(json.dumps(record) + "\n")

    emit({"type": "system", "subtype": "init", "session_id": session, "cwd": os.getcwd(),
          "permissionMode": opts.get("--permission-mode")})
    denials: list[dict] = []
    for n, action in enumerate(actions):
        if action.get("stop"):
            break
        if action.get("hang"):
            record["done"].append("hang")
            write_log()
            log = None
            time.sleep(3600)
        if "fail" in action:
            emit({"type": "result", "subtype": "success", "is_error": True, "result": action["fail"],
                  "session_id": session, "total_cost_usd": 0, "num_turns": 1, "usage": {}})
            record["done"].append("fail")
            write_log()
            return 1
        tool, tool_input = ("Edit", {"file_path": action["edit"], "old_string": "", "new_string": action["append"]}) \
            if "edit" in action else ("Bash", {"command": action["bash"]})
        tool_id = f"toolu_{launch}_{n}"
        emit({"type": "assistant", "session_id": session, "message": {
            "content": [{"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input}],
            "usage": {"input_tokens": 1000, "output_tokens": 100}}})
        refused = run_hooks(settings, tool, tool_input)
        if refused is not None:
            denials.append({"tool_name": tool, "tool_use_id": tool_id, "tool_input": tool_input})
            record["denials"].append({"tool": tool, "input": tool_input, "message": refused})
            output, is_error = refused, True
        elif tool == "Edit":
            with open(action["edit"], "a") as f:
                f.write(action["append"])
            output, is_error = "edited", False
        else:
            done = subprocess.run(["bash", "-c", action["bash"]], capture_output=True, text=True)
            output, is_error = (done.stdout + done.stderr)[-2000:], done.returncode != 0
        record["done"].append({"tool": tool, "refused": refused is not None, "error": is_error})
        emit({"type": "user", "session_id": session, "message": {"content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": is_error}]}})
    emit({"type": "result", "subtype": "success", "is_error": False, "result": "stand-in done",
          "session_id": session, "total_cost_usd": COST, "num_turns": len(actions) + 1,
          "usage": {"input_tokens": 1000 * len(actions), "output_tokens": 100 * len(actions)},
          "permission_denials": denials})
    write_log()
    return 0


if __name__ == "__main__":
    sys.exit(main())
