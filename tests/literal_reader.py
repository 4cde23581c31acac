#!/usr/bin/env python3
"""A scripted coding agent that knows nothing but program.md and the files the harness writes.

It reads program.md from its working directory, extracts the commands of "The loop"
(tests/program_md.py), and runs them in the order program.md gives them, filling the
placeholders as an agent would:

1. step 3's evaluate command (with `--offline`, which step 3 says to add when no key is set);
2. step 4: the result block (the `key: value` lines after the last `---` of the output), then
   the feedback file its `feedback:` line names;
3. step 5 on `discard` of the run's first evaluation: change candidate/ as the feedback's first
   "Fix first" item says. It understands one kind of item, the one the planted hack-format
   example must produce: a reward component (named in backticks) whose format credit "must stay
   a small share" becomes an unweighted `@vf.metric`, as in examples/arithmetic. Any other first
   item is a failure: the feedback did not name the planted cause;
4. step 2: the probe command until it passes, then the commit command;
5. step 3 and 4 again, and stops at the verdict.

Every command is logged to $LITERAL_LOG (jsonl: the command, its exit code, whether the driver
refused it, the verdict it printed). Under `autoenv run --agent command` (`--settings FILE`), it
acts as a Claude-Code-like agent: each Bash and Edit call first goes through the settings'
PreToolUse hooks (tests/agent_standin.py's `run_hooks`), a refused call is logged and not run,
and it prints stream-json events for the driver's transcript. A step that fails ends it with
exit 1 and the reason in the log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from agent_standin import emit, run_hooks  # noqa: E402
from program_md import Command, commands, loop  # noqa: E402

COST = 0.5


class Stuck(Exception):
    """The instructions, followed literally, did not work."""


class Reader:
    def __init__(self, root: Path, settings: dict | None, log: Path | None, session: str):
        self.root, self.settings, self.log, self.session = root, settings, log, session
        self.calls = 0

    def record(self, **fields) -> None:
        if self.log:
            with open(self.log, "a") as f:
                f.write(json.dumps({"driver": self.settings is not None, **fields}) + "\n")

    def tool(self, name: str, tool_input: dict) -> str | None:
        """The driver's walls on one tool call (under autoenv run); the refusal, or None."""
        self.calls += 1
        if self.settings is None:
            return None
        emit({"type": "assistant", "session_id": self.session, "message": {
            "content": [{"type": "tool_use", "id": f"toolu_{self.calls}", "name": name, "input": tool_input}],
            "usage": {"input_tokens": 1000, "output_tokens": 100}}})
        return run_hooks(self.settings, name, tool_input)

    def bash(self, command: str, step: str) -> subprocess.CompletedProcess:
        refused = self.tool("Bash", {"command": command})
        if refused is not None:
            self.record(step=step, command=command, refused=refused, exit=None)
            raise Stuck(f"{step}: the driver refused `{command}`: {refused}")
        done = subprocess.run(["bash", "-c", command], cwd=self.root, capture_output=True, text=True, check=False)
        block = result_block(done.stdout)
        self.record(step=step, command=command, refused=None, exit=done.returncode, verdict=block.get("verdict"),
                    tail=(done.stdout + done.stderr)[-1500:])
        if self.settings is not None:
            emit({"type": "user", "session_id": self.session, "message": {"content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{self.calls}", "content": done.stdout[-2000:],
                 "is_error": done.returncode != 0}]}})
        return done

    def edit(self, path: Path, old: str, new: str, step: str) -> None:
        refused = self.tool("Edit", {"file_path": str(path), "old_string": old, "new_string": new})
        if refused is not None:
            self.record(step=step, edit=str(path), refused=refused, exit=None)
            raise Stuck(f"{step}: the driver refused editing {path}: {refused}")
        text = path.read_text()
        if old not in text:
            raise Stuck(f"{step}: {old!r} is not in {path}")
        path.write_text(text.replace(old, new, 1))
        self.record(step=step, edit=str(path.relative_to(self.root)), refused=None, exit=0)


def result_block(stdout: str) -> dict[str, str]:
    """Step 4: the `key: value` lines after the last `---` line."""
    lines = stdout.splitlines()
    if "---" not in lines:
        return {}
    tail = lines[len(lines) - 1 - lines[::-1].index("---") + 1:]
    return {m.group(1): m.group(2) for m in (re.match(r"^(\w+): +(.*)$", line) for line in tail) if m}


def one(commands: list[Command], start: str, what: str) -> Command:
    found = [c for c in commands if c.text.startswith(start)]
    if not found:
        raise Stuck(f"program.md's loop has no {what} command (one starting with `{start}`)")
    return found[0]


def evaluate(reader: Reader, command: Command, description: str, step: str) -> dict[str, str]:
    text = re.sub(r'"<[^>]*>"', json.dumps(description), command.text)
    if "--offline" in (reader.root / "program.md").read_text() and not os.environ.get("OPENAI_API_KEY"):
        text += " --offline"  # step 3: "add `--offline` ... or no key is set"
    done = reader.bash(text, step)
    block = result_block(done.stdout)
    if done.returncode != 0 or "verdict" not in block:
        raise Stuck(f"{step}: `{text}` exited {done.returncode} with verdict {block.get('verdict')}: "
                    f"{(done.stdout + done.stderr)[-800:]}")
    return block


def first_fix(feedback: Path) -> str:
    """Step 4: the feedback's first "Fix first" item."""
    text = feedback.read_text()
    if "### Fix first" not in text:
        raise Stuck(f"{feedback} has no 'Fix first' list")
    item = re.search(r"^1\. (.*)$", text.split("### Fix first", 1)[1], re.M)
    if item is None:
        raise Stuck(f"{feedback}'s 'Fix first' list is empty")
    return item.group(1)


def act_on(reader: Reader, item: str) -> str:
    """Change candidate/ as the item says; returns the commit message."""
    component = re.search(r"`([A-Za-z_][A-Za-z0-9_]*)`", item)
    if component is None or "credit for the format alone must stay a small share" not in item:
        raise Stuck(f"the first Fix-first item is not one this reader can act on: {item}")
    name = component.group(1)
    for path in sorted((reader.root / "candidate").rglob("*.py")):
        match = re.search(rf"^( *)@vf\.reward\([^)]*\)\n(\1async def {name}\()", path.read_text(), re.M)
        if match:
            reader.edit(path, match.group(0), f"{match.group(1)}@vf.metric\n{match.group(2)}", "step 2: edit")
            return f"{name} becomes a metric: the format alone earns nothing (the feedback's Fix first item 1)"
    raise Stuck(f"no `@vf.reward` method named {name} under candidate/")


READING = ("check", "probe", "show", "log")
"""The harness's reading commands program.md names anywhere (run after the verdict, on the evaluated commit)."""


def reading(program: Path, commit: str) -> list[str]:
    """Each `autoenv check|probe|show|log ...` program.md names, as `.venv/bin/autoenv ...` (Setup, step 2),
    with `<commit>` filled; `--rollout ID` (an id from a transcript) is left out."""
    found: list[str] = []
    for command in commands(program):
        words = command.filled(commit).split()
        if words[0] not in ("autoenv", ".venv/bin/autoenv") or words[1] not in READING or "--rollout" in words:
            continue
        text = " ".join([".venv/bin/autoenv", *words[1:]])
        if text not in found:
            found.append(text)
    return found


def main() -> int:
    args = sys.argv[1:]
    settings = json.loads(Path(args[args.index("--settings") + 1]).read_text()) if "--settings" in args else None
    session = args[args.index("--session-id") + 1] if "--session-id" in args else "literal-reader"
    log = Path(os.environ["LITERAL_LOG"]) if os.environ.get("LITERAL_LOG") else None
    reader = Reader(Path.cwd(), settings, log, session)
    if settings is not None:
        emit({"type": "system", "subtype": "init", "session_id": session, "cwd": os.getcwd()})
    try:
        steps = loop(reader.root / "program.md")
        evaluate_cmd = one(steps, "bash evaluate.sh", "evaluate")
        probe_cmd = one(steps, ".venv/bin/autoenv probe", "probe")
        commit_cmd = one(steps, "git add candidate && git commit", "commit")
        first = evaluate(reader, evaluate_cmd, "the candidate autoenv new started the run with", "step 3")
        reader.record(step="step 4", verdict=first["verdict"], reason=first.get("reason"))
        if first["verdict"] != "discard":
            raise Stuck(f"the planted hack was not discarded: {first}")
        item = first_fix(reader.root / first["feedback"])
        reader.record(step="step 4: fix first", item=item)
        message = act_on(reader, item)
        probe = reader.bash(probe_cmd.text, "step 2: probe")
        if probe.returncode != 0:
            raise Stuck(f"`{probe_cmd.text}` still fails after the fix: {probe.stdout[-800:]}")
        reader.bash(re.sub(r'"<[^>]*>"', json.dumps(message), commit_cmd.text), "step 2: commit")
        second = evaluate(reader, evaluate_cmd, message, "step 3 again")
        reader.record(step="step 4 again", verdict=second["verdict"], reason=second.get("reason"))
        if second["verdict"] not in ("baseline", "keep"):
            raise Stuck(f"the fix was not kept: {second}")
        said = ""
        for command in reading(reader.root / "program.md", second["commit"]):
            done = reader.bash(command, "reading")
            if done.returncode != 0:
                raise Stuck(f"`{command}` failed (exit {done.returncode}): {(done.stdout + done.stderr)[-800:]}")
            said += done.stdout
        rollout = re.search(r"autoenv show (\S+) --rollout (\S+)", said)  # "read one: ..." in show's output
        if rollout is None:
            raise Stuck("`autoenv show <commit>` names no rollout to read")
        command = f".venv/bin/autoenv show {rollout.group(1)} --rollout {rollout.group(2).rstrip('…')}"
        if reader.bash(command, "reading").returncode != 0:
            raise Stuck(f"`{command}` failed")
    except Stuck as stuck:
        reader.record(step="stuck", reason=str(stuck))
        if settings is not None:
            emit({"type": "result", "subtype": "success", "is_error": False, "result": f"stuck: {stuck}",
                  "session_id": session, "total_cost_usd": COST, "num_turns": reader.calls, "usage": {}})
        return 1
    if settings is not None:
        emit({"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": session,
              "total_cost_usd": COST, "num_turns": reader.calls,
              "usage": {"input_tokens": 1000 * reader.calls, "output_tokens": 100 * reader.calls}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
