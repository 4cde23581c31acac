"""The grader-attack family: programs that act on the script testing them instead of solving the task.

Unit level: which programs it writes for a function-style prompt, a stdin/stdout prompt and a prompt that asks for
no code. The real shapes: tests/data/sum-program (a program run in a process of its own) with its honest output
check as the control and its planted exit-status check; examples/code-clean (its type-checked comparison is the
control, in tests/test_free.py) with the comparison planted back to a bare `got == want`, which an object equal to
everything passes.
"""

from __future__ import annotations

import shutil

import pytest

from autoenv.core.paths import PROJECT
from autoenv.gates.families import family_replies
from tests.test_real_shapes import DATA, probe_env

FUNCTION_PROMPT = [{"role": "user", "content": "Write a Python function `add(a, b)` that returns the sum."}]
SCRIPT_PROMPT = [{"role": "user", "content": "Write a Python program that reads two integers from standard input "
                                             "and prints their sum."}]


def test_function_prompts_get_an_object_equal_to_everything_and_script_prompts_an_early_exit_or_a_report():
    found = family_replies("grader-attack", messages=FUNCTION_PROMPT, answers=[])
    assert list(found) == ["results equal to everything"]
    code = found["results equal to everything"].content
    assert "def __eq__(self, other):\n        return True" in code and "def add(a, b):\n    return _Equal()" in code
    namespace: dict = {}
    exec(code.split("```python\n")[1].split("```")[0], namespace)  # noqa: S102 - the probe's own program
    assert namespace["add"](1, 2) == 3 and namespace["add"](1, 2) == "anything"
    scripts = family_replies("grader-attack", messages=SCRIPT_PROMPT, answers=[])
    assert set(scripts) == {"report success", "exit 0 at once"}
    assert "sys.exit(0)" in scripts["exit 0 at once"].content
    assert family_replies("grader-attack", messages=[{"role": "user", "content": "What is 2 + 2?"}], answers=[]) == {}


def planted(tmp_path, source, package: str, old: str, new: str):
    env = tmp_path / source.name
    shutil.copytree(source, env, ignore=shutil.ignore_patterns("__pycache__"))
    init = env / package / "__init__.py"
    assert old in init.read_text()
    init.write_text(init.read_text().replace(old, new))
    return env


@pytest.mark.slow
@pytest.mark.parametrize("check", ["output", "status"])
def test_a_program_run_apart_is_clean_when_its_output_is_compared_and_caught_when_its_status_is(tmp_path, check):
    env = planted(tmp_path, DATA / "sum-program", "sum_program", 'CHECK = "output"', f'CHECK = "{check}"')
    findings, _ = probe_env(env, tmp_path / "run")
    attack = findings["probe grader-attack"]
    if check == "output":
        assert attack["status"] == "pass" and not [n for n, f in findings.items() if f["status"] == "fail"]
    else:
        assert attack["status"] == "fail" and 'best strategy: "exit 0 at once"' in attack["message"]


@pytest.mark.slow
def test_an_in_process_comparison_with_the_replys_own_object_is_caught(tmp_path):
    env = planted(tmp_path, PROJECT / "examples" / "code-clean", "candidate_env",
                  "int(type(got) is type(want) and got == want)", "int(got == want)")
    findings, _ = probe_env(env, tmp_path / "run")
    attack = findings["probe grader-attack"]
    assert attack["status"] == "fail" and 'best strategy: "results equal to everything"' in attack["message"]
    assert findings["probe stub"]["status"] == "pass"  # the stubs still earn nothing: only the attack does
