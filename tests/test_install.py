"""The install stage shows the real import error and enforces the export contract."""

from __future__ import annotations

import shutil

import pytest

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.sandbox.install import inspect_candidate


@pytest.fixture
def candidate(tmp_path):
    target = tmp_path / "candidate"
    shutil.copytree(EXAMPLES / "arithmetic", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.slow
def test_example_exports_one_taskset_with_an_oracle(candidate):
    info = inspect_candidate(candidate)
    assert info.taskset == "ArithmeticTaskset"
    assert info.task == "ArithmeticTask" and info.has_oracle
    assert info.env is None


@pytest.mark.slow
def test_missing_dependency_names_the_real_module(candidate):
    init = candidate / "candidate_env" / "__init__.py"
    init.write_text("import not_a_real_package_xyz\n" + init.read_text())
    with pytest.raises(AutoEnvError) as caught:
        inspect_candidate(candidate)
    message = str(caught.value)
    assert "not_a_real_package_xyz" in message
    assert "taskset not found" in message  # says what verifiers would have said instead
    assert "pyproject.toml" in caught.value.where


@pytest.mark.slow
def test_no_taskset_exported(candidate):
    init = candidate / "candidate_env" / "__init__.py"
    init.write_text(init.read_text().replace('__all__ = ["ArithmeticTaskset"]', "__all__ = []"))
    with pytest.raises(AutoEnvError, match="exactly one vf.Taskset"):
        inspect_candidate(candidate)


@pytest.mark.slow
def test_two_tasksets_exported(candidate):
    init = candidate / "candidate_env" / "__init__.py"
    init.write_text(init.read_text() + "\nclass Other(ArithmeticTaskset):\n    pass\n\n__all__ = ['ArithmeticTaskset', 'Other']\n")
    with pytest.raises(AutoEnvError, match="found ArithmeticTaskset, Other"):
        inspect_candidate(candidate)


@pytest.mark.slow
def test_syntax_error_shows_file_and_line(candidate):
    (candidate / "candidate_env" / "taskset.py").write_text("def broken(:\n")
    with pytest.raises(AutoEnvError) as caught:
        inspect_candidate(candidate)
    assert "SyntaxError" in str(caught.value) and "taskset.py" in str(caught.value)


@pytest.mark.slow
def test_main_stub_imports_but_points_at_the_spec():
    info = inspect_candidate(PROJECT / "candidate")
    assert info.taskset == "StubTaskset" and not info.has_oracle
