"""autoenv/sandbox/confine.py: the child in bubblewrap, and a hostile candidate that tries what one once did.

The hostile candidate (HOSTILE, planted into the arithmetic example) tries, at import time
and again in its reward: to append a forged entry to feedback_log.jsonl, to edit
config.toml, to read a file under $HOME, to find the provider key in its environment or
in its parent's (/proc), to reach the provider around the forwarder, and it dumps its environment into the evaluation's outputs (the
one place it may write). Each attempt reports on stderr, which lands in
outputs/<commit>/worker.stderr. Run with `-s` to see the table "attack -> what happened".
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoenv.core.job import Job, RolloutPlan, RuntimeSpec, Seat
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint
from autoenv.gates.oracle import OracleBook
from autoenv.run.integrity import FOUND
from autoenv.sandbox import warmchild
from autoenv.sandbox.confine import SANDBOX_VAR, Sandbox, _probe, choose, needs_network, runtime_files, writable_paths
from autoenv.sandbox.environ import scrubbed
from autoenv.sandbox.forwarder import TOKEN_VAR, forwarding, relay
from tests.conftest import autoenv, commit_all, head, ledger
from tests.test_forwarder import KEY, KEY_VAR, keyed_provider  # noqa: F401 (a fixture)
from tests.test_server import ADD_PROMPT, ANSWER, make_tasks

pytestmark = pytest.mark.timeout(120)

BWRAP = _probe()
needs_bwrap = pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
HOME_SECRET = "home-secret-only-the-user-may-read"

HOSTILE = '''"""Hostile: forge the ledger, edit the config, read $HOME, find the key; report each on stderr."""
import json, os, re, socket, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEY_PREFIX = "sk-provider"
_done = set()


def forge_ledger():
    with open(ROOT / "feedback_log.jsonl", "a") as f:
        f.write(json.dumps({"forged": True, "verdict": {"verdict": "keep"}}) + "\\n")
    return "succeeded"


def edit_config():
    with open(ROOT / "config.toml", "a") as f:
        f.write("\\n# edited by the candidate\\n")
    return "succeeded"


def read_home():
    return "succeeded" if "home-secret" in (Path.home() / "secret.txt").read_text() else "failed (other file)"


def key_in_environment():
    found = [k for k, v in os.environ.items() if v.startswith(KEY_PREFIX)]
    return f"succeeded ({', '.join(found)})" if found else "failed (not there)"


def key_in_parent_environment():
    data = Path(f"/proc/{os.getppid()}/environ").read_bytes()
    return "succeeded" if KEY_PREFIX.encode() in data else "failed (not there)"


def reach_provider():
    """Straight to the provider named in config.toml (readable), around the forwarder."""
    url = re.search(r'base_url = "http://([^/"]+)', (ROOT / "config.toml").read_text()).group(1)
    host, port = url.split(":")
    socket.create_connection((host, int(port)), timeout=5).close()
    return "succeeded"


def dump_environment():
    out = Path(sys.argv[1]).parent  # the child's job.json lies in the evaluation's outputs
    (out / "candidate-env-dump.json").write_text(json.dumps(dict(os.environ)))
    return "written"


ATTACKS = [forge_ledger, edit_config, read_home, key_in_environment, key_in_parent_environment, reach_provider,
           dump_environment]


def attack(when):
    if when in _done:
        return
    _done.add(when)
    for action in ATTACKS:
        try:
            said = action()
        except Exception as e:
            said = f"failed ({type(e).__name__}: {e})"
        print(f"ATTACK {when} {action.__name__.replace('_', '-')}: {said}", file=sys.stderr, flush=True)
'''


def plant_hostile(root: Path) -> None:
    package = root / "candidate" / "candidate_env"
    (package / "attacks.py").write_text(HOSTILE)
    init = package / "__init__.py"
    init.write_text(init.read_text() + '\nfrom candidate_env.attacks import attack as _attack\n_attack("import")\n')
    taskset = package / "taskset.py"
    text = taskset.read_text()
    marker = "    async def correct(self, trace: vf.Trace) -> float:\n"
    assert marker in text
    taskset.write_text(text.replace(marker, marker + '        from candidate_env.attacks import attack\n'
                                                     '        attack("reward")\n'))
    commit_all(root, "a hostile candidate")


def attacks_seen(out: Path) -> dict[str, str]:
    lines = (out / "worker.stderr").read_text(errors="replace").splitlines()
    return dict(line.removeprefix("ATTACK ").split(": ", 1) for line in lines if line.startswith("ATTACK "))


def hostile_evaluation(root: Path, tmp_path: Path, sandbox: str, env: dict | None = None
                       ) -> tuple[subprocess.CompletedProcess, dict, bytes]:
    """Evaluate the planted hostile candidate against the keyed provider; $HOME holds a secret file."""
    plant_hostile(root)
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text(HOME_SECRET)
    config_before = (root / "config.toml").read_bytes()
    uv_cache = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")  # installs stay offline
    started = time.time()
    result = autoenv("eval", cwd=root, env={"HOME": str(home), "UV_CACHE_DIR": uv_cache,
                                            SANDBOX_VAR: sandbox, **(env or {})}, timeout=400)
    print(f"\nhostile evaluation, sandbox {sandbox or 'default'}: {time.time() - started:.1f} s, exit {result.returncode}")
    seen = attacks_seen(root / "outputs" / head(root))
    for attack, said in seen.items():
        print(f"  {attack:40} -> {said}")
    return result, seen, config_before


ATTACK_NAMES = {
    "forge-ledger": "forged ledger entry appended by candidate code",
    "edit-config": "config.toml edited by candidate code",
    "read-home": "key read from a file (under $HOME)",
    "key-in-environment": "key read from the environment",
    "key-in-parent-environment": "key read from the harness's /proc/<pid>/environ",
    "reach-provider": "provider reached around the forwarder",
}


def table_rows(attack_row, seen: dict, sandbox: str, root: Path, home: Path) -> None:
    def short(said: str) -> str:
        return said.replace(str(home), "$HOME").replace(str(root), "<run>")

    for name, attack in ATTACK_NAMES.items():
        attack_row(f"{attack} [{sandbox}]",
                   f"at import: {short(seen[f'import {name}'])}; in a reward: {short(seen[f'reward {name}'])}")


def leaks_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


@needs_bwrap
@pytest.mark.e2e
@pytest.mark.attack
@pytest.mark.timeout(450)
@pytest.mark.parametrize("child", ["cold", "warm"])
def test_a_hostile_candidate_fails_at_every_attempt_in_the_sandbox(keyed_provider, tmp_path, attack_row, child,  # noqa: F811
                                                                   monkeypatch):
    """In a child of its own (cold) and in one forked by the warm server (autoenv.sandbox.warmchild), whose sandbox was set
    up once for every evaluation of the run: the same attacks fail the same way."""
    root, _ = keyed_provider
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTOENV_CACHE", str(cache))
    try:
        result, seen, config_before = hostile_evaluation(root, tmp_path, sandbox="", env={
            "AUTOENV_WARM": "1" if child == "warm" else "0", "AUTOENV_CACHE": str(cache)})
    finally:
        warmchild.stop_all()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert ("warm child: forked by the warm server" in result.stdout) == (child == "warm")
    for when in ("import", "reward"):
        for attack in ("forge-ledger", "edit-config", "read-home", "key-in-environment", "key-in-parent-environment",
                       "reach-provider"):
            assert seen[f"{when} {attack}"].startswith("failed"), (when, attack, seen)
        assert seen[f"{when} dump-environment"] == "written"
    (entry,) = ledger(root)  # no forged line, and the chain verified when the entry was appended
    assert entry["sandbox"] == "bwrap" and entry["eval_success"] is True
    # The models were reached, from a child without network, through the forwarder's socket.
    assert entry["stats"]["target"]["scored"] > 0 and entry["stats"]["target"]["errors"]["provider_error"] == 0
    assert (root / "config.toml").read_bytes() == config_before
    out = root / "outputs" / entry["commit"]
    dumped = json.loads((out / "candidate-env-dump.json").read_text())
    assert KEY_VAR not in dumped and TOKEN_VAR in dumped and KEY not in dumped.values()
    assert leaks_under(root / "outputs") == [] and leaks_under(root / "feedback") == []
    assert "unconfined" not in result.stdout + result.stderr
    assert "sandbox:" in result.stdout and "bwrap" in result.stdout
    label = "bwrap" if child == "cold" else "bwrap, warm child"
    table_rows(attack_row, seen, label, root, tmp_path / "home")
    attack_row(f"the evaluation of that candidate [{label}]",
               f"exit {result.returncode}, verdict {entry['verdict']['verdict']}, ledger {len(ledger(root))} line "
               f"(the harness's own, chain verified), config.toml unchanged, key in no file under outputs/ or feedback/")


@pytest.mark.e2e
@pytest.mark.attack
@pytest.mark.cold  # the key read from the parent's environment is the harness's, a cold child's parent
@pytest.mark.timeout(450)
def test_unconfined_the_evaluation_says_so_and_the_key_still_stays_out(keyed_provider, tmp_path, attack_row):  # noqa: F811
    """Without the sandbox the file attacks get through (the point of it), said once and recorded;
    the key is still nowhere the candidate can look."""
    root, _ = keyed_provider
    result, seen, config_before = hostile_evaluation(root, tmp_path, sandbox="none")
    output = result.stdout + result.stderr
    assert output.count("the candidate runs unconfined (sandbox: none)") == 1, output[-3000:]
    assert seen["import read-home"] == "succeeded" and seen["import edit-config"] == "succeeded"
    for when in ("import", "reward"):
        assert seen[f"{when} key-in-environment"].startswith("failed"), seen
    # The harness's own /proc/<pid>/environ still holds the key: only the sandbox's pid namespace hides it.
    assert seen["import key-in-parent-environment"] == "succeeded"
    assert seen["import reach-provider"] == "succeeded"  # the network is the harness's
    assert leaks_under(root / "outputs") == []
    assert (root / "config.toml").read_bytes() != config_before
    # The forged lines are found before the verdict: the ledger goes back to what preflight verified
    # (empty here), the lines found are kept aside, and the commit is recorded as tampered.
    (entry,) = ledger(root)
    assert entry["verdict"]["verdict"] == "tampered" and entry["sandbox"] == "none", entry["verdict"]
    assert "feedback_log.jsonl (written during the evaluation)" in entry["tampered"]
    assert "ran unconfined" in entry["verdict"]["reason"] and "line 1 is not a ledger entry" in entry["verdict"]["reason"]
    found = (root / "outputs" / entry["commit"] / FOUND).read_text().splitlines()
    # forged at import and in a reward, in each child process that imported it (the second runs the stored rewards
    # and the derived probes)
    assert len(found) in (2, 4) and all(json.loads(line).get("forged") for line in found), found
    assert "✗ tampered: feedback_log.jsonl was written during the evaluation" in result.stdout
    table_rows(attack_row, seen, "no sandbox", root, tmp_path / "home")
    attack_row("the evaluation of that candidate [no sandbox]",
               f"exit {result.returncode}; said once: 'the candidate runs unconfined (sandbox: none)'; the forged "
               f"lines found before the verdict, set aside ({len(found)} lines in outputs/<commit>/{FOUND}), the ledger "
               f"restored to {len(ledger(root)) - 1} line(s), the commit recorded {entry['verdict']['verdict']}")


# --- the sandbox itself, without an evaluation ----------------------------------------------


def run_in(sandbox: Sandbox, script: str, readable: list[Path], writable: list[Path]) -> subprocess.CompletedProcess:
    cmd = sandbox.wrap([sys.executable, "-c", script], readable=readable, writable=writable)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


@needs_bwrap
def test_inside_only_the_writable_folders_take_writes_and_home_is_empty(tmp_path, monkeypatch):
    home, repo, out = tmp_path / "home", tmp_path / "repo", tmp_path / "repo" / "outputs" / "c"
    home.mkdir()
    repo.mkdir()
    (home / "secret.txt").write_text(HOME_SECRET)
    (repo / "config.toml").write_text("seed = 0\n")
    monkeypatch.setenv("HOME", str(home))
    script = ("import os, pathlib\n"
              f"pathlib.Path({str(out)!r}, 'ok.txt').write_text('fine')\n"
              f"print(sorted(os.listdir({str(home)!r})))\n"
              f"print(pathlib.Path({str(repo)!r}, 'config.toml').read_text().strip())\n"
              "try:\n"
              f"    open({str(repo / 'config.toml')!r}, 'a').write('x')\n"
              "except OSError as e:\n"
              "    print('refused', e.errno)\n")
    proc = run_in(BWRAP, script, readable=[repo], writable=[out])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "seed = 0", "refused 30"]  # EROFS
    assert (out / "ok.txt").read_text() == "fine" and (repo / "config.toml").read_text() == "seed = 0\n"


def test_unconfined_is_the_command_as_it_is_and_the_variable_turns_the_sandbox_off(monkeypatch):
    assert Sandbox("none", "test").wrap(["true"], readable=[Path("/x")], writable=[]) == ["true"]
    monkeypatch.setenv(SANDBOX_VAR, "none")
    assert choose() == Sandbox("none", f"{SANDBOX_VAR}=none")


def test_without_bwrap_the_reason_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr("autoenv.sandbox.confine.shutil.which", lambda name, path=None: None)
    _probe.cache_clear()
    try:
        reason = _probe().reason
    finally:
        _probe.cache_clear()
    assert "not installed" in reason and "setup.sh" in reason


def test_a_remote_runtime_sees_its_login_file_and_nothing_else_of_home():
    job = Job(candidate_dir="c", out_dir="o", runtime=RuntimeSpec(type="modal"))
    assert runtime_files(job) == [Path.home() / ".modal.toml"]
    assert runtime_files(Job(candidate_dir="c", out_dir="o")) == []


RELAYED = """import json, os, sys
from pathlib import Path
from openai import OpenAI
from autoenv.sandbox.forwarder import TOKEN_VAR, relay
from autoenv.core.job import Job

job = Job.read(Path(sys.argv[1]))
print(relay(job))
seat = job.rollouts.roles["target"]
client = OpenAI(base_url=seat.base_url, api_key=os.environ[TOKEN_VAR], max_retries=0)
print(client.chat.completions.create(model="oracle", messages=[{"role": "user", "content": sys.argv[2]}])
      .choices[0].message.content)
stream = client.chat.completions.create(model="oracle", messages=[{"role": "user", "content": sys.argv[2]}], stream=True)
print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
"""


@needs_bwrap
@pytest.mark.slow
def test_a_child_without_network_reaches_the_models_through_the_relay(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    out = tmp_path / "out"
    out.mkdir()

    async def main():
        async with Endpoint(Policies(OracleBook(make_tasks()), seed=3), api_key=KEY) as ep:
            seat = Seat(model="oracle", base_url=ep.base_url, api_key_var=KEY_VAR)
            job = Job(candidate_dir=str(tmp_path), out_dir=str(out),
                      rollouts=RolloutPlan(examples=1, rollouts=1, roles={"target": seat}))
            with forwarding(job) as (forwarded, env):
                assert relay(forwarded) is False  # here the network is shared: the forwarder is on its port
                forwarded.write(out / "job.json")
                cmd = BWRAP.wrap([sys.executable, "-c", RELAYED, str(out / "job.json"), ADD_PROMPT],
                                 readable=[], writable=writable_paths(forwarded), network=False)
                proc = await asyncio.create_subprocess_exec(*cmd, env={**scrubbed(), **env},
                                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
                return proc.returncode, stdout.decode(), stderr.decode(), ep.counts["unauthorized"]

    code, stdout, stderr, unauthorized = asyncio.run(main())
    assert code == 0, stderr[-2000:]
    assert stdout.splitlines() == ["True", ANSWER, ANSWER] and unauthorized == 0


def test_only_the_subprocess_runtime_with_the_inprocess_harness_goes_without_network():
    assert not needs_network(Job(candidate_dir="c", out_dir="o"))
    assert needs_network(Job(candidate_dir="c", out_dir="o", runtime=RuntimeSpec(harness="stock")))
    assert needs_network(Job(candidate_dir="c", out_dir="o", runtime=RuntimeSpec(type="docker")))
