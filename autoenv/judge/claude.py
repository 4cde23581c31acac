"""The Claude Code CLI judge: print mode in the workspace, with only Read, Grep and Glob.

Working directory = the workspace, `--tools Read,Grep,Glob --permission-mode dontAsk`
(reads outside it are denied; Bash and Write do not exist), `--bare` (a CLAUDE.md planted
in the candidate cannot steer the judge), no session persistence, its own config
directory, and turn, spend and wall-clock limits. The answer comes back as JSON under the
findings' schema; the harness, not the model, writes the feedback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from autoenv.core.config import Judge
from autoenv.core.record import JudgeResult
from autoenv.judge.base import JudgeCall, JudgeFailed
from autoenv.judge.schema import findings_schema, prompt, validate
from autoenv.sandbox.environ import scrubbed

KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")


def available(cfg: Judge) -> bool:
    """The CLI on PATH and a key it can use."""
    return bool(shutil.which(cfg.claude_bin)) and any(os.environ.get(v) for v in KEYS)


def judge(call: JudgeCall) -> JudgeResult:
    cfg = call.cfg
    binary = shutil.which(cfg.claude_bin)
    if binary is None:
        raise JudgeFailed(f"the Claude Code CLI `{cfg.claude_bin}` is not on PATH (npm install -g @anthropic-ai/claude-code)")
    call.state_dir.mkdir(parents=True, exist_ok=True)
    # Its own keys and nothing else secret: the providers' keys are not the judge's business.
    env = {k: v for k, v in scrubbed(keep=KEYS).items() if k not in ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT")}
    env.update(CLAUDE_CONFIG_DIR=str(call.state_dir), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    cmd = [binary, "-p", prompt(call.workspace), "--output-format", "json", "--json-schema", json.dumps(findings_schema()),
           "--tools", "Read,Grep,Glob", "--permission-mode", "dontAsk", "--bare",
           "--no-session-persistence", "--max-turns", str(cfg.max_turns),
           "--max-budget-usd", str(cfg.max_budget_usd), "--model", cfg.model]
    try:
        proc = subprocess.run(cmd, cwd=call.workspace, env=env, capture_output=True, text=True,
                              timeout=cfg.timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise JudgeFailed(f"the claude judge did not finish within {cfg.timeout:g} s (judge.timeout)") from None
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        out = {}
    if not isinstance(out, dict):
        out = {}
    spent = {"cost_usd": out.get("total_cost_usd"), "turns": out.get("num_turns")}
    if proc.returncode != 0 or out.get("is_error") or not out:
        raise JudgeFailed(f"the claude judge failed (exit {proc.returncode}): {failure(out, proc, cfg)}", **spent)
    raw = out.get("structured_output")
    if raw is None:
        try:
            raw = json.loads(out.get("result") or "")
        except json.JSONDecodeError:
            raise JudgeFailed("the claude judge returned no structured findings", **spent) from None
    try:
        findings = validate(raw)
    except JudgeFailed as e:
        raise JudgeFailed(str(e), **spent) from None
    usage = out.get("usage") or {}
    return JudgeResult(
        backend="claude", findings=findings, model=cfg.model, turns=out.get("num_turns"),
        input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"),
        cost_usd=out.get("total_cost_usd"), permission_denials=out.get("permission_denials") or [],
    )


def failure(out: dict, proc: subprocess.CompletedProcess[str], cfg: Judge) -> str:
    """Why the CLI failed, in its own words. An API error (a bad key, an overloaded model)
    comes back with `is_error` and subtype "success", the message in `result`; a limit as
    its subtype; a CLI that printed no JSON at all says why on stderr (or stdout)."""
    subtype = out.get("subtype")
    result = out.get("result")
    parts = []
    if subtype == "error_max_turns":
        parts.append(f"{subtype} (judge.max_turns = {cfg.max_turns})")
    elif subtype == "error_max_budget_usd":
        parts.append(f"{subtype} (judge.max_budget_usd = {cfg.max_budget_usd:g})")
    elif subtype and subtype != "success":
        parts.append(str(subtype))
    if isinstance(result, str) and result.strip():
        parts.append(" ".join(result.split())[:500])
    if not parts:
        said = (proc.stderr or "").strip() or (proc.stdout or "").strip()
        parts.append(said.splitlines()[-1][:500] if said else "no output")
    return ": ".join(parts)
