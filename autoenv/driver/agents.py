"""Which coding agent `autoenv run` launches and how: the [agent] templates, the install and key checks.

A template is shell words; `{prompt}`, `{session_id}`, `{settings}` and `{root}` are filled
in after splitting, so a prompt with quotes or newlines stays one argument. Claude Code
gets a session id the driver pins (`--session-id`, then `--resume`); the Codex CLI names
its own (`thread_id`), which the driver reads from the first transcript. Everything that
can keep the agent from starting is found before anything is written or launched.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from autoenv.core.config import AGENT_KINDS, Agent
from autoenv.core.errors import AutoEnvError

INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code (Node 18+), then check `claude --version`",
    "codex": "npm install -g @openai/codex, then check `codex --version`",
}
KEYS = {
    "claude": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
               "CLAUDE_CODE_USE_VERTEX"),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
}


@dataclass(frozen=True)
class AgentSpec:
    kind: str
    start: str
    resume: str

    @property
    def pins_session(self) -> bool:
        """The driver chooses the session id (Claude Code); otherwise the agent reports it."""
        return "{session_id}" in self.start


def choose(config: Agent, kind: str | None, command: str | None) -> AgentSpec:
    """The agent to launch: --agent (default [agent] kind), with --command for the command agent."""
    kind = kind or ("command" if command else config.kind)
    if kind not in AGENT_KINDS:
        raise AutoEnvError(f"unknown agent {kind!r}", where="--agent", fix=f"use one of {', '.join(AGENT_KINDS)}")
    if command is not None and kind != "command":
        raise AutoEnvError(f"--command is for the command agent, not {kind}", where="--command",
                           fix="drop --agent, or pass --agent command")
    start = command if command is not None else getattr(config, f"{kind}_start")
    resume = command if command is not None else (getattr(config, f"{kind}_resume") or start)
    if not start.strip():
        raise AutoEnvError("the command agent has no command", where="config.toml [agent] command_start",
                           fix='pass --command "my-agent --flag", or set [agent] command_start')
    for name, template in (("start", start), ("resume", resume)):
        try:
            words = shlex.split(template)
        except ValueError as e:
            raise AutoEnvError(f"the {kind} {name} template is not valid shell words: {e}",
                               where=f"config.toml [agent] {kind}_{name}", fix="fix its quotes") from None
        if not words:
            raise AutoEnvError(f"the {kind} {name} template is empty", where=f"config.toml [agent] {kind}_{name}",
                               fix="restore it from the shipped config.toml")
    return AgentSpec(kind=kind, start=start, resume=resume)


def argv(template: str, *, prompt: str, session_id: str, settings: Path, root: Path) -> list[str]:
    values = {"{prompt}": prompt, "{session_id}": session_id, "{settings}": str(settings), "{root}": str(root)}
    out = []
    for word in shlex.split(template):
        if word in values:
            out.append(values[word])
        else:
            for key, value in values.items():
                if key != "{prompt}":
                    word = word.replace(key, value)
            out.append(word)
    return out


def check_ready(spec: AgentSpec, env: dict[str, str]) -> None:
    """Refuse, naming what to do, when the agent's program is missing or (claude, codex) has no key."""
    program = shlex.split(spec.start)[0]
    if shutil.which(program, path=env.get("PATH")) is None:
        hint = INSTALL.get(spec.kind, "install it, or fix the first word of the template")
        raise AutoEnvError(f"the {spec.kind} agent's program {program!r} is not installed (not on PATH)",
                           where=f"config.toml [agent] {spec.kind}_start", fix=f"{hint}; nothing was started")
    if spec.kind in KEYS and not any(env.get(k) for k in KEYS[spec.kind]) and not _logged_in(spec.kind, env):
        names = " or ".join(KEYS[spec.kind][:2])
        raise AutoEnvError(f"no API key for the {spec.kind} agent: {names} is not set and no login was found",
                           where="the environment of autoenv run",
                           fix=f"export {KEYS[spec.kind][0]}=... (or log the CLI in once), then run again; "
                               "nothing was started")


def _logged_in(kind: str, env: dict[str, str]) -> bool:
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if kind == "claude":
        config = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
        return (config / ".credentials.json").is_file()
    codex = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    return (codex / "auth.json").is_file()
