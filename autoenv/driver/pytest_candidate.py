"""`.venv/bin/python -m pytest candidate` on a candidate that ships no tests: exit 0, not 5.

The coding agent may run the candidate's own tests (program.md, 'Under autoenv run': the allowlist in
autoenv.driver.rules), and most candidates have none: pytest's exit 5 ("no tests ran") read as a failed
command. The project's pytest configuration loads this plugin (`-p autoenv.driver.pytest_candidate` in
pyproject.toml's addopts), which turns that exit 5 into 0, saying why, only when every path pytest was
given lies under candidate/ and nothing was deselected: `-k`/`-m` that match nothing, or no tests in
tests/, stay exit 5. Standard library and pytest only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenv.driver.rules import WRITABLE

NO_TESTS = pytest.StashKey[bool]()
MESSAGE = (f"{WRITABLE}/ ships no tests (no test_*.py or *_test.py files): nothing ran, and that is not a "
           "failure (exit 0)")


def only_candidate(config: pytest.Config) -> bool:
    """Every path pytest was given is candidate/ or lies under it, and no -k/-m expression deselects."""
    if config.option.keyword or config.option.markexpr:
        return False
    folder = (config.rootpath / WRITABLE).resolve()
    given = [Path(arg.split("::")[0]) for arg in config.args]
    paths = [(p if p.is_absolute() else config.invocation_params.dir / p).resolve() for p in given]
    return bool(paths) and all(p == folder or p.is_relative_to(folder) for p in paths)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and only_candidate(session.config):
        session.exitstatus = pytest.ExitCode.OK
        session.config.stash[NO_TESTS] = True


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if config.stash.get(NO_TESTS, False):
        terminalreporter.write_line(MESSAGE)
