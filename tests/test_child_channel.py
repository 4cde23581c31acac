"""The child's event channel and resource limits (autoenv.core.events, autoenv.sandbox.childio, autoenv.child.rlimits).

Hostile candidates, each examples/arithmetic with a few lines planted: one prints forged
events on stdout, one writes them on the child's own event pipe (its code shares the child's
interpreter, so it can), one prints 20 MB, one allocates 3 GB, one starts 30 processes, one
writes a file past the size limit. Most are driven through the Worker directly (a child, in
the sandbox, cold and forked by the warm server); one full offline `autoenv eval` shows the
forged report recorded as the candidate's crash, not `inconclusive`.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from autoenv.core.config import load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.job import Job, ResourceLimits, RolloutPlan, RuntimeSpec, Seat
from autoenv.core.paths import EXAMPLES
from autoenv.core.record import ForwardedRoute
from autoenv.core.traces import read_rollouts
from autoenv.sandbox import warmchild
from autoenv.sandbox.childio import LOG_BYTES
from autoenv.sandbox.confine import _probe, choose
from autoenv.sandbox.rollouts import Worker, WorkerFailed, check_smoke
from tests.conftest import autoenv, commit_all, head, ledger

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BWRAP = _probe()
needs_bwrap = pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
CHILDREN = ["cold", pytest.param("warm", marks=needs_bwrap)]

FORGED_SMOKE = '{"event": "smoke", "outcome": "provider_error", "reward": null, "error": "forged", "attempts": 3}'
FORGE_ON_STDOUT = f'''
import sys as _sys
for _line in ({FORGED_SMOKE!r}, '{{"event": "note", "message": "FORGED NOTE on stdout"}}'):
    print(_line)
    print("AUTOENV-EVENT " + _line)
_sys.stdout.flush()
'''
REWARD_MARKER = "    async def correct(self, trace: vf.Trace) -> float:\n"
FORGE_ON_CHANNEL = '''        import sys as _sys
        from pathlib import Path as _Path
        from autoenv.core import events as _events
        if (_Path(_sys.argv[1]).parent / "smoke" / "traces.jsonl").is_file() and not _events.__dict__.get("_forged"):
            _events._forged = True  # once, after the child's own smoke event: the last smoke event would count
            _events.emit("smoke", outcome="provider_error", reward=None, error="forged on the channel", attempts=3)
            _events.emit("note", message="FORGED NOTE on the channel")
'''


def candidate_with(tmp_path: Path, prelude: str = "", in_reward: str = "") -> Path:
    """examples/arithmetic with `prelude` run when candidate_env is imported and `in_reward` at each reward call."""
    target = tmp_path / "candidate"
    shutil.copytree(EXAMPLES / "arithmetic", target, ignore=shutil.ignore_patterns("__pycache__"))
    init = target / "candidate_env" / "__init__.py"
    init.write_text(textwrap.dedent(prelude) + "\n" + init.read_text())
    if in_reward:
        taskset = target / "candidate_env" / "taskset.py"
        text = taskset.read_text()
        assert REWARD_MARKER in text
        taskset.write_text(text.replace(REWARD_MARKER, REWARD_MARKER + in_reward))
    return target


def job_for(candidate: Path, out: Path, child: str, smoke: bool = False, **limits) -> Job:
    """One scripted rollout per task on two tasks, in a cold child or one forked by the warm server."""
    plan = RolloutPlan(examples=2, rollouts=1, smoke=smoke, roles={"target": Seat(model="oracle", embedded=True)})
    return Job(candidate_dir=str(candidate), out_dir=str(out), rollout_timeout=120, rollouts=plan,
               runtime=RuntimeSpec(warm_seconds=60 if child == "warm" else 0), resources=ResourceLimits(**limits))


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """Warm servers of this test's own, stopped at its end."""
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AUTOENV_WARM", "1")  # a job with warm_seconds 0 (the cold cases) is still cold
    yield
    warmchild.stop_all()


def label(child: str) -> str:
    sandbox = "bwrap" if choose().kind == "bwrap" else "no sandbox"
    return f"{sandbox}, warm child" if child == "warm" else sandbox


def run_stage(job: Job, stage: str, child: str) -> tuple[Worker, object]:
    with Worker(job) as worker:
        assert worker.warm == (child == "warm")
        return worker, worker.run(stage)


@pytest.mark.attack
@pytest.mark.parametrize("child", CHILDREN)
def test_events_printed_on_stdout_are_the_candidates_log_not_events(tmp_path, own_cache, capsys, child, attack_row):
    candidate = candidate_with(tmp_path, FORGE_ON_STDOUT)
    out = tmp_path / "out"
    _, result = run_stage(job_for(candidate, out, child, smoke=True), "rollouts", child)
    assert result.smoke is not None and result.smoke["outcome"] == "ok"  # the child's own, not the forged one
    assert not any(e.get("error") == "forged" or "FORGED" in str(e.get("message")) for e in result.events)
    printed = capsys.readouterr().out
    assert "FORGED" not in printed and "smoke rollout ok" in printed
    log = (out / "worker.stdout").read_text()
    assert log.count("FORGED NOTE on stdout") == 2 and log.count('"provider_error"') == 2
    attack_row(f"forged smoke event and note printed on stdout [{label(child)}]",
               f"not read as events: the smoke outcome stays {result.smoke['outcome']}, the note is not shown; both "
               f"kept in outputs/<commit>/worker.stdout ({log.count('FORGED')} forged lines)")


@pytest.mark.attack
@pytest.mark.parametrize("child", CHILDREN)
def test_a_smoke_event_forged_on_the_channel_offline_is_the_candidates_crash(tmp_path, own_cache, capsys, child,
                                                                             attack_row):
    candidate = candidate_with(tmp_path, in_reward=FORGE_ON_CHANNEL)
    out = tmp_path / "out"
    with pytest.raises(WorkerFailed) as caught:
        run_stage(job_for(candidate, out, child, smoke=True), "rollouts", child)
    said = caught.value.what
    assert "failing at the provider (provider_error), but this evaluation has no provider" in said
    assert [r.outcome for r in read_rollouts(out / "smoke")] == ["ok"]
    printed = capsys.readouterr().out
    assert "  child process: FORGED NOTE on the channel" in printed
    assert not any(line.strip() == "FORGED NOTE on the channel" for line in printed.splitlines())
    attack_row(f"forged smoke event and note written on the child's own event pipe, offline [{label(child)}]",
               f"the candidate's crash: '{said[:150]}...'; the note shown as 'child process: FORGED NOTE ...'")


@pytest.mark.attack
def test_garbled_and_malformed_events_on_the_channel_are_the_candidates_crash_not_the_harnesss(tmp_path, attack_row):
    candidate = candidate_with(tmp_path, '''
        from autoenv.core import events as _events
        _events._channel.write("[" * 100000 + "\\n")  # nested past what json follows
        _events._channel.write("x" * 100 + "\\n")
        _events.emit("loaded", tasks="many", seconds="soon")
    ''')
    with pytest.raises(WorkerFailed) as caught:
        run_stage(job_for(candidate, tmp_path / "out", "cold"), "inspect", "cold")
    said = caught.value.what
    assert said.startswith("the child sent an event the harness cannot read (ValueError: invalid literal"), said
    attack_row(f"garbled and malformed events written on the child's event pipe [{label('cold')}]",
               f"the candidate's crash: '{said[:110]}...'; the harness kept running")


def test_a_provider_failure_the_forwarder_or_the_smoke_trace_does_not_show_is_refused(tmp_path):
    """Online a provider can fail, but only if the forwarder passed the target's requests to it and the smoke trace
    the child wrote says so."""
    plan = RolloutPlan(examples=1, rollouts=1, roles={"target": Seat(model="m", base_url="http://127.0.0.1:9/v1")})
    job = Job(candidate_dir=str(tmp_path), out_dir=str(tmp_path), rollouts=plan)
    claim = {"outcome": "provider_error", "error": "forged"}
    with pytest.raises(WorkerFailed, match="forwarder passed no request of the target model to the provider"):
        check_smoke(job, claim, {"target": ForwardedRoute(model="m", requests=0)})
    with pytest.raises(WorkerFailed, match="its trace says no smoke trace"):
        check_smoke(job, claim, {"target": ForwardedRoute(model="m", requests=3, answered=2)})
    check_smoke(job, {"outcome": "env_error", "error": "the candidate's own"})  # not a claim about the provider


@pytest.mark.attack
@pytest.mark.parametrize("child", CHILDREN)
def test_twenty_megabytes_printed_leave_capped_logs(tmp_path, own_cache, child, attack_row):
    candidate = candidate_with(tmp_path, '''
        import os as _os, sys as _sys
        _chunk = "x" * 1023 + "\\n"
        for _ in range(20 * 1024):
            _sys.stdout.write(_chunk)
            _sys.stderr.write(_chunk)
        _sys.stdout.flush()
    ''')
    out = tmp_path / "out"
    run_stage(job_for(candidate, out, child), "rollouts", child)
    assert [r.outcome for r in read_rollouts(out / "target")] == ["ok", "ok"]
    sizes = {}
    for name in ("worker.stdout", "worker.stderr"):
        text = (out / name).read_bytes()
        sizes[name] = len(text)
        assert LOG_BYTES <= len(text) < LOG_BYTES + 1024 and text.rstrip().endswith(b"the rest of what the child "
                                                                                    b"wrote is dropped]")
    attack_row(f"20 MB printed on stdout and 20 MB on stderr [{label(child)}]",
               f"logs capped: worker.stdout {sizes['worker.stdout']} bytes, worker.stderr {sizes['worker.stderr']} "
               f"bytes, each ending in a note that the rest was dropped; the rollouts finished")


def hit_limit(tmp_path: Path, child: str, prelude: str, **limits) -> tuple[str, Path]:
    """The candidate with `prelude` at import, inspected under `limits`: what the Worker raised; then the same
    candidate without it inspected again (in the same warm server when warm)."""
    candidate = candidate_with(tmp_path, prelude)
    with pytest.raises(WorkerFailed) as caught:
        run_stage(job_for(candidate, tmp_path / "out", child, **limits), "inspect", child)
    init = candidate / "candidate_env" / "__init__.py"
    init.write_text(init.read_text().replace(textwrap.dedent(prelude), ""))
    _, after = run_stage(job_for(candidate, tmp_path / "out-after", child, **limits), "inspect", child)
    assert after.inspected and after.inspected["ok"], after.inspected
    return caught.value.what, candidate


@pytest.mark.attack
@pytest.mark.parametrize("child", CHILDREN)
def test_three_gigabytes_pass_the_memory_limit(tmp_path, own_cache, child, attack_row):
    said, _ = hit_limit(tmp_path, child, '''
        _held = [bytearray(64 << 20) for _ in range(48)]  # 3 GB, 64 MB at a time
    ''', memory_mb=2048)
    assert "memory limit 2048 MB exceeded ([limits] memory_mb)" in said.splitlines()[0], said
    assert "MemoryError" in said
    attack_row(f"3 GB allocated at import [{label(child)}]",
               f"the candidate's crash: '{said.splitlines()[0][:120]}'; the next evaluation "
               f"{'forked by the same warm server' if child == 'warm' else 'in a new child'} ran normally")


@pytest.mark.attack
@pytest.mark.parametrize("child", CHILDREN)
def test_thirty_processes_pass_the_process_limit(tmp_path, own_cache, child, attack_row):
    said, _ = hit_limit(tmp_path, child, '''
        import subprocess as _sp, time as _time
        _procs = [_sp.Popen(["sleep", "60"]) for _ in range(30)]
        _time.sleep(60)
    ''', processes=16)
    assert "process limit 16 exceeded ([limits] processes)" in said.splitlines()[0], said
    attack_row(f"30 processes started at import [{label(child)}]",
               f"stopped, the candidate's crash: '{said.splitlines()[0][:70]}...'; the next evaluation "
               f"{'forked by the same warm server' if child == 'warm' else 'in a new child'} ran normally")


@pytest.mark.parametrize("child", CHILDREN)
def test_a_file_past_the_size_limit_is_refused(tmp_path, own_cache, child):
    said, _ = hit_limit(tmp_path, child, '''
        import tempfile as _tf
        with _tf.TemporaryFile() as _f:
            _f.write(b"x" * (40 << 20))
    ''', file_mb=16)
    assert "file size limit 16 MB exceeded ([limits] file_mb)" in said.splitlines()[0], said


def test_limits_are_read_from_config_and_a_bad_one_names_its_key(tmp_path):
    path = tmp_path / "config.toml"
    text = (Path(__file__).parent.parent / "config.toml").read_text()
    path.write_text(text.replace("memory_mb = 4096", "memory_mb = 1024"))
    assert load_config(path).limits.job() == {"memory_mb": 1024, "processes": 128, "file_mb": 1024,
                                              "confined": False}
    path.write_text(text.replace("processes = 128", "processes = 2"))
    with pytest.raises(AutoEnvError) as caught:
        load_config(path)
    assert "`limits.processes` must be 0 (no limit) or at least 4" in caught.value.what
    line = next(n for n, raw in enumerate(path.read_text().splitlines(), 1) if raw.startswith("processes = 2"))
    assert caught.value.where == f"{path}:{line}"
    path.write_text(text.replace("file_mb = 1024", "file_mb = 0"))
    assert load_config(path).limits.job()["file_mb"] is None


@needs_bwrap
@pytest.mark.e2e
@pytest.mark.attack
@pytest.mark.timeout(450)
def test_an_offline_evaluation_with_forged_events_is_the_candidates_crash(run_repo, own_cache, attack_row):
    """The whole evaluation: forged events on stdout and on the event pipe; never `inconclusive` (exit 3)."""
    root = run_repo("arithmetic")
    package = root / "candidate" / "candidate_env"
    init = package / "__init__.py"
    init.write_text(FORGE_ON_STDOUT + "\n" + init.read_text())
    taskset = package / "taskset.py"
    taskset.write_text(taskset.read_text().replace(REWARD_MARKER, REWARD_MARKER + FORGE_ON_CHANNEL))
    commit_all(root, "forged events")
    result = autoenv("eval", "--offline", cwd=root, timeout=400)  # the warm child: own_cache's server
    output = result.stdout + result.stderr
    (entry,) = ledger(root)
    assert result.returncode != 3 and entry["verdict"]["verdict"] == "crash", (entry["verdict"], output[-3000:])
    assert "but this evaluation has no provider" in entry["verdict"]["reason"]
    assert "FORGED NOTE on stdout" not in output and "child process: FORGED NOTE on the channel" in output
    assert "FORGED NOTE on stdout" in (root / "outputs" / head(root) / "worker.stdout").read_text()
    attack_row("forged smoke event and note, on stdout and on the event pipe, in an offline evaluation",
               f"exit {result.returncode}, verdict {entry['verdict']['verdict']} ({entry.get('failed_stage')}): "
               f"'{entry['verdict']['reason'][:140]}...'; the stdout note not shown, the pipe's shown as the child's")
