"""program.md against the driver's allowlist: one source of truth for what the coding agent may run.

Every command program.md recommends is allowed by autoenv.driver.rules (or is the person's, listed
in PERSON_COMMANDS); the 'What you may do' list is exactly the allowlist; the driver's prompts and
the harness's fix lines recommend only allowed commands.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from program_md import commands, loop

from autoenv.core.paths import PROJECT
from autoenv.core.record import Entry, Verdict
from autoenv.driver import prompts
from autoenv.driver.rules import AGENT_COMMANDS, ALLOWED_COMMANDS, PERSON_COMMANDS, forbidden_command

PROGRAM = PROJECT / "program.md"
ROOT = Path("/work/run")


def persons(command: str) -> bool:
    return any(command == p or command.startswith(p + " ") for p in PERSON_COMMANDS) or \
        any(command.removeprefix(".venv/bin/").startswith(p) for p in PERSON_COMMANDS if p.startswith("autoenv "))


def test_program_md_names_commands_and_its_loop_has_the_iteration():
    found = [c.text for c in loop(PROGRAM)]
    assert any(c.startswith("bash evaluate.sh --description") for c in found), found
    assert any(c.startswith("git add candidate && git commit") for c in found), found
    assert any(c.startswith("git revert --no-edit") for c in found), found
    assert len(commands(PROGRAM)) >= 15


@pytest.mark.parametrize("command", commands(PROGRAM), ids=lambda c: f"line {c.line}: {c.text}")
def test_every_command_program_md_recommends_is_allowed_or_the_persons(command):
    text = command.filled()
    if persons(text):
        return
    why = forbidden_command(text, ROOT)
    assert why is None, f"program.md line {command.line} ({command.section}) recommends `{command.text}`: {why}"


def listed(section_start: str, end: str) -> list[str]:
    text = PROGRAM.read_text(encoding="utf-8")
    part = text[text.index(section_start):]
    part = part[:part.index(end)]
    return re.findall(r"`([^`]+)`", part)


def test_the_what_you_may_do_list_is_exactly_the_allowlist():
    allowed = listed("the list: ", "No\n  network tools")
    assert allowed == list(AGENT_COMMANDS), "program.md's 'What you may do' list and autoenv.driver.rules disagree"
    persons_listed = listed("The person's commands", "are not yours")
    assert persons_listed == list(PERSON_COMMANDS)


def test_every_allowed_command_is_allowed_by_the_rules_and_refused_forms_are_refused():
    for command in ALLOWED_COMMANDS:
        assert forbidden_command(command + " x" if command.startswith("git ") else command, ROOT) is None, command
    for command in PERSON_COMMANDS:
        assert forbidden_command(command, ROOT) is not None, f"{command} is the person's, yet the driver allows it"
    # the old step 3 and the old tampered recovery: refused, so program.md must never say them again
    assert "redirection" in forbidden_command('bash evaluate.sh --description "x" > run.log 2>&1', ROOT)
    assert forbidden_command("git checkout 0123456789ab -- config.toml", ROOT) is not None


def test_the_drivers_prompts_recommend_only_allowed_commands():
    last = Entry(commit="0" * 40, timestamp="t", eval_success=True, verdict=Verdict(verdict="discard", reason="-"))
    texts = [prompts.start("t"), prompts.resume("t", None), prompts.resume("t", last), prompts.nudge("t", last, 20)]
    spans = [span for text in texts for span in re.findall(r"`([^`]+)`", text)]
    assert spans
    for span in spans:
        if persons(span):  # `autoenv run` named as what launched the agent
            continue
        assert forbidden_command(span.replace('"..."', '"x"'), ROOT) is None, span


def test_the_hook_process_allows_the_loop_as_program_md_writes_it(tmp_path):
    """The second wall, as a real process, on each of the loop's commands."""
    import json
    for command in loop(PROGRAM):
        if persons(command.text):  # named, not recommended: "under `autoenv run`"
            continue
        call = {"tool_name": "Bash", "tool_input": {"command": command.filled()}, "cwd": str(tmp_path)}
        done = subprocess.run([sys.executable, "-m", "autoenv.driver.hook", "--root", str(tmp_path)],
                              input=json.dumps(call), capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, f"{command.text}: {done.stderr}"


@pytest.mark.slow
def test_autoenv_new_says_offline_when_no_key_is_set(tmp_path):
    from conftest import autoenv, small_config

    from autoenv.run.demo import make_run_repo
    root = make_run_repo("arithmetic", tmp_path / "r", small_config(), run_base=False)
    subprocess.run(["git", "checkout", "-qb", "main"], cwd=root, check=True)
    bare = autoenv("new", "keyless", cwd=root, env={"OPENAI_API_KEY": ""})
    assert bare.returncode == 0, bare.stdout + bare.stderr
    nxt = re.search(r"(?m)^next: +(.*)$", bare.stdout).group(1)
    assert nxt.endswith("bash evaluate.sh -d 'baseline' --offline") and "OPENAI_API_KEY is not set" in bare.stdout
    subprocess.run(["git", "checkout", "-q", "main"], cwd=root, check=True)
    keyed = autoenv("new", "keyed", cwd=root, env={"OPENAI_API_KEY": "k"})
    assert re.search(r"(?m)^next: +.*'baseline'$", keyed.stdout), keyed.stdout


def test_no_harness_message_asks_the_agent_to_edit_what_program_md_forbids(tmp_path):
    from autoenv.core.paths import spec_warnings
    from autoenv.core.record import GateFinding
    from autoenv.judge.offline import CHECK_FIXES
    (warning,) = spec_warnings(tmp_path)  # no spec.md here
    assert "not the agent" in warning and "tampered" in warning
    fix = CHECK_FIXES["modules"](GateFinding(name="modules", status="fail", message="x",
                                             data={"modules": ["candidate_env.tools"]}))
    for span in re.findall(r"`([^`]+)`", fix):
        assert forbidden_command(span, ROOT) is None, span
