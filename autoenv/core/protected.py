"""The files the coding agent may not change during a run, in a module with no imports.

The run base (autoenv.run.runbase) hashes them; the agent driver's PreToolUse hook
(autoenv.driver.hook), which starts once per tool call, refuses writes to them without
loading the harness.
"""

PROTECTED = ("evaluate.sh", "feedback.py", "setup.sh", "config.toml", "spec.md", "program.md", "pyproject.toml",
             ".gitignore", "autoenv/*", "tests/*")
"""Files the agent may not change during a run (fnmatch patterns; `*` crosses folders). The top-level
.gitignore too: a new ignored file under autoenv/ would otherwise escape the check."""
