"""The isolated judge: reads the rollouts in a workspace of copies and returns structured findings.

Backends (config.toml [judge] backend; `auto` picks the first available in
`registry.BACKENDS` order), one module each:
- `claude`: the Claude Code CLI in print mode, working directory = the workspace, with
  `--tools Read,Grep,Glob --permission-mode dontAsk --bare` (reads outside the workspace
  are denied; no Bash, no Write; a planted CLAUDE.md is ignored), JSON output with a JSON
  schema, turn/spend/wall-clock limits and its own config directory.
- `anthropic`: the anthropic SDK with three tools (list, read, grep) that resolve every
  path and refuse anything outside the workspace, with size, turn and spend caps.
- `offline`: `offline.offline_findings`, deterministic.

The other modules: `workspace` builds the room of copies, `schema` holds the prompt, the
findings' JSON schema (generated from `autoenv.core.record.Findings`) and its check, `run`
picks a backend and falls back, `render` writes the feedback section.

The harness, never the model, writes the feedback file: a judge that fails, times out or
overspends leaves the offline findings and a line saying what failed.

This package's `__init__` imports nothing: a backend's cost is paid only by the process that
judges.

May import: core, sandbox, gates, endpoint. Imported by: evaluation, cli.
"""
