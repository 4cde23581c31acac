"""The OpenEnv example (examples/openenv-codebreaker) and the export checklist's static checks."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import autoenv, head, ledger, small_config
from test_e2e import check_offline_baseline

from autoenv.core.paths import EXAMPLES
from autoenv.export.check import manifest_checks, reserved_names, separation_static
from autoenv.sandbox.serverenv import server_packages, venv_dir

EXAMPLE = EXAMPLES / "openenv-codebreaker"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_holds_one_openenv_server_outside_the_candidate_module():
    assert server_packages(EXAMPLE) == [EXAMPLE / "codebreaker_env"]
    assert not (EXAMPLE / "candidate_env" / "openenv.yaml").exists()  # the import gate must not meet openenv


def test_launcher_and_harness_agree_on_the_server_venv():
    """The install stage builds the venv the candidate's launcher looks for (the sandbox has no network)."""
    launcher = _module(EXAMPLE / "candidate_env" / "launcher.py", "codebreaker_launcher")
    package = EXAMPLE / "codebreaker_env"
    assert launcher.venv_dir(package) == venv_dir(package)
    assert launcher.SERVER_PACKAGE == package.resolve()


def test_the_oracle_strategy_only_plays_codes_consistent_with_the_feedback():
    solver = _module(EXAMPLE / "candidate_env" / "solver.py", "codebreaker_solver")
    secret = "3415"
    history = []
    for _ in range(10):
        guess = solver.next_guess(4, "0123456789", history)
        for row in history:
            assert solver.bulls_cows(guess, row["guess"]) == (row["bulls"], row["cows"])
        bulls, cows = solver.bulls_cows(secret, guess)
        history.append({"guess": guess, "bulls": bulls, "cows": cows, "valid": True})
        if bulls == 4:
            break
    assert history[-1]["guess"] == secret and len(history) <= 10


def test_the_manifest_of_the_example_has_the_validation_block():
    checks = {c.name: c for c in manifest_checks(EXAMPLE / "codebreaker_env")}
    assert checks["manifest.keys"].status == "PASS"
    assert checks["manifest.validation_block"].status == "PASS"


def test_static_checks_catch_a_client_importing_the_server_and_a_reserved_tool(tmp_path):
    bad = tmp_path / "bad_env"
    (bad / "server").mkdir(parents=True)
    (bad / "openenv.yaml").write_text("spec_version: 1\nname: bad\ntype: space\nruntime: fastapi\napp: server.app:app\n")
    (bad / "client.py").write_text("from .server.environment import BadEnvironment\n")
    (bad / "models.py").write_text("import os\n")
    (bad / "server" / "tools.py").write_text("@mcp.tool()\ndef reset():\n    return 1\n\ndef step():\n    return 2\n")
    assert separation_static(bad).status == "FAIL"
    assert "client.py: .server.environment" in separation_static(bad).detail
    reserved = reserved_names(bad)
    assert reserved.status == "FAIL" and "reset" in reserved.detail and "step" not in reserved.detail
    keys, block = manifest_checks(bad)
    assert keys.status == "FAIL" and "port" in keys.detail
    assert block.status == "FAIL"
    (bad / "client.py").write_text("from openenv.core.env_client import EnvClient\nfrom .models import X\n")
    assert separation_static(bad).status == "PASS"


@pytest.mark.e2e
def test_the_openenv_example_evaluates_offline_and_exports_a_package_that_passes_the_checklist(run_repo):
    """Gates (oracle and exploits through the endpoint, in the sandbox), rollouts, judge; then export + --check."""
    root = run_repo("openenv-codebreaker", small_config(rollout_sample=2), run_base=True)
    commit = head(root)
    proc = autoenv("eval", "--offline", "-d", "codebreaker baseline", cwd=root, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    check_offline_baseline(root, commit, proc, "codebreaker baseline")  # as every clean example's (test_e2e.py)
    entry = ledger(root)[-1]
    assert entry["verdict"]["verdict"] == "baseline", entry["verdict"]
    probes = entry["gates"]["probes"]
    assert probes["oracle"]["mean"] == 1.0 and probes["echo"]["mean"] == 0.0 and probes["garbage"]["mean"] == 0.0
    assert set(entry["stats"]["strong"]["components"]) == {"solved", "consistent", "well_formed"}
    assert entry["stats"]["strong"]["mean"] == 1.0

    proc = autoenv("export", "openenv", cwd=root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    package = root / "export" / "openenv" / "codebreaker_env"
    readme = (package / "README.md").read_text()
    assert "| `solved` | 0.5 |" in readme and "echo" in readme
    assert json.loads((package / ".autoenv" / "export.json").read_text())["kind"] == "openenv"
    proc = autoenv("export", "openenv", "--check", str(package), cwd=root, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for name in ("manifest.static", "separation.runtime", "validate.url", "episode.oracle"):
        assert f"PASS  {name}" in proc.stdout, proc.stdout
