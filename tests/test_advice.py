"""Every fix the agent is given is one it may carry out.

The advice the harness prints (each error's fix, warnings, verdict reasons, the feedback's "Fix first",
the gates' findings and defences) is collected from the source of every module an agent's command
reaches (tests/advice.py) and checked against what program.md and autoenv.driver.rules let the agent do.
The paths found broken are also driven for real: an uncommitted change to config.toml is refused with
a fix whose commands pass the driver's walls and, run as printed, leave a tree the next evaluation
accepts without `tampered`; a config.toml that does not load is named with its key, line and message;
`pytest candidate` on a candidate without tests exits 0.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from advice import Advice, collect, commands, filled, problems
from conftest import commit_all, small_config

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import PROJECT
from autoenv.driver.hook import decide
from autoenv.driver.rules import forbidden_command
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.evaluation.preflight import preflight
from autoenv.run.demo import make_run_repo
from autoenv.run.gitrepo import Repo
from autoenv.run.runbase import check_rules

PENDING: dict[str, str] = {}
"""Advice known to break the rule, each with why it is tolerated for now; an entry that no longer matches
anything fails the test, so the list only shrinks."""


OLD_DIRTY_FIX = ("config.toml: outside candidate/, so not part of what is evaluated: delete what you created there "
                 "(each evaluation's output is kept by the harness in outputs/<commit>/run.log: never redirect it "
                 "into the repository), or commit a file that belongs in the repository by its name, then run again")
"""The dirty-tree fix an agent followed into `tampered`."""
REVERT_FIX = ("revert them (git revert --no-edit 0123456789ab); making the change the run's new rules is the person's "
              "decision (`autoenv rebase-rules -m 'why'`)")


@pytest.fixture(scope="module")
def advice() -> list[Advice]:
    return collect()


@pytest.mark.slow
def test_every_advice_the_agent_can_be_shown_is_one_it_may_carry_out(advice):
    found = [f"{a.where}: {p}" for a in advice if not any(t in a.text for t in PENDING) for p in problems(a)]
    assert not found, "advice the agent may not carry out:\n" + "\n".join(dict.fromkeys(found))
    stale = [text for text in PENDING if not any(text in a.text and problems(a) for a in advice)]
    assert not stale, f"PENDING entries that no longer break the rule (remove them): {stale}"


def test_the_collector_reads_every_kind_of_advice_on_the_agents_paths(advice):
    kinds = {re.search(r"\((.*)\)$", a.where).group(1) for a in advice}
    assert {"error", "fix", "reason", "warn", "note", "gate finding", "table"} <= kinds, kinds
    files = {a.where.split(":")[0] for a in advice}
    for path in ("autoenv/run/cleantree.py", "autoenv/evaluation/preflight.py", "autoenv/evaluation/verdict.py",
                 "autoenv/evaluation/recording.py", "autoenv/judge/offline.py", "autoenv/judge/causes.py",
                 "autoenv/gates/rules.py", "autoenv/gates/probes.py", "autoenv/core/config.py", "autoenv/driver/hook.py"):
        assert path in files, f"{path}: no advice collected from it"
    texts = "\n".join(a.text for a in advice)
    # f-strings read through their parts: the fix a local builds, a function's returns, a property
    assert "git restore --staged --worktree -- " in texts and "never yours to commit" in texts
    assert "git revert --no-edit <the commit that changed them>" in texts  # RulesCheck.recovery
    assert "the person edits that line" in texts  # config.py's _fail, through PERSONS
    assert "add `def oracle(self, messages)`" in texts  # a "Fix first" priority


@pytest.mark.parametrize("text,location,why", [
    ("the difference is inside the noise. Raise budget.examples to resolve smaller ones", "", "Raise"),
    (OLD_DIRTY_FIX, "", "commit"),
    ("edit that line; the shipped config.toml documents every key", "/r/config.toml:12", "does not give it"),
    ("set [target] model to one of the models the endpoint lists", "", "set"),
    ("restore it with `git checkout 0123456789ab -- .autoenv/run.toml`", "", "git checkout"),
    ("export OPENAI_API_KEY=... (never write the key into a file)", "", "export OPENAI_API_KEY"),
    ("start a new budget with autoenv run", "", "autoenv run"),
    ("revert them, or make the change the run's new rules with `autoenv rebase-rules -m 'why'`", "", "rebase-rules"),
    ("add tests/test_x.py and commit it", "", "tests/test_x"),
])
def test_the_check_names_advice_the_agent_cannot_carry_out(text, location, why):
    found = problems(Advice(text, "planted", location))
    assert found and why in found[0], found


@pytest.mark.parametrize("text,location", [
    ("commit your change to the candidate: git add candidate && git commit -m '...'; then run again", ""),
    (REVERT_FIX, ""),
    ("the person edits that line (config.toml is the person's: the coding agent never edits it)", "/r/config.toml:3"),
    ("If the change is yours, undo it: `git restore --staged --worktree -- config.toml`", ""),
    ("Add `def oracle(self, messages)` to the task class (program.md, \"The oracle hook\")", ""),
    ("Read program.md (the loop) and spec.md, then start the loop: edit candidate/, commit", ""),
    ("`autoenv run` relaunched you on autoenv/t (same session)", ""),
    ("run offline with scripted policies: bash evaluate.sh --offline", ""),
])
def test_the_check_lets_what_the_agent_may_do_pass(text, location):
    assert problems(Advice(text, "planted", location)) == []


# --- the found paths, driven ----------------------------------------------------------------------------

@pytest.fixture
def run(tmp_path) -> Path:
    """A run started with `autoenv new` (protected files: config.toml, spec.md, .gitignore)."""
    return make_run_repo("arithmetic", tmp_path / "run", small_config(), run_base=True)


def refusal(root: Path) -> AutoEnvError:
    with pytest.raises(AutoEnvError) as info:
        preflight(EvalOptions(cwd=root, offline=True))
    return info.value


def carry_out(root: Path, fix: str) -> list[str]:
    """Run every command `fix` advises, as an agent under `autoenv run` would: each must pass both walls."""
    done = []
    for sentence in re.split(r"[;.] ", fix):
        for command, _ in commands(sentence):
            text = filled(command)
            if forbidden_command(text, root) is not None:
                continue  # given to the person: the check above made sure the text says so
            assert decide({"tool_name": "Bash", "tool_input": {"command": text}, "cwd": str(root)}, root) is None
            subprocess.run(text, shell=True, cwd=root, check=True, capture_output=True)
            done.append(text)
    return done


def test_an_uncommitted_change_to_config_toml_gets_a_fix_that_undoes_it(run):
    text = (run / "config.toml").read_text()
    (run / "config.toml").write_text(text.replace("examples = 3", "examples = 4"))  # loads: a rule changed
    error = refusal(run)
    assert "config.toml" in error.what and "uncommitted" in error.what
    assert problems(Advice(error.fix, "driven", error.where or "")) == []
    assert "commit a file" not in error.fix and "is protected" in error.fix and "tampered" in error.fix
    ran = carry_out(run, error.fix)
    assert ran == ["git restore --staged --worktree -- config.toml"]
    ctx = preflight(EvalOptions(cwd=run, offline=True))  # the tree is clean again, and nothing was tampered with
    assert ctx.rules.changed == [] and (run / "config.toml").read_text() == text


def test_a_staged_change_to_config_toml_and_a_candidate_edit_each_get_their_own_fix(run):
    (run / "config.toml").write_text((run / "config.toml").read_text() + "\n# mine\n")
    subprocess.run(["git", "add", "config.toml"], cwd=run, check=True)
    (run / "candidate" / "README.md").write_text("edited\n")
    error = refusal(run)
    assert problems(Advice(error.fix, "driven", error.where or "")) == []
    ran = carry_out(run, error.fix)
    assert ran == ["git restore --staged --worktree -- config.toml", "git add candidate && git commit -m '...'"]
    assert check_rules(Repo(run), Repo(run).head()).changed == []
    preflight(EvalOptions(cwd=run, offline=True))


def test_a_file_created_outside_the_candidate_is_to_be_deleted_never_committed(run):
    (run / "run.log").write_text("an evaluation's output, redirected by hand\n")
    error = refusal(run)
    assert problems(Advice(error.fix, "driven", error.where or "")) == []
    assert "delete run.log" in error.fix and "git add" not in error.fix and carry_out(run, error.fix) == []


def test_an_uncommitted_config_that_does_not_load_names_the_real_cause_and_the_undo(run):
    text = (run / "config.toml").read_text()
    (run / "config.toml").write_text(text.replace("examples = 3", 'examples = "3"'))
    line = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("examples = 3"))
    error = refusal(run)
    assert "`budget.examples` must be an integer" in error.what and error.where == f"{run / 'config.toml'}:{line}"
    assert problems(Advice(error.fix, "driven", error.where)) == []
    assert carry_out(run, error.fix) == ["git restore --staged --worktree -- config.toml"]
    preflight(EvalOptions(cwd=run, offline=True))


def test_a_committed_config_that_does_not_load_is_tampering_with_its_cause_shown(run, capsys):
    text = (run / "config.toml").read_text()
    (run / "config.toml").write_text(text.replace("examples = 3", 'examples = "3"'))
    sha = commit_all(run, "more examples")
    entry = evaluate(EvalOptions(cwd=run, offline=True))
    assert entry.verdict.verdict == "tampered" and entry.tampered == ["config.toml (modified)"]
    line = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("examples = 3"))
    cause = f"`budget.examples` must be an integer, got a string '3' ({run / 'config.toml'}:{line})"
    shown = capsys.readouterr()
    assert cause in re.sub(r"\s+", " ", shown.out + shown.err)  # the terminal: agent and person
    assert any(cause in w for w in entry.warnings)  # the entry, and so the result block
    assert cause in (run / "feedback" / f"{sha}.md").read_text()  # the feedback
    for reason in (entry.verdict.reason, *entry.warnings):
        assert problems(Advice(reason, "driven")) == []


def test_a_config_the_person_broke_says_so(tmp_path):
    root = make_run_repo("arithmetic", tmp_path / "bare", small_config(), run_base=False)
    text = (root / "config.toml").read_text()
    (root / "config.toml").write_text(text.replace("examples = 3", 'examples = "3"'))
    commit_all(root, "the person's config")
    error = refusal(root)
    assert "budget.examples" in error.what and "config.toml:" in (error.where or "")
    assert error.fix.startswith("the person edits that line") and problems(Advice(error.fix, "driven", error.where)) == []


# --- `pytest candidate` ---------------------------------------------------------------------------------

def pytest_candidate(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=root, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.slow
def test_pytest_candidate_without_tests_passes_and_says_why(tmp_path):
    """program.md's command, in a project-shaped copy: no tests is exit 0 with a line saying so; a failing test
    still fails; no tests anywhere else (or a -k that matches nothing) is still pytest's exit 5."""
    shutil.copy(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(PROJECT / "candidate", tmp_path / "candidate")
    (tmp_path / "tests").mkdir()
    empty = pytest_candidate(tmp_path, "candidate")
    assert empty.returncode == 0, empty.stdout + empty.stderr
    assert "candidate/ ships no tests" in empty.stdout
    assert pytest_candidate(tmp_path, "tests").returncode == 5
    (tmp_path / "candidate" / "test_env.py").write_text("def test_ok():\n    assert True\n")
    assert pytest_candidate(tmp_path, "candidate", "-k", "nothing_matches").returncode == 5
    assert pytest_candidate(tmp_path, "candidate").returncode == 0
    (tmp_path / "candidate" / "test_env.py").write_text("def test_broken():\n    assert False\n")
    broken = pytest_candidate(tmp_path, "candidate")
    assert broken.returncode == 1 and "ships no tests" not in broken.stdout
    assert forbidden_command(".venv/bin/python -m pytest candidate", tmp_path) is None


@pytest.mark.slow
def test_the_shipped_candidate_template_passes_pytest_candidate():
    """The literal command on the project itself: the candidate/ a run starts from ships no tests."""
    assert not list((PROJECT / "candidate").rglob("test_*.py"))
    done = pytest_candidate(PROJECT, "candidate", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "candidate/ ships no tests" in done.stdout
