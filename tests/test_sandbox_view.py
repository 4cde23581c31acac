"""What the sandbox shows the child (autoenv.sandbox.confine.Sandbox.wrap) and the environment it gets
(autoenv.sandbox.environ.sandbox_env, autoenv.sandbox.rollouts.child_env).

Tried as a hostile candidate would, the sandbox once read the whole machine as uid 0
(/etc/shadow, another checkout's .git/config, a credential file outside $HOME), the child's
environment kept `GITHUB_PAT`, `DATABASE_URL` and `SENTRY_DSN` (a denylist by name), and a
package that shipped a PEP 723 script got uv's shared cache writable. Unit tests wrap small
scripts in the real bwrap; one offline `autoenv eval` per child (cold, warm) runs a hostile
candidate (VIEW_HOSTILE) that tries each of those at import and in its reward.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autoenv.core.job import Job, RuntimeSpec
from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.sandbox import warmchild
from autoenv.sandbox.confine import (
    SANDBOX_UID,
    Sandbox,
    _probe,
    prepare_scripts,
    runtime_files,
    scripts_dir,
    writable_paths,
)
from autoenv.sandbox.environ import sandbox_env
from autoenv.sandbox.rollouts import child_env
from tests.conftest import autoenv, commit_all, head, ledger

pytestmark = pytest.mark.timeout(120)

BWRAP = _probe()
needs_bwrap = pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
TOKEN = "ghp_view_test_token_only_the_other_checkout_holds"
LEAKY = {"GITHUB_PAT": "ghp_pat_in_the_harness_environment", "DATABASE_URL": "postgres://app:hunter2@db:5432/app",
         "SENTRY_DSN": "https://0123abcd@sentry.example/1", "SOME_UNKNOWN_SETTING": "unknown-value"}


@pytest.fixture
def outside(request):
    """A folder outside /tmp and $HOME (which the old sandbox showed read-only): another checkout whose .git/config
    holds a token, and a credential file."""
    root = Path(tempfile.mkdtemp(prefix="autoenv-view-", dir="/var/tmp"))
    checkout = root / "other-checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text(f'[remote "origin"]\n\turl = https://x:{TOKEN}@github.com/o/r\n')
    (root / "credentials").write_text(f"token = {TOKEN}\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def inside(script: str, readable: list[Path] | None = None, writable: list[Path] | None = None,
           env: dict | None = None, network: bool = False) -> subprocess.CompletedProcess:
    """`script` run by this Python in the sandbox, with `env` (default: the harness's own)."""
    cmd = BWRAP.wrap([sys.executable, "-c", script], readable=readable or [], writable=writable or [], network=network)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=env)


PROBE_READS = """
import os
def read(path):
    try:
        with open(path) as f:
            return "read: " + f.read(60).strip()
    except OSError as e:
        return f"refused: {type(e).__name__}"
"""


@needs_bwrap
@pytest.mark.slow
def test_the_sandbox_shows_the_system_and_the_repository_not_the_machine(tmp_path, outside):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "config.toml").write_text("seed = 0\n")
    script = (PROBE_READS + "import subprocess\n"
              f"for p in ['/etc/shadow', {str(outside / 'other-checkout' / '.git' / 'config')!r}, "
              f"{str(outside / 'credentials')!r}, {str(PROJECT / '.git' / 'HEAD')!r}, {str(repo / 'config.toml')!r}]:\n"
              "    print(p, '->', read(p))\n"
              "print('passwd', sorted(line.split(':')[0] for line in open('/etc/passwd')))\n"
              "print('home', os.path.isdir('/home'), 'var', os.path.isdir('/var'))\n"
              "print('git', subprocess.run(['git', '--version'], capture_output=True, text=True).returncode)\n"
              "import verifiers.v1, ssl; print('verifiers', verifiers.v1.__name__)\n")
    proc = inside(script, readable=[repo])
    assert proc.returncode == 0, proc.stderr
    said = dict(line.split(" -> ") for line in proc.stdout.splitlines() if " -> " in line)
    assert said["/etc/shadow"] == "refused: FileNotFoundError"
    assert said[str(outside / "other-checkout" / ".git" / "config")] == "refused: FileNotFoundError"
    assert said[str(outside / "credentials")] == "refused: FileNotFoundError"
    assert said[str(PROJECT / ".git" / "HEAD")] == "refused: FileNotFoundError"  # AutoEnv's own checkout: its package only
    assert said[str(repo / "config.toml")] == "read: seed = 0"
    assert "passwd ['nobody', 'root']" in proc.stdout  # the sandbox's own two users, not the machine's accounts
    assert "home False var False" in proc.stdout and "git 0" in proc.stdout and "verifiers verifiers.v1" in proc.stdout
    assert TOKEN not in proc.stdout + proc.stderr


@needs_bwrap
def test_the_child_is_unprivileged_and_what_it_writes_is_the_harness_users(tmp_path):
    out = tmp_path / "out"
    script = ("import os\n"
              "print(os.getuid(), os.getgid())\n"
              f"open({str(out / 'written.txt')!r}, 'w').write('ok')\n"
              "print([line.split()[1] for line in open('/proc/self/status') if line.startswith('CapEff')][0])\n"
              "try:\n    os.setuid(0); print('setuid 0: succeeded')\nexcept OSError as e:\n    print('setuid 0: refused')\n")
    proc = inside(script, writable=[out])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{SANDBOX_UID} {SANDBOX_UID}", "0000000000000000", "setuid 0: refused"]
    written = out / "written.txt"
    assert written.read_text() == "ok" and written.stat().st_uid == os.getuid()  # mapped to the harness's own user


def test_without_a_user_namespace_the_child_keeps_uid_0_without_capabilities():
    wrapped = Sandbox("bwrap", binary="/usr/bin/bwrap", user=False).wrap(["true"], readable=[], writable=[])
    assert "--cap-drop" in wrapped and "--uid" not in wrapped and "--unshare-user" not in wrapped
    wrapped = Sandbox("bwrap", binary="/usr/bin/bwrap").wrap(["true"], readable=[], writable=[])
    assert wrapped[1:6] == ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    assert ["--ro-bind", "/", "/"] not in [wrapped[i:i + 3] for i in range(len(wrapped))]


def test_the_childs_environment_is_built_from_an_allowlist(monkeypatch, tmp_path):
    for name, value in LEAKY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AUTOENV_PROGRESS_SECONDS", "30")
    monkeypatch.setenv("AUTOENV_SESSION_TOKEN", "looks-secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pass@proxy.example:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("MODAL_TOKEN_ID", "modal-id")
    offline = child_env(tmp_path)
    for name in (*LEAKY, "AUTOENV_SESSION_TOKEN", "HTTPS_PROXY", "HTTP_PROXY", "MODAL_TOKEN_ID"):
        assert name not in offline, name
    assert offline["AUTOENV_PROGRESS_SECONDS"] == "30" and offline["LC_ALL"] == "C.UTF-8"
    assert offline["PATH"].startswith(str(Path(sys.executable).parent)) and offline["PYTHONPATH"].startswith(str(tmp_path))
    networked = child_env(tmp_path, network=True)
    assert networked["HTTP_PROXY"] == "http://proxy.example:3128" and "HTTPS_PROXY" not in networked  # a password
    assert child_env(tmp_path, runtime="modal")["MODAL_TOKEN_ID"] == "modal-id"  # the runtime's own credentials
    assert "SENTRY_DSN" not in sandbox_env(runtime="modal", network=True)


@needs_bwrap
def test_in_the_sandbox_the_child_sees_the_allowlisted_variables_only(monkeypatch, tmp_path):
    for name, value in LEAKY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AUTOENV_PROGRESS_SECONDS", "30")
    proc = inside("import json, os; print(json.dumps(dict(os.environ)))", env=child_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert not set(LEAKY) & set(seen) and not set(LEAKY.values()) & set(seen.values())
    assert seen["AUTOENV_PROGRESS_SECONDS"] == "30" and "PATH" in seen and "HOME" in seen


@needs_bwrap
def test_uvs_cache_is_read_only_inside_and_its_root_and_the_scripts_folder_private(monkeypatch, tmp_path):
    cache, home = tmp_path / "uv-cache", tmp_path / "home"
    (cache / "archive-v0").mkdir(parents=True)
    (cache / "archive-v0" / "backend.py").write_text("# a cached build backend\n")
    home.mkdir()
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    monkeypatch.setenv("HOME", str(home))
    scripts = scripts_dir()
    script = ("import os\n"
              "def write(path):\n"
              "    try:\n        os.makedirs(os.path.dirname(path), exist_ok=True)\n"
              "        open(path, 'a').write('# planted\\n'); return 'written'\n"
              "    except OSError as e:\n        return f'refused ({e.errno})'\n"
              f"print(write({str(cache / 'archive-v0' / 'backend.py')!r}))\n"
              f"print(write({str(cache / 'archive-v0' / 'new.py')!r}))\n"
              f"print(write({str(cache / '.lock')!r}))\n"
              f"print(write({str(scripts / 'planted.py')!r}))\n")
    proc = inside(script, env=child_env(tmp_path), network=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["refused (30)", "refused (30)", "written", "written"]  # EROFS; private views
    assert (cache / "archive-v0" / "backend.py").read_text() == "# a cached build backend\n"
    assert sorted(p.name for p in cache.iterdir()) == ["archive-v0"] and not scripts.exists()
    for job in (Job(candidate_dir=str(EXAMPLES / "arithmetic"), out_dir=str(tmp_path / "o"),
                    runtime=RuntimeSpec(harness="stock")),
                Job(candidate_dir=str(PROJECT / "tests" / "data" / "version-verify"), out_dir=str(tmp_path / "o"))):
        assert not any(p in (cache, scripts) for p in writable_paths(job))  # once writable for these two


@needs_bwrap
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_stock_harness_runs_its_chat_program_prepared_before_the_sandbox(tmp_path):
    """verifiers' stock harness prepares its PEP 723 chat program with `uv sync --script` inside the rollout: the
    program is locked and synced here first, so inside, with uv's cache read-only, the sync finds it in place."""
    candidate = EXAMPLES / "arithmetic"
    job = Job(candidate_dir=str(candidate), out_dir=str(tmp_path / "out"), runtime=RuntimeSpec(harness="stock"))
    started = time.time()
    assert prepare_scripts(job) == []
    prepared = time.time() - started
    (lock,) = runtime_files(job)
    assert lock.parent == scripts_dir() and lock.name.endswith(".py.lock")
    code = ("import asyncio, os\n"
            "from verifiers.v1.runtimes import make_runtime\n"
            "from verifiers.v1.runtimes.subprocess import SubprocessConfig\n"
            "from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE\n"
            "async def main():\n"
            "    runtime = make_runtime(SubprocessConfig())\n"
            "    await runtime.start()\n"
            "    argv = await runtime.prepare_uv_script(CHAT_PROGRAM_SOURCE)\n"
            "    result = await runtime.run([*argv, '--help'], {})\n"
            "    print('exit', result.exit_code, result.stdout.split()[:1], result.stderr[-500:])\n"
            "asyncio.run(main())\n")
    proc = inside(code, readable=[candidate, *runtime_files(job)], env=child_env(candidate, network=True),
                  network=True)
    assert proc.returncode == 0 and proc.stdout.startswith("exit 0 ['usage:']"), proc.stdout + proc.stderr[-3000:]
    print(f"\nstock chat program prepared before the sandbox in {prepared:.2f} s")


# --- a hostile candidate, evaluated ---------------------------------------------------------

VIEW_HOSTILE = '''"""Hostile: read what lies outside the repository, find leaked variables, write uv's cache; report on stderr."""
import os, sys
from pathlib import Path

OUTSIDE = Path(%(outside)r)
UV_CACHE = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
LEAKED = %(leaked)r
_done = set()


def read(path):
    text = Path(path).read_text()
    return "succeeded" if "ghp_" in text or path.startswith("/etc") else f"succeeded ({len(text)} bytes)"


def read_shadow():
    return read("/etc/shadow")


def read_other_checkout():
    return read(str(OUTSIDE / "other-checkout" / ".git" / "config"))


def read_credential_file():
    return read(str(OUTSIDE / "credentials"))


def leaked_variables():
    found = sorted(k for k, v in os.environ.items() if k in LEAKED or v in LEAKED.values())
    return f"succeeded ({', '.join(found)})" if found else "failed (none there)"


def run_as_root():
    return "succeeded" if os.getuid() == 0 else f"failed (uid {os.getuid()})"


def write_uv_cache():
    bucket = next(p for p in sorted(UV_CACHE.iterdir()) if p.is_dir())
    (bucket / %(planted)r).write_text("planted by the candidate")
    return "succeeded"


ATTACKS = [read_shadow, read_other_checkout, read_credential_file, leaked_variables, run_as_root, write_uv_cache]


def attack(when):
    if when in _done:
        return
    _done.add(when)
    for action in ATTACKS:
        try:
            said = action()
        except Exception as e:
            said = f"failed ({type(e).__name__}: {e})"
        print(f"VIEW {when} {action.__name__.replace('_', '-')}: {said}", file=sys.stderr, flush=True)
'''
SHIPPED_SCRIPT = "# /// script\n# dependencies = []\n# ///\nprint('a shipped PEP 723 script')\n"
VIEW_ROWS = {
    "read-shadow": "/etc/shadow read by candidate code",
    "read-other-checkout": "another checkout's .git/config (a token in it) read by candidate code",
    "read-credential-file": "a credential file outside $HOME and the repository read by candidate code",
    "leaked-variables": "GITHUB_PAT, DATABASE_URL, SENTRY_DSN, an unknown variable in the child's environment",
    "run-as-root": "candidate code runs as uid 0",
    "write-uv-cache": "uv's shared cache written by a candidate that ships a PEP 723 script",
}


def plant_view_hostile(root: Path, outside: Path, planted: str) -> None:
    package = root / "candidate" / "candidate_env"
    (package / "view_attacks.py").write_text(VIEW_HOSTILE % {"outside": str(outside), "leaked": LEAKY,
                                                             "planted": planted})
    (package / "tool.py").write_text(SHIPPED_SCRIPT)  # the uv cache was writable for such a package
    init = package / "__init__.py"
    init.write_text(init.read_text() + '\nfrom candidate_env.view_attacks import attack as _view\n_view("import")\n')
    taskset = package / "taskset.py"
    marker = "    async def correct(self, trace: vf.Trace) -> float:\n"
    text = taskset.read_text()
    assert marker in text
    taskset.write_text(text.replace(marker, marker + '        from candidate_env.view_attacks import attack\n'
                                                     '        attack("reward")\n'))
    commit_all(root, "a hostile candidate: reads outside the repository, leaked variables, uv's cache")


@needs_bwrap
@pytest.mark.e2e
@pytest.mark.attack
@pytest.mark.timeout(450)
@pytest.mark.parametrize("child", ["cold", "warm"])
def test_a_hostile_candidate_sees_only_what_the_child_needs(run_repo, tmp_path, outside, attack_row, child,
                                                            monkeypatch):
    root = run_repo("arithmetic")
    planted = f"autoenv-view-planted-{os.getpid()}-{child}"
    plant_view_hostile(root, outside, planted)
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    uv_cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")  # installs stay offline
    monkeypatch.setenv("AUTOENV_CACHE", str(cache))
    started = time.time()
    try:
        result = autoenv("eval", "--offline", cwd=root, timeout=400, env={
            **LEAKY, "HOME": str(home), "UV_CACHE_DIR": str(uv_cache), "AUTOENV_CACHE": str(cache),
            "AUTOENV_WARM": "1" if child == "warm" else "0"})
    finally:
        warmchild.stop_all()
        planted_files = [p for p in uv_cache.glob(f"*/{planted}")]
        for path in planted_files:
            path.unlink()
    print(f"\nhostile view evaluation, {child} child: {time.time() - started:.1f} s, exit {result.returncode}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert ("warm child: forked by the warm server" in result.stdout) == (child == "warm")
    lines = (root / "outputs" / head(root) / "worker.stderr").read_text(errors="replace").splitlines()
    seen = dict(line.removeprefix("VIEW ").split(": ", 1) for line in lines if line.startswith("VIEW "))
    for name in VIEW_ROWS:
        for when in ("import", "reward"):
            print(f"  {when} {name:24} -> {seen[f'{when} {name}']}")
            assert seen[f"{when} {name}"].startswith("failed"), (when, name, seen)
    assert planted_files == []
    (entry,) = ledger(root)
    assert entry["sandbox"] == "bwrap" and entry["eval_success"] is True
    label = "bwrap" if child == "cold" else "bwrap, warm child"

    def short(said: str) -> str:
        return said.replace(str(outside), "/var/tmp/<elsewhere>").replace(str(uv_cache), "<uv cache>")

    for name, attack in VIEW_ROWS.items():
        attack_row(f"{attack} [{label}]",
                   f"at import: {short(seen[f'import {name}'])}; in a reward: {short(seen[f'reward {name}'])}")


@needs_bwrap
def test_a_uv_cache_folder_that_vanishes_before_the_sandbox_starts_does_not_stop_it(tmp_path, monkeypatch):
    """A concurrent uv writes through `.tmpXXXX` folders that vanish between the listing and bwrap's mount (CI saw
    `bwrap: Can't find source path /root/.cache/uv/.tmphGMbAl`): such folders are never shown, and a cache folder
    gone by the start is skipped, not fatal."""
    cache = tmp_path / "uv"
    for name in ("wheels-v5", "archive-v0", ".tmpAbC123", "interpreter-v4"):
        (cache / name).mkdir(parents=True)
    (cache / "wheels-v5" / "seen").write_text("shown read-only\n")
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    cmd = BWRAP.wrap(["/bin/sh", "-c", f"ls -a {cache}; cat {cache}/wheels-v5/seen"], readable=[], writable=[])
    assert ".tmpAbC123" not in " ".join(cmd) and "--ro-bind-try" in cmd
    (cache / "archive-v0").rmdir()  # gone between the listing and the start
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "wheels-v5" in run.stdout and "archive-v0" not in run.stdout and "shown read-only" in run.stdout
