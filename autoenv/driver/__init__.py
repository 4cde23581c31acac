"""The agent driver: `autoenv run <tag>` launches the coding agent headless and keeps it going.

A print-mode agent run ends when the model stops talking; nothing relaunched it, nothing
capped its spend, its transcript was lost and it could write the rules it is judged by.
The driver (autoenv.driver.loop) launches it in the run's worktree with settings it
generates (autoenv.driver.settings: edits only under candidate/, a short Bash allowlist,
a PreToolUse hook as the second wall), resumes the same session on every relaunch,
nudges it after a stall and ends it at a budget (autoenv.driver.budget) that the
evaluation itself also honours (autoenv.driver.gate), keeping a transcript and the cost
of every launch under outputs/agent/<tag>/ (autoenv.driver.transcript). The allowlist's
`pytest candidate` passes on a candidate that ships no tests (autoenv.driver.pytest_candidate,
the pytest plugin pyproject.toml loads).

May import: core, run. Imported by: review, evaluation, cli.
"""
