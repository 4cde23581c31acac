#!/usr/bin/env python3
"""A stand-in for the Claude Code CLI in print mode (`claude -p ... --output-format json`).

Standard library only. It parses argv like the real CLI (an unknown option is an error),
records argv, cwd and a few environment variables in the JSON list named by
$FAKE_CLAUDE_LOG, then behaves according to $FAKE_CLAUDE_MODE:

- ok:      lists rollouts/*.md in its cwd and returns schema-conforming findings that
           cite one real rollout stem; cost 0.0123, 4 turns, exit 0.
- escape:  tries to Read ../../secret.txt, $FAKE_CLAUDE_OUTSIDE_FILE (absolute) and candidate/link.
           Like the real CLI with `--tools Read,Grep,Glob --permission-mode dontAsk`, its
           Read only allows paths that resolve (symlinks followed) inside the cwd; other
           reads become `permission_denials`. The summary holds only what it could read and
           whether a CLAUDE.md exists anywhere in the cwd. Refuses to run (exit 2)
           without `--bare`.
- fail:    an error_max_budget_usd result, exit 1.
- api-error: what the real CLI prints when the API refuses (a bad key): subtype "success"
           with is_error true and the message ($FAKE_CLAUDE_ERROR, default "Invalid API
           key · Please run /login") in `result`, exit 1.
- hang:    sleeps an hour (until killed).
- garbage: structured_output without the required keys.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

VALUED = {"-p", "--print", "--output-format", "--json-schema", "--tools", "--permission-mode", "--max-turns",
          "--max-budget-usd", "--model", "--allowedTools", "--disallowedTools", "--add-dir", "--system-prompt",
          "--append-system-prompt", "--session-id", "--resume"}
SWITCHES = {"--bare", "--no-session-persistence", "--verbose", "--strict-mcp-config", "--dangerously-skip-permissions"}


def parse(argv: list[str]) -> dict:
    opts: dict = {"switches": set()}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in SWITCHES:
            opts["switches"].add(arg)
            i += 1
        elif arg in VALUED:
            if i + 1 >= len(argv):
                fail_usage(f"error: option '{arg}' argument missing")
            opts[arg] = argv[i + 1]
            i += 2
        else:
            fail_usage(f"error: unknown option '{arg}'")
    return opts


def fail_usage(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(1)


def log(record: dict) -> None:
    path = os.environ.get("FAKE_CLAUDE_LOG")
    if not path:
        return
    path = Path(path)
    records = json.loads(path.read_text()) if path.is_file() else []
    records.append(record)
    path.write_text(json.dumps(records, indent=1))


class Session:
    """The simulated Read tool and its permission denials."""

    def __init__(self, cwd: Path):
        self.cwd = cwd.resolve()
        self.denials: list[dict] = []
        self.outcomes: dict[str, str] = {}
        self.turns = 0

    def read(self, file_path: str) -> str | None:
        self.turns += 1
        given = Path(file_path)
        full = given if given.is_absolute() else self.cwd / given
        resolved = full.resolve()
        if resolved != self.cwd and not resolved.is_relative_to(self.cwd):
            self.denials.append({"tool_name": "Read", "tool_use_id": f"toolu_fake_{len(self.denials) + 1}",
                                 "tool_input": {"file_path": str(full)}})
            self.outcomes[file_path] = "denied"
            return None
        if not resolved.is_file():
            self.outcomes[file_path] = "missing"
            return None
        self.outcomes[file_path] = "read"
        return resolved.read_text(errors="replace")


def findings(summary: str, stem: str) -> dict:
    return {
        "summary": summary,
        "spec_fidelity": {"score": 7, "gaps": ["no word problems although the spec asks for them"]},
        "reward_faithfulness": {"suspected_hacks": [
            {"description": "the reward accepts an answer tag anywhere in the reply", "evidence": [stem]}]},
        "rl_readiness": {"assessment": "close to ready", "concerns": ["few disagreeing groups"]},
        "dataset_quality": {"assessment": "varied", "issues": ["easy tasks dominate"]},
        "priorities": [{"issue": "answer tag accepted anywhere", "fix": "require the tag at the end of the reply"}],
    }


def result(structured, session: Session, *, subtype: str = "success", is_error: bool = False,
           cost: float = 0.0123, turns: int = 4) -> dict:
    return {
        "type": "result", "subtype": subtype, "is_error": is_error, "duration_ms": 1234, "num_turns": turns,
        "result": json.dumps(structured) if structured is not None else "", "structured_output": structured,
        "session_id": "00000000-0000-4000-8000-000000000000", "total_cost_usd": cost,
        "usage": {"input_tokens": 1234, "output_tokens": 567}, "permission_denials": session.denials,
    }


def main() -> int:
    opts = parse(sys.argv[1:])
    cwd = Path.cwd()
    mode = os.environ.get("FAKE_CLAUDE_MODE", "ok")
    session = Session(cwd)
    record = {
        "pid": os.getpid(), "argv": sys.argv[1:], "cwd": str(cwd), "mode": mode,
        "env": {k: os.environ.get(k) for k in ("CLAUDECODE", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                                               "CLAUDE_CODE_ENTRYPOINT", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")},
        "claude_md_found": sorted(str(p.relative_to(cwd)) for p in cwd.rglob("CLAUDE.md")),
    }
    if "-p" not in opts and "--print" not in opts:
        fail_usage("error: this fake only supports print mode (-p)")
    if opts.get("--output-format") != "json":
        fail_usage("error: this fake only supports --output-format json")
    schema = json.loads(opts["--json-schema"]) if "--json-schema" in opts else None
    stems = sorted(p.stem for p in (cwd / "rollouts").glob("*.md"))

    if mode == "escape":
        if "--bare" not in opts["switches"]:
            record["refused"] = "no --bare: a CLAUDE.md in the cwd would steer the judge"
            log(record)
            print("refusing to run without --bare", file=sys.stderr)
            return 2
        secret = os.environ.get("FAKE_CLAUDE_OUTSIDE_FILE", "/nonexistent/secret.txt")
        got = {}
        for path in ("../../secret.txt", secret, "candidate/link"):
            text = session.read(path)
            if text is not None:
                got[path] = text
        record["outcomes"] = session.outcomes
        summary = ("escape attempt; read: " + (json.dumps(got) if got else "nothing outside the workspace")
                   + f"; CLAUDE.md in workspace: {'yes ' + ', '.join(record['claude_md_found']) if record['claude_md_found'] else 'no'}")
        log(record)
        out = result(findings(summary, stems[0] if stems else "none"), session, turns=session.turns + 1)
        print(json.dumps(out))
        return 0

    log(record)
    if mode == "ok":
        if not stems:
            print(json.dumps(result(None, session, subtype="error_during_execution", is_error=True)))
            return 1
        structured = findings(f"fake judge read {len(stems)} rollouts; worst is {stems[0]}", stems[0])
        if schema is not None:
            missing = [k for k in schema.get("required", []) if k not in structured]
            assert not missing, missing
        print(json.dumps(result(structured, session)))
        return 0
    if mode == "fail":
        out = result(None, session, subtype="error_max_budget_usd", is_error=True, cost=1.02, turns=17)
        print(json.dumps(out))
        return 1
    if mode == "api-error":
        out = result(None, session, is_error=True, cost=0, turns=1)
        out["result"] = os.environ.get("FAKE_CLAUDE_ERROR", "Invalid API key · Please run /login")
        print(json.dumps(out))
        return 1
    if mode == "hang":
        time.sleep(3600)
        return 0
    if mode == "garbage":
        print(json.dumps(result({"summary": "no structure at all", "verdict": "great"}, session)))
        return 0
    print(f"unknown FAKE_CLAUDE_MODE {mode!r}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
