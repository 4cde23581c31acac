"""The anthropic-SDK judge: a plain tool loop whose file tools cannot leave the workspace.

Every path is resolved (symlinks followed) and refused unless it stays inside the
workspace root: `..`, absolute paths and links pointing out all fail the same way. File
reads, tool results and grep hits are capped, and so are turns and spend. The answer is
a `submit_findings` tool call whose input schema is the findings' schema.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from autoenv.core.config import Judge
from autoenv.core.record import JudgeResult
from autoenv.judge.base import JudgeCall, JudgeFailed
from autoenv.judge.schema import findings_schema, prompt, validate

MAX_READ = 20 * 1024
MAX_RESULT = 24 * 1024  # room for a whole read plus its "read again with offset" hint
MAX_HITS = 50
MAX_LIST = 300


class Refused(Exception):
    pass


def inside(root: Path, relative: str) -> Path:
    """`relative` resolved under `root`, or Refused when it would leave it."""
    if not isinstance(relative, str) or not relative.strip():
        relative = "."
    if Path(relative).is_absolute():
        raise Refused(f"absolute paths are not allowed ({relative}); use paths relative to the workspace")
    root = root.resolve()
    target = (root / relative).resolve()
    if target != root and not target.is_relative_to(root):
        raise Refused(f"{relative} is outside the workspace")
    return target


def list_files(root: Path, path: str = ".") -> str:
    base = inside(root, path)
    if not base.is_dir():
        raise Refused(f"{path} is not a directory")
    names = []
    for item in sorted(base.rglob("*")):
        try:
            inside(root, str(item.relative_to(root.resolve())))
        except (Refused, ValueError):
            continue  # a link out of the workspace is not listed
        if item.is_file():
            names.append(str(item.relative_to(root.resolve())))
        if len(names) >= MAX_LIST:
            names.append("[... more files]")
            break
    return "\n".join(names) or "(empty)"


def read_file(root: Path, path: str, offset: int = 0) -> str:
    target = inside(root, path)
    if not target.is_file():
        raise Refused(f"{path} is not a file")
    data = target.read_bytes()[int(offset): int(offset) + MAX_READ].decode(errors="replace")
    rest = target.stat().st_size - int(offset) - MAX_READ
    return data + (f"\n[... {rest} more bytes: read again with offset {int(offset) + MAX_READ}]" if rest > 0 else "")


def grep(root: Path, pattern: str, path: str = ".") -> str:
    base = inside(root, path)
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise Refused(f"bad regular expression: {e}") from None
    hits = []
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    for file in files:
        try:
            inside(root, str(file.relative_to(root.resolve())))
        except (Refused, ValueError):
            continue
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{file.relative_to(root.resolve())}:{number}: {line[:300]}")
                if len(hits) >= MAX_HITS:
                    return "\n".join(hits) + "\n[... more hits]"
    return "\n".join(hits) or "(no match)"


TOOLS = [
    {"name": "list_files", "description": "List the files under a workspace directory (relative path).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "read_file", "description": "Read a workspace file (relative path), 64 KB at a time from `offset`.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
                      "required": ["path"]}},
    {"name": "grep", "description": "Search workspace files for a regular expression.",
     "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                      "required": ["pattern"]}},
]


def call_tool(root: Path, name: str, arguments: dict) -> str:
    try:
        if name == "list_files":
            out = list_files(root, arguments.get("path", "."))
        elif name == "read_file":
            out = read_file(root, arguments.get("path", ""), arguments.get("offset", 0))
        elif name == "grep":
            out = grep(root, arguments.get("pattern", ""), arguments.get("path", "."))
        else:
            raise Refused(f"unknown tool {name}")
    except Refused as e:
        return f"refused: {e}"
    except (ValueError, TypeError, OSError) as e:  # malformed arguments from the model
        return f"refused: bad arguments for {name}: {type(e).__name__}: {e}"
    return out if len(out) <= MAX_RESULT else out[:MAX_RESULT] + "\n[... truncated]"


def available(cfg: Judge) -> bool:
    """A key the SDK can use (a Claude Code OAuth token is not one)."""
    return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))


def judge(call: JudgeCall) -> JudgeResult:
    import anthropic  # deferred: the SDK takes seconds to import and only this backend needs it

    cfg, workspace = call.cfg, call.workspace
    client = anthropic.Anthropic(timeout=cfg.timeout, max_retries=1)
    submit = {"name": "submit_findings", "description": "Submit the final findings (ends the review).",
              "input_schema": findings_schema()}
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt(workspace) + "\n\nUse the tools to read the workspace, then call submit_findings."}]
    tokens_in = tokens_out = 0
    cost = 0.0
    started = time.time()
    for turn in range(1, cfg.max_turns + 1):
        if time.time() - started > cfg.timeout:
            raise JudgeFailed(f"the anthropic judge did not finish within {cfg.timeout:g} s (judge.timeout)")
        response = client.messages.create(model=cfg.model, max_tokens=4096, tools=TOOLS + [submit], messages=messages)  # type: ignore[arg-type]  # plain dicts of the SDK's shapes
        tokens_in += response.usage.input_tokens
        tokens_out += response.usage.output_tokens
        cost = (tokens_in * cfg.input_price + tokens_out * cfg.output_price) / 1e6
        if cost > cfg.max_budget_usd:
            raise JudgeFailed(f"the anthropic judge spent ${cost:.2f}, over judge.max_budget_usd = {cfg.max_budget_usd}",
                              cost_usd=round(cost, 6), turns=turn)
        results = []
        for block in response.content:
            if block.type != "tool_use":
                continue
            if block.name == "submit_findings":
                try:
                    findings = validate(block.input)
                except JudgeFailed as e:
                    raise JudgeFailed(str(e), cost_usd=round(cost, 6), turns=turn) from None
                return JudgeResult(backend="anthropic", findings=findings, model=cfg.model, turns=turn,
                                   input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=round(cost, 6))
            results.append({"type": "tool_result", "tool_use_id": block.id,
                            "content": call_tool(workspace, block.name, dict(block.input or {}))})
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]})
        if not results:
            messages.append({"role": "user", "content": "Call submit_findings with your findings now."})
        else:
            messages.append({"role": "user", "content": results})
    raise JudgeFailed(f"the anthropic judge used its {cfg.max_turns} turns without submitting findings (judge.max_turns)",
                      cost_usd=round((tokens_in * cfg.input_price + tokens_out * cfg.output_price) / 1e6, 6),
                      turns=cfg.max_turns)
