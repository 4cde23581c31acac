"""The commands besides an evaluation that run the candidate's code run it confined (autoenv.sandbox.candidaterun).

`autoenv export grpo` loading the tasks (autoenv.export.dump), the OpenEnv check's oracle episode
(autoenv.export.episode) and `autoenv serve --candidate` (the oracle policies) once imported the
candidate with the harness's interpreter, as the harness's user. A real hostile candidate (the arithmetic
example with an attack at import) tries, in each: to find the key in its environment and in /proc, to read
a file outside the repository, and to write the repository, its own folder, $HOME and the harness's venv.
What it wrote inside the sandbox is looked for on this machine afterwards.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import stop_process

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import EXAMPLES
from autoenv.model.server import free_port
from autoenv.sandbox.confine import _probe

BWRAP = _probe()
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow,
              pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")]
KEY_VAR, KEY = "HOSTILE_PATHS_API_KEY", "sk-paths-test-key-never-readable"

# At import: each attempt's outcome on stderr as one REPORT line; with a RAISE file beside it, the import fails with it.
ATTACK = '''
import glob as _glob, json as _json, os as _os, pathlib as _pathlib, sys as _sys


def _attempts():
    said = {{}}
    found = [e for e in _glob.glob("/proc/*/environ") if _readable(e) and b"{key}" in open(e, "rb").read()]
    said["key-proc"] = "found" if found else "failed"
    said["key-env"] = "found" if "{key}" in str(_os.environ) else "failed"
    try:
        said["read-outside"] = "read: " + _pathlib.Path("{secret}").read_text()
    except OSError as e:
        said["read-outside"] = "failed: " + (e.strerror or "")
    for name, target in {targets}:
        try:
            _pathlib.Path(target).write_text("planted")
            said[name] = "wrote (inside)"
        except OSError as e:
            said[name] = "failed: " + (e.strerror or "")
    return said


def _readable(path):
    try:
        open(path, "rb").close()
        return True
    except OSError:
        return False


_report = "REPORT " + _json.dumps(_attempts())
if _pathlib.Path(__file__).with_name("RAISE").exists():
    raise SystemExit(_report)
print(_report, file=_sys.stderr, flush=True)
'''


def hostile(tmp_path: Path, fail_import: bool) -> tuple[Path, dict[str, Path]]:
    """The arithmetic example in a git repository, its import attacking; (its folder, the files it tries to plant)."""
    root = tmp_path / "repo"
    candidate = root / "candidate"
    shutil.copytree(EXAMPLES / "arithmetic", candidate, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    secret = tmp_path / "outside" / "credentials"
    secret.parent.mkdir()
    secret.write_text("the harness's secret")
    targets = {"write-repo": root / "pwned", "write-git": root / ".git" / "pwned",
               "write-candidate": candidate / "written", "write-home": Path.home() / f".autoenv-paths-{tmp_path.name}",
               "write-harness-venv": Path(sysconfig.get_paths()["purelib"]) / f"zz-paths-{tmp_path.name}.pth"}
    init = candidate / "candidate_env" / "__init__.py"
    attack = ATTACK.format(key=KEY, secret=secret, targets=sorted((k, str(v)) for k, v in targets.items()))
    init.write_text(attack + init.read_text())
    if fail_import:
        (candidate / "candidate_env" / "RAISE").write_text("")
    return candidate, targets


def report_of(text: str) -> dict[str, str]:
    return json.loads(text.split("REPORT ", 1)[1].splitlines()[0])


def planted(targets: dict[str, Path]) -> dict[str, bool]:
    """Which of the hostile candidate's files exist on this machine (and removes them)."""
    found = {name: path.exists() for name, path in targets.items()}
    for path in targets.values():
        if path.is_file():
            path.unlink()
    return found


def check_confined(report: dict[str, str], found: dict[str, bool]) -> None:
    assert report["key-proc"] == "failed" and report["key-env"] == "failed", report
    assert report["read-outside"].startswith("failed"), report
    for name in ("write-repo", "write-git", "write-candidate", "write-harness-venv"):
        assert report[name].startswith("failed") or not found[name], report  # in the sandbox's own /tmp at most
    assert not any(found.values()), found


def row(report: dict[str, str], found: dict[str, bool]) -> str:
    return ("; ".join(f"{k}: {v}" for k, v in report.items())
            + f"; on this machine afterwards: {sum(found.values())} of {len(found)} files planted")


@pytest.mark.attack
def test_the_grpo_exports_task_dump_runs_the_candidate_confined(tmp_path, monkeypatch, attack_row):
    from autoenv.export.grpo import dump_tasks
    from autoenv.sandbox import candidatevenv

    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    candidate, targets = hostile(tmp_path, fail_import=True)
    with pytest.raises(AutoEnvError) as caught:
        dump_tasks(candidate)
    report, found = report_of(str(caught.value)), planted(targets)
    check_confined(report, found)
    assert not candidatevenv.venv_dir(candidate).exists()  # the copy's venv goes with it
    (candidate / "candidate_env" / "RAISE").unlink()
    rows = dump_tasks(candidate)  # the same candidate, its import reporting only: the tasks come back
    assert len(rows) > 10 and rows[0]["messages"], rows[:1]
    check_confined(report, planted(targets))
    attack_row("hostile import in `autoenv export grpo`'s task dump [export]", row(report, found))


@pytest.mark.attack
def test_the_openenv_checks_oracle_episode_runs_the_candidate_confined(tmp_path, monkeypatch, attack_row):
    from autoenv.export.check import oracle_episode

    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    _, targets = hostile(tmp_path, fail_import=True)
    package = tmp_path / "package"
    (package / ".autoenv").mkdir(parents=True)
    (package / ".autoenv" / "export.json").write_text(json.dumps({"candidate": "../repo/candidate", "kind": "wrapped"}))
    check = oracle_episode(package, f"http://127.0.0.1:{free_port()}")
    assert check.status == "FAIL" and "REPORT" in check.detail, check
    report, found = report_of(check.detail), planted(targets)
    check_confined(report, found)
    attack_row("hostile import in `autoenv export openenv --check`'s oracle episode [export]", row(report, found))


@pytest.mark.attack
def test_serve_with_a_candidate_runs_its_oracle_in_the_sandbox_without_the_key(tmp_path, monkeypatch, attack_row):
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    candidate, targets = hostile(tmp_path, fail_import=False)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "serve", "--port", str(port), "--key-var", KEY_VAR,
                             "--candidate", str(candidate)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said = []
        assert proc.stdout is not None
        for line in proc.stdout:  # the import's report, then the ready line
            said.append(line)
            if f"127.0.0.1:{port}" in line:
                break
        output = "".join(said)
        assert "oracle tasks" in output, output[-3000:]

        def get(key: str) -> int:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status
            except urllib.error.HTTPError as e:
                return e.code

        assert (get(KEY), get("sk-wrong")) == (200, 401)  # the key is checked by its digest: the server never had it
    finally:
        stop_process(proc)
    report, found = report_of(output), planted(targets)
    check_confined(report, found)
    attack_row("hostile import in `autoenv serve --candidate` (the oracle policies' process) [serve]",
               row(report, found) + "; the endpoint served on 127.0.0.1 and checked the key by its sha256")


@pytest.mark.attack
def test_the_openenv_checks_server_runs_confined(tmp_path, monkeypatch, attack_row):
    """`autoenv export openenv --check` starts the package's server (code from the candidate) in its venv: in the
    sandbox too (here the harness's Python stands in for the server's venv: it has uvicorn)."""
    from autoenv.export.check import serve

    monkeypatch.setenv(KEY_VAR, KEY)
    package = tmp_path / "repo" / "server_env"
    package.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(package.parent)], check=True)
    secret = tmp_path / "outside" / "credentials"
    secret.parent.mkdir()
    secret.write_text("the harness's secret")
    targets = {"write-repo": package.parent / "pwned", "write-package": package / "written",
               "write-home": Path.home() / f".autoenv-paths-{tmp_path.name}",
               "write-harness-venv": Path(sysconfig.get_paths()["purelib"]) / f"zz-paths-{tmp_path.name}.pth"}
    (package / "openenv.yaml").write_text("app: hostile_app:app\n")
    (package / "hostile_app.py").write_text(ATTACK.format(key=KEY, secret=secret, targets=sorted(
        (k, str(v)) for k, v in targets.items())))
    (package / "RAISE").write_text("")
    with serve(package, Path(sys.executable)) as (_, failure):
        pass
    assert failure is not None and "REPORT" in failure, failure
    report, found = report_of(failure), planted(targets)
    assert report["key-proc"] == "failed" and report["key-env"] == "failed", report
    assert report["read-outside"].startswith("failed") and report["write-package"].startswith("failed"), report
    assert report["write-harness-venv"].startswith("failed") and not any(found.values()), (report, found)
    attack_row("hostile server code in `autoenv export openenv --check`'s server start [export]", row(report, found))


@pytest.mark.attack
@pytest.mark.parametrize("link", ["dist", "build"])
def test_a_build_folder_committed_as_a_link_is_not_shown_writable(tmp_path, link, attack_row):
    """The child's sandbox shows the candidate's existing build/ and dist/ writable; committed as a link (`dist -> ..`),
    bwrap mounted what it points to: the repository, .git/ and the ledger were writable from the child."""
    from autoenv.core.job import Job
    from autoenv.sandbox.confine import choose, repository_of, writable_paths

    root = tmp_path / "repo"
    candidate = root / "candidate"
    candidate.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (candidate / link).symlink_to("..")
    job = Job(candidate_dir=str(candidate), out_dir=str(tmp_path / "out"))
    assert candidate / link not in writable_paths(job)
    cmd = choose().wrap(["sh", "-c", f"echo x > {root / '.git' / 'pwned'}"], readable=[repository_of(candidate), candidate],
                        writable=writable_paths(job), network=False)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and not (root / ".git" / "pwned").exists(), proc
    attack_row(f"candidate/{link} committed as a link to the repository (`{link} -> ..`), .git/ written from the child "
               "[sandbox]", f"not shown writable; the write said: {proc.stderr.strip().splitlines()[-1]}")
