"""Existing environments evaluated as they are: [candidate] / --env, scripts, shapes, ranges, no reference policy.

The fast tests check each piece in-process; the slow ones run the real CLI on the two
examples written for this (examples/real-glossary: own package name, shipped data file,
a reward that runs a uv script in the rollout's runtime; examples/real-duel: a custom
two-seat Env, an infinite prompt-less taskset, payoffs in [-2, 2], no oracle hook), and
open an evaluation's output folder with verifiers' own `vf-replay`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autoenv.core.config import Candidate, load_config, with_env
from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.core.record import CandidateInfo
from autoenv.core.traces import UNMATCHED, Rollout, normalised, to_rollout
from autoenv.endpoint.policies import NO_MATCH
from autoenv.endpoint.reference import no_reference_policy
from autoenv.gates.dataset import measure
from autoenv.gates.rows import Row
from autoenv.gates.rules import Gates, judge_audit
from autoenv.gates.seat_rules import constant_sum_game
from autoenv.sandbox.build import uv_binary
from autoenv.sandbox.candidatevenv import python_of
from autoenv.sandbox.install import install_candidate
from autoenv.sandbox.scripts import script_kind, ships_scripts
from tests.conftest import autoenv, ledger, small_config

GLOSSARY = EXAMPLES / "real-glossary"
DUEL = EXAMPLES / "real-duel"


def config(tmp_path: Path, extra: str = ""):
    path = tmp_path / "config.toml"
    path.write_text((PROJECT / "config.toml").read_text() + extra)
    return load_config(path)


def test_candidate_defaults_are_the_workspace_and_env_points_at_an_existing_package(tmp_path):
    base = config(tmp_path)
    assert base.candidate == Candidate() and base.candidate.checked_modules() == ["candidate_env"]
    assert base.path("candidate") == tmp_path / "candidate"
    glossary = with_env(base, str(GLOSSARY))
    c = glossary.candidate
    assert (c.taskset, c.module, c.install, c.workspace) == ("tiny-glossary", "tiny_glossary", True, False)
    assert glossary.path("candidate") == GLOSSARY.resolve()
    installed = with_env(base, "owner/some-env@1.0", env_id="other-env")
    assert (installed.candidate.module, installed.candidate.install) == ("some_env", False)
    assert installed.candidate.checked_modules() == ["some_env", "other_env"]
    with pytest.raises(AutoEnvError, match="no such directory"):
        with_env(base, "./missing-dir")


def test_candidate_table_is_checked_key_by_key(tmp_path):
    text = (PROJECT / "config.toml").read_text()
    good = text.replace('modules = []  ', 'modules = ["a", "b.c"]  ').replace('taskset = "candidate-env"', 'taskset = "my-env"')
    (tmp_path / "config.toml").write_text(good)
    c = load_config(tmp_path / "config.toml").candidate
    assert c.checked_modules() == ["a", "b.c"] and c.module == "my_env"
    (tmp_path / "config.toml").write_text(text.replace('modules = []  ', 'modules = "a"  '))
    with pytest.raises(AutoEnvError) as caught:
        load_config(tmp_path / "config.toml")
    assert "candidate.modules" in str(caught.value) and "array" in str(caught.value)
    assert caught.value.where.endswith(f":{text.splitlines().index(next(line for line in text.splitlines() if line.startswith('modules'))) + 1}")


def test_scripts_are_recognised_without_importing(tmp_path):
    assert script_kind(GLOSSARY / "tiny_glossary" / "check.py") == "PEP 723 script"
    assert script_kind(GLOSSARY / "tiny_glossary" / "__init__.py") is None
    (tmp_path / "run.py").write_text("#!/usr/bin/env -S uv run --script\nprint(1)\n")
    assert script_kind(tmp_path / "run.py") == "uv script"
    assert ships_scripts(GLOSSARY) and not ships_scripts(EXAMPLES / "arithmetic")


def test_prompt_less_tasks_are_compared_on_their_fields():
    rows = [{"key": str(i), "idx": i, "prompt": json.dumps({"seed": i % 4}), "fields": True} for i in range(8)]
    d = measure(rows, 0.9)
    assert d["distinguished_by"] == "data fields" and d["exact_duplicates"] == 4 and d["near_duplicate_pairs"] == 0
    distinct = measure([{**r, "prompt": json.dumps({"seed": r["idx"]})} for r in rows], 0.9)
    assert distinct["exact_duplicates"] == 0


def audit_of(probes: list[dict], **extra) -> dict:
    return {"load_seconds": 0.1, "deterministic_load": True, "modules": [], "mode": "rollouts",
            "dataset": {"size": 5}, "probes": probes, "deterministic_scoring": True, **extra}


def probe(name: str, episode: str, seat: str, score: float) -> dict:
    return {"probe": name, "key": episode, "idx": 0, "components": {"payoff": score}, "weights": {"payoff": 1.0},
            "outcome": "ok", "seat": seat, "episode": episode, "reply": ""}


def test_constant_sum_games_and_declared_ranges(tmp_path):
    cfg = with_env(config(tmp_path), str(DUEL))
    seats = ["first", "second"]
    zero_sum = [probe("garbage", e, s, v) for e, (a, b) in {"e1": (1, -1), "e2": (-2, 2), "e3": (0, 0)}.items()
                for s, v in zip(seats, (a, b))]
    rows = [Row.model_validate(r) for r in zero_sum]
    assert constant_sum_game(rows, seats) == 0 and constant_sum_game(rows, ["first"]) is None
    assert constant_sum_game(rows[:2] + [Row.model_validate(probe("garbage", "e9", s, 1)) for s in seats], seats) is None
    before, after = Gates(), Gates()
    judge_audit(audit_of([dict(r) for r in zero_sum], seats=seats), cfg, before)
    judge_audit(audit_of([dict(r) for r in zero_sum], seats=seats, reward_range=[-2, 2]), cfg, after)
    assert before.passed, before.failed  # verifiers documents no range: payoffs of +/-2 are not an error
    observed = next(f for f in before.findings if f.name == "reward range")
    assert observed.status == "warn" and observed.data["range"] == [-2, 2] and observed.data["constant_sum"] == 0
    assert "scores from -2 to 2" in observed.message and "summing to 0" in observed.message
    assert after.passed, after.failed
    assert not any(f.name == "reward range" for f in after.findings)  # declared: nothing to infer
    broken = Gates()  # a score outside the range the env declares breaks its own declaration
    judge_audit(audit_of([dict(r) for r in zero_sum], seats=seats, reward_range=[-1, 1]), cfg, broken)
    assert any("outside its declared by the task's reward_range range [-1, 1]" in f for f in broken.failed)
    row = next(f for f in after.findings if f.name == "probe garbage")
    assert row.status == "skip" and "constant-sum game of 2 seats" in row.message
    size = next(f for f in after.findings if f.name == "dataset size")
    assert size.status == "warn" and "candidate.workspace = false" in size.message
    workspace = Gates()
    judge_audit(audit_of([]), config(tmp_path), workspace)
    assert any(f.startswith("dataset size") for f in workspace.failed)


def test_gold_validation_is_the_oracle_check_without_a_hook(tmp_path):
    cfg = with_env(config(tmp_path), str(GLOSSARY))
    empty = [probe("empty", "e1", "agent", 0.0)]
    good, bad = Gates(), Gates()
    judge_audit(audit_of(empty, gold={"checked": 5, "valid": 5, "invalid": [], "unchecked": [], "errors": []}), cfg, good)
    judge_audit(audit_of(empty, gold={"checked": 5, "valid": 4, "invalid": [3], "unchecked": [], "errors": []}), cfg, bad)
    status = {f.name: (f.status, f.message) for f in good.findings}
    assert status["gold validation"][0] == "pass" and status["oracle"][0] == "pass"
    assert "Task.validate" in status["oracle"][1]
    assert {f.split(":")[0] for f in bad.failed} >= {"gold validation", "oracle"}
    assert "invalid on task idx 3" in next(f for f in bad.failed if f.startswith("gold"))


def test_unmatched_conversations_are_environment_errors_and_ranges_normalise():
    assert NO_MATCH.startswith(UNMATCHED)
    error = {"type": "ProviderError", "message": f'upstream 404: {{"error": {{"message": "{NO_MATCH}"}}}}'}
    assert to_rollout({"errors": [error]}).outcome == "env_error"
    assert to_rollout({"errors": [{"type": "ProviderError", "message": "upstream 500"}]}).outcome == "provider_error"
    r = Rollout(trace_id="t", task_key="k", idx=0, outcome="ok", reward=-1.0, components={"payoff": -1.0},
                weights={"payoff": 1.0})
    assert normalised([r], [-2.0, 2.0])[0].reward == 0.25 and normalised([r], None)[0].reward == -1.0


def test_no_reference_policy_is_named_before_any_rollout():
    offline = {"target": "noisy-oracle:0.45", "strong": "oracle"}
    why = no_reference_policy(offline, CandidateInfo(oracle_hook=False), offline=True)
    assert why is not None and why.startswith("no reference policy") and "strong oracle" in why
    assert no_reference_policy(offline, CandidateInfo(oracle_hook=True), offline=True) is None
    assert no_reference_policy(offline, CandidateInfo(oracle_hook=False), offline=False) is None
    assert no_reference_policy({"target": "empty"}, CandidateInfo(oracle_hook=False), offline=True) is None


@pytest.mark.slow
def test_a_failed_install_leaves_nothing_installed(tmp_path):
    package = tmp_path / "throwaway"
    (package / "throwaway_env_xyz").mkdir(parents=True)
    (package / "throwaway_env_xyz" / "__init__.py").write_text("")
    pyproject = package / "pyproject.toml"
    pyproject.write_text('[project]\nname = "throwaway-env-xyz"\nversion = "0.1.0"\n\n[build-system]\n'
                         'requires = ["hatchling"]\nbuild-backend = "hatchling.build"\n')
    # installed into the package's own venv (autoenv.sandbox.candidatevenv), never the harness's
    show = [uv_binary(), "pip", "show", "--python", str(python_of(package)), "throwaway-env-xyz"]
    try:
        assert install_candidate(package, force=True)
        assert subprocess.run(show, capture_output=True).returncode == 0
        pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "not a version"'))
        with pytest.raises(AutoEnvError, match="nothing of it is left installed"):
            install_candidate(package, force=True)
        assert subprocess.run(show, capture_output=True).returncode != 0  # the earlier, working one is gone too
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "throwaway-env-xyz"], capture_output=True)


@pytest.mark.slow
def test_probe_an_existing_environment_as_it_is(tmp_path):
    """Both shapes through the real CLI: only real problems reported (warnings for what is by design)."""
    (tmp_path / "config.toml").write_text(small_config())
    for env, expected in ((GLOSSARY, {"dataset size": "warn", "modules": "pass", "oracle": "pass",
                                      "gold validation": "pass",
                                      "probe empty": "pass", "probe padding": "pass"}),):  # real-duel: test_seats.py
        result = autoenv("probe", "--env", str(env), cwd=tmp_path)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        gates = json.loads(max((tmp_path / "outputs" / "scratch").glob("*/gates/gates.json"),
                               key=lambda p: p.stat().st_mtime).read_text())
        status = {f["name"]: f["status"] for f in gates["findings"]}
        assert {k: status.get(k) for k in expected} == expected, gates["findings"]


@pytest.mark.e2e
def test_eval_an_existing_environment_offline_and_replay_it_with_verifiers(run_repo):
    root = run_repo("arithmetic", config_text=small_config(examples=8))  # the glossary holds 5 tasks
    result = autoenv("eval", "--offline", "--env", str(GLOSSARY), cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    entry = ledger(root)[-1]
    assert entry["verdict"]["verdict"] == "baseline", entry["verdict"]
    assert entry["candidate"]["taskset_id"] == "tiny-glossary" and entry["budget"]["examples_run"] == 5
    assert entry["stats"]["strong"]["mean"] == 1.0
    target = root / entry["outputs"] / "target"
    assert (target / "configs" / "resolved" / "eval.json").is_file()
    replay_cli = "import sys; from verifiers.v1.cli.replay import main; sys.argv[0] = 'vf-replay'; sys.exit(main())"
    replay = subprocess.run([str(python_of(GLOSSARY)), "-c", replay_cli, str(target), "--output-dir",  # its own venv
                             str(root.parent / "replayed"), "--rich", "False"], capture_output=True, text=True, timeout=300,
                            cwd=root)
    assert replay.returncode == 0, replay.stdout[-2000:] + replay.stderr[-2000:]
    replayed = [json.loads(line) for line in (root.parent / "replayed" / "traces.jsonl").read_text().splitlines()]
    assert len(replayed) == 10 and "5 tasks x 2 rollouts" in result.stdout

    result = autoenv("eval", "--offline", "--env", str(DUEL), cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    entry = ledger(root)[-1]
    assert entry["verdict"]["verdict"] == "inconclusive"
    assert entry["verdict"]["reason"].startswith("no reference policy") and "def oracle" in entry["verdict"]["reason"]
    assert entry["stats"] == {} and entry["candidate"]["reward_range"] == [-2.0, 2.0]
    assert "no rollout was run" in entry["verdict"]["reason"]
    env = entry["environment"]
    assert "nothing to play" in (root / "feedback" / "env" / f"{env['id']}@{env['content_hash'][:12]}"
                                 / f"{entry['run_id']}.md").read_text()  # one file per env evaluation
    assert not (root / "feedback" / f"{entry['commit']}.md").exists()  # never a run commit's feedback
