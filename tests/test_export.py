"""`autoenv export openenv|grpo` on a real offline evaluation of examples/arithmetic."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import autoenv, ledger, small_config

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import EXAMPLES
from autoenv.export.check import separation_static
from autoenv.export.grpo import _refuse_multi_turn
from autoenv.run.demo import make_run_repo
from autoenv.sandbox.confine import cache_home

pytestmark = pytest.mark.slow
TORCH_PIN = "torch==2.13.0"  # a CPU wheel on this machine's disk; plain `torch` would fetch a CUDA build
SMOKE_PACKAGES = ["trl==1.16.0", "datasets", "verifiers==0.4.0"]


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory) -> Path:
    """An arithmetic run with one offline evaluation: its baseline is the kept commit."""
    root = make_run_repo("arithmetic", tmp_path_factory.mktemp("export") / "run", small_config(examples=6))
    proc = autoenv("eval", "--offline", "-d", "baseline", cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ledger(root)[-1]["verdict"]["verdict"] == "baseline"
    return root


def test_export_openenv_wraps_a_single_turn_candidate(kept_run):
    proc = autoenv("export", "openenv", cwd=kept_run)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    package = kept_run / "export" / "openenv" / "demo_arithmetic_env"
    for name in ("openenv.yaml", "pyproject.toml", "Dockerfile", "README.md", "client.py", "models.py",
                 "server/app.py", "server/environment.py", "server/tasks.py", "candidate/pyproject.toml"):
        assert (package / name).is_file(), name
    assert "| `correct` | 1 |" in (package / "README.md").read_text()
    assert "WEIGHTS: dict[str, float] = {'correct': 1.0}" in (package / "server" / "environment.py").read_text()
    assert separation_static(package).status == "PASS"
    info = json.loads((package / ".autoenv" / "export.json").read_text())
    assert info["kind"] == "wrapped" and info["commit"] == ledger(kept_run)[-1]["commit"]


@pytest.mark.e2e
def test_export_openenv_check_passes_on_the_wrapped_arithmetic(kept_run):
    package = kept_run / "export" / "openenv" / "demo_arithmetic_env"
    if not package.is_dir():
        assert autoenv("export", "openenv", cwd=kept_run).returncode == 0
    proc = autoenv("export", "openenv", "--check", str(package), cwd=kept_run, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for name in ("manifest.static", "separation.runtime", "server.start", "validate.url", "episode.oracle"):
        assert f"PASS  {name}" in proc.stdout, proc.stdout


def test_export_grpo_holds_out_the_evaluated_tasks_and_orders_levels(kept_run):
    proc = autoenv("export", "grpo", "--trainer", "trl", cwd=kept_run, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = kept_run / "export" / "grpo-trl"
    train = [json.loads(x) for x in (out / "dataset" / "train.jsonl").read_text().splitlines()]
    evals = [json.loads(x) for x in (out / "dataset" / "eval.jsonl").read_text().splitlines()]
    held = {row["key"] for row in json.loads(next((kept_run / "outputs").glob("*/tasks.json")).read_text())}
    assert {r["key"] for r in evals} == held and len(held) == 6
    assert not held & {r["key"] for r in train} and len(train) + len(evals) == 1000
    assert json.loads((out / "rewards.json").read_text()) == {"correct": 1.0}
    curriculum = json.loads((out / "curriculum.json").read_text())
    levels = [level["difficulty"] for level in curriculum["levels"]]
    assert sorted(levels) == ["easy", "hard", "medium"] and curriculum["order"]  # which order, said
    order = {level: i for i, level in enumerate(levels)}
    assert [order[r["difficulty"]] for r in train] == sorted(order[r["difficulty"]] for r in train)
    assert "NUM_GENERATIONS = 2" in (out / "train_trl.py").read_text()  # the small budget's group size
    assert "Unlock the next level" in (out / "README.md").read_text()
    proc = autoenv("export", "grpo", "--trainer", "prime-rl", cwd=kept_run)
    assert proc.returncode == 0 and "rollouts_per_example = 2" in (kept_run / "export" / "grpo-prime-rl" /
                                                                   "prime-rl.toml").read_text()


def test_the_trl_export_refuses_a_multi_turn_candidate():
    with pytest.raises(AutoEnvError, match="prime-rl"):
        _refuse_multi_turn(SimpleNamespace(candidate=EXAMPLES / "openenv-codebreaker", root=EXAMPLES))


@pytest.fixture(scope="session")
def smoke_python() -> Path:
    """A cached venv for the TRL smoke: torch pinned first (the CPU wheel on disk), then TRL and verifiers."""
    key = hashlib.sha256(" ".join([TORCH_PIN, *SMOKE_PACKAGES, sys.version]).encode()).hexdigest()[:12]
    venv = cache_home() / "autoenv" / "grpo-smoke" / key
    python = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".ready").is_file():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            for packages in ([TORCH_PIN], SMOKE_PACKAGES):
                subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True, timeout=1800)
            (venv / ".ready").write_text("ok\n")
    return python


@pytest.mark.e2e
def test_the_exported_trl_script_runs_grpo_steps_on_cpu(kept_run, smoke_python, tmp_path):
    out = kept_run / "export" / "grpo-trl"
    if not (out / "train_trl.py").is_file():
        assert autoenv("export", "grpo", "--trainer", "trl", cwd=kept_run, timeout=600).returncode == 0
    subprocess.run([str(smoke_python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(out / "candidate")],
                   check=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([str(smoke_python), str(out / "train_trl.py"), "--tiny", "--max-steps", "2",
                           "--output-dir", str(tmp_path / "run")], cwd=out, env=env, capture_output=True, text=True,
                          timeout=1200, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["steps"] == 2


def test_the_default_commit_is_the_newest_kept_of_the_run_checked_out():
    from autoenv.core.record import Entry, Environment, Verdict
    from autoenv.export.source import newest_kept

    def entry(commit: str, branch: str, verdict: str, env: bool = False) -> Entry:
        return Entry(commit=commit * 40, timestamp="-", eval_success=True, branch=branch,
                     verdict=Verdict(verdict=verdict, reason="-"),
                     environment=Environment(id="k", source="s", content_hash="h") if env else None)

    entries = [entry("a", "autoenv/one", "baseline"), entry("b", "autoenv/one", "keep"),
               entry("c", "autoenv/one", "discard"), entry("d", "autoenv/two", "keep"),
               entry("e", "autoenv/one", "baseline", env=True)]
    assert newest_kept(entries, "autoenv/one").commit == "b" * 40  # not two's newer keep, not the --env one
    assert newest_kept(entries, "autoenv/two").commit == "d" * 40
    assert newest_kept(entries, None).commit == "d" * 40  # detached: the newest kept of any run
    assert newest_kept(entries, "autoenv/three").commit == "d" * 40
    assert newest_kept(entries[2:3], "autoenv/one") is None


def test_the_readme_lists_as_passed_only_the_probes_whose_finding_passed(tmp_path):
    from autoenv.core.record import GateFinding, GateReport, ProbeSummary
    from autoenv.export.source import Kept
    from tests.test_judge import make_entry

    summary = dict(description="d", mean=0.0, tasks=5, scored=5, skipped=0, errors=0)
    gates = GateReport(findings=[GateFinding(name=f"probe {n}", status=s, message="m") for n, s in
                                 (("echo", "pass"), ("garbage", "fail"), ("stall", "skip"), ("padding", "warn"))],
                       probes={n: ProbeSummary(**summary) for n in ("oracle", "echo", "garbage", "stall", "padding")})
    kept = Kept(root=tmp_path, entry=make_entry(gates=gates), candidate=tmp_path, components=[])
    assert kept.passed_probes == ["echo"]  # not the failed, the warned, nor the n/a one
