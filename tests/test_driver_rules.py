"""The walls around the coding agent: the rules, the PreToolUse hook as a real process, the generated settings,
and the evaluation gate that honours a driver's budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoenv.core.config import Agent, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import PROJECT
from autoenv.core.record import Entry
from autoenv.driver.agents import argv, choose
from autoenv.driver.budget import Limits, Spend, exhausted
from autoenv.driver.gate import refuse_when_spent
from autoenv.driver.rules import forbidden_command, forbidden_path
from autoenv.driver.settings import settings, write_settings
from autoenv.driver.transcript import Transcript
from autoenv.run.gitrepo import Repo

ROOT = Path("/work/run")


@pytest.mark.parametrize("path", ["config.toml", "spec.md", "program.md", "evaluate.sh", "autoenv/evaluation/pipeline.py",
                                  "tests/conftest.py", ".autoenv/run.toml", "outputs/x/traces.jsonl",
                                  "feedback/abc.md", "feedback_log.jsonl", ".claude/settings.json", ".git/config",
                                  "README.md", "candidate/../config.toml", "/etc/passwd", "../other/candidate/x.py"])
def test_writes_outside_candidate_are_refused(path):
    assert forbidden_path(path, ROOT) is not None


@pytest.mark.parametrize("path", ["candidate/candidate_env/env.py", "candidate/README.md", "/work/run/candidate/x"])
def test_writes_under_candidate_are_allowed(path):
    assert forbidden_path(path, ROOT) is None


def test_a_symlink_out_of_candidate_is_followed(tmp_path):
    (tmp_path / "candidate").mkdir()
    (tmp_path / "config.toml").write_text("x")
    (tmp_path / "candidate" / "link").symlink_to(tmp_path / "config.toml")
    assert "config.toml is protected" in forbidden_path("candidate/link", tmp_path)


@pytest.mark.parametrize("command", [
    "bash evaluate.sh --description 'reward anchored' --offline",
    "git add -A && git commit -qm 'anchor the answer tag'",
    "git revert --no-edit HEAD",
    ".venv/bin/autoenv probe",
    "autoenv log --json",
    "git status",
    "bash evaluate.sh -d x 2>&1",
])
def test_allowlisted_commands_pass(command):
    assert forbidden_command(command, ROOT) is None


@pytest.mark.parametrize("command,why", [
    ("sed -i s/0.2/0.0/ config.toml", "not on the allowlist"),
    ("git add -A && echo x > config.toml", "not on the allowlist"),
    ("git add config.toml", "config.toml, which is protected"),
    ("git commit -qm x -- spec.md", "spec.md, which is protected"),
    ("git show HEAD:config.toml", "config.toml, which is protected"),
    ("git add ../run/autoenv/pipeline.py", "protected"),
    ("curl https://example.com", "no network tools"),
    ("bash evaluate.sh $(rm -rf feedback)", "command substitution"),
    ("bash evaluate.sh -d x > run.log", "redirection"),
    ("git -C /elsewhere commit -m x", "not on the allowlist"),
    ("git commit --no-verify -m x", "skip its checks"),
    ("python -c 'open(\"config.toml\",\"w\")'", "not on the allowlist"),
    ("bash evaluate.sh; bash -c 'echo > spec.md'", "not on the allowlist"),
])
def test_forbidden_commands_are_refused(command, why):
    assert why in (forbidden_command(command, ROOT) or "")


def hook(call: dict, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoenv.driver.hook", "--root", str(root)], input=json.dumps(call),
                          capture_output=True, text=True, timeout=30)


def test_the_hook_process_blocks_with_exit_2_and_says_why(tmp_path):
    done = hook({"tool_name": "Edit", "tool_input": {"file_path": str(tmp_path / "config.toml")},
                 "cwd": str(tmp_path)}, tmp_path)
    assert done.returncode == 2 and "config.toml is protected" in done.stderr and "candidate/" in done.stderr
    done = hook({"tool_name": "Write", "tool_input": {"file_path": "candidate/x.py"}, "cwd": str(tmp_path)}, tmp_path)
    assert done.returncode == 0, done.stderr
    done = hook({"tool_name": "Bash", "tool_input": {"command": "wget http://x"}, "cwd": str(tmp_path)}, tmp_path)
    assert done.returncode == 2 and "network" in done.stderr
    done = hook({"tool_name": "WebFetch", "tool_input": {"url": "http://x"}}, tmp_path)
    assert done.returncode == 2
    done = subprocess.run([sys.executable, "-m", "autoenv.driver.hook", "--root", str(tmp_path)], input="not json",
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2


def test_settings_deny_every_protected_path_and_allow_only_candidate(tmp_path):
    data = settings(tmp_path, python="/venv/bin/python")
    perms = data["permissions"]
    root = f"/{tmp_path.resolve().as_posix()}"
    assert perms["defaultMode"] == "dontAsk"
    assert f"Edit({root}/candidate/**)" in perms["allow"] and f"Write({root}/candidate/**)" in perms["allow"]
    for target in ("config.toml", "spec.md", "evaluate.sh", "autoenv/**", "outputs/**", "feedback_log.jsonl",
                   ".claude/**", ".autoenv/**"):
        assert f"Edit({root}/{target})" in perms["deny"] and f"Write({root}/{target})" in perms["deny"]
    assert "Bash(bash evaluate.sh:*)" in perms["allow"] and "Bash(curl:*)" in perms["deny"]
    assert "WebFetch" in perms["deny"]
    assert not any(rule.startswith("Bash(") and "*)" in rule and ":" not in rule for rule in perms["allow"])
    command = data["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert "-m autoenv.driver.hook" in command and str(tmp_path.resolve()) in command


def test_written_settings_never_make_the_tree_dirty(run_repo):
    root = run_repo(run_base=True)
    repo = Repo(root)
    path = write_settings(repo)
    assert path == root / ".autoenv" / "agent-settings.json" and json.loads(path.read_text())["permissions"]
    assert repo.dirty_paths() == []
    (root / ".gitignore").write_text("outputs/\n")  # a run whose .gitignore does not cover .autoenv/
    subprocess.run(["git", "commit", "-qam", "narrow ignore"], cwd=root, check=True)
    write_settings(repo)
    write_settings(repo)
    assert repo.dirty_paths() == []
    assert (root / ".git" / "info" / "exclude").read_text().count("/.autoenv/agent-settings.json") == 1


def test_the_gate_refuses_an_evaluation_past_a_live_drivers_budget(tmp_path):
    outputs, log = tmp_path / "outputs", tmp_path / "feedback_log.jsonl"
    state = outputs / "agent" / "t" / "driver.json"
    state.parent.mkdir(parents=True)
    log.write_text("{}\n{}\n")
    state.write_text(json.dumps({"pid": os.getpid(), "ledger_start": 1, "max_evals": 2, "stopping": None}))
    refuse_when_spent(outputs, log, "autoenv/t")  # 1 of 2 done
    log.write_text("{}\n{}\n{}\n")
    with pytest.raises(AutoEnvError, match="allows 2 evaluations and 2 are done"):
        refuse_when_spent(outputs, log, "autoenv/t")
    state.write_text(json.dumps({"pid": os.getpid(), "ledger_start": 0, "max_evals": 9, "stopping": "max_usd: $1"}))
    with pytest.raises(AutoEnvError, match="max_usd"):
        refuse_when_spent(outputs, log, "autoenv/t")
    state.write_text(json.dumps({"pid": 0, "stopping": "max_usd"}))  # a driver that ended: evaluations by hand go on
    refuse_when_spent(outputs, log, "autoenv/t")
    refuse_when_spent(outputs, log, "main")


def test_agent_config_is_checked_with_the_line(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text((PROJECT / "config.toml").read_text().replace("max_usd = 50.0", "max_usd = 0"))
    with pytest.raises(AutoEnvError) as error:
        load_config(path)
    assert "`agent.max_usd` must be positive" in str(error.value) and f"{path}:" in str(error.value)
    path.write_text((PROJECT / "config.toml").read_text().replace('kind = "claude"', 'kind = "gpt"'))
    with pytest.raises(AutoEnvError, match="agent.kind"):
        load_config(path)


def test_transcripts_give_session_tokens_and_cost(tmp_path):
    path = tmp_path / "launch.jsonl"
    lines = [{"type": "system", "subtype": "init", "session_id": "s1"},
             {"type": "assistant", "message": {"usage": {"input_tokens": 1000, "output_tokens": 100}}},
             "not json at all"]
    path.write_text("\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines) + "\n")
    t = Transcript(path)
    stats = t.update()
    assert stats.session_id == "s1" and stats.cost_usd is None
    assert stats.priced(3.0, 15.0) == pytest.approx((1000 * 3 + 100 * 15) / 1e6)  # ended early: priced
    with open(path, "a") as f:  # the result arrives in two writes, the last without a newline
        f.write('{"type": "result", "subtype": "success", "is_error": false, "total_cost_usd": 0.42, ')
        t.update()
        f.write('"num_turns": 7, "session_id": "s1", "usage": {"input_tokens": 5000, "output_tokens": 700}}')
    stats = t.finish()
    assert (stats.cost_usd, stats.turns, stats.input_tokens, stats.output_tokens) == (0.42, 7, 5000, 700)
    codex = tmp_path / "codex.jsonl"
    codex.write_text(json.dumps({"type": "thread.started", "thread_id": "th-9"}) + "\n"
                     + json.dumps({"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}}) + "\n")
    stats = Transcript(codex).finish()
    assert (stats.session_id, stats.input_tokens, stats.output_tokens, stats.cost_usd) == ("th-9", 10, 2, None)


def test_launch_templates_keep_the_prompt_one_argument(tmp_path):
    spec = choose(Agent(), "claude", None)
    prompt = 'say "hi"; rm -rf / {session_id}\nnext line'
    first = argv(spec.start, prompt=prompt, session_id="S", settings=tmp_path / "s.json", root=tmp_path)
    again = argv(spec.resume, prompt=prompt, session_id="S", settings=tmp_path / "s.json", root=tmp_path)
    assert first[:3] == ["claude", "-p", prompt] and first[first.index("--session-id") + 1] == "S"
    assert again[again.index("--resume") + 1] == "S" and "--session-id" not in again
    assert "--dangerously-skip-permissions" not in first and first[first.index("--settings") + 1] == str(tmp_path / "s.json")
    codex = choose(Agent(), "codex", None)
    assert argv(codex.resume, prompt="go", session_id="th-9", settings=tmp_path, root=tmp_path)[-3:] == ["resume", "th-9", "go"]
    with pytest.raises(AutoEnvError, match="--command is for the command agent"):
        choose(Agent(), "claude", "x")


def test_spend_counts_model_and_judge_cost_but_not_a_cache_hits_copy():
    stats = {"target": {"model": "m", "rollouts": 1, "scored": 1, "mean": 0.5, "ci": None, "std": None,
                        "solve_rate": None, "max_reward": None, "normalized_mean": None, "tasks": 1,
                        "disagree_share": None, "cost_usd": 0.25}}
    base = {"commit": "a" * 40, "timestamp": "t", "eval_success": True, "stats": stats,
            "verdict": {"verdict": "baseline", "reason": "r"}}
    fresh = Entry.model_validate(base)
    hit = Entry.model_validate({**base, "cached_from": "b" * 40})
    spend = Spend(agent_usd=1.0)
    spend.add_entries([fresh, hit])
    assert (spend.evals, spend.models_usd, spend.usd) == (2, 0.25, 1.25)
    assert exhausted(Limits(evals=2, hours=1, usd=9), spend).startswith("max_evals: 2 of 2")
    assert exhausted(Limits(evals=9, hours=1, usd=1.25), spend).startswith("max_usd")
    assert exhausted(Limits(evals=9, hours=1, usd=2), spend) is None
    with pytest.raises(AutoEnvError, match="--max-hours 0 is not a budget"):
        Limits.choose(Limits(1, 1, 1), None, 0, None)
