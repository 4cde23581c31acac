"""The install stage confined (autoenv.sandbox.install, buildcheck, sitepackages), tried by hostile packages.

Each hostile package is real and built for real: an in-tree build backend (`backend-path`) that reads the
harness's environment from /proc, writes .git/ and drops a .pth into site-packages; a setup.py; an
allowed backend (hatchling) whose build hook, run in the sandbox, looks for the key, writes .git/, reaches
a server on this machine and plants files in site-packages, and whose wheel ships a .pth of its own.
Installs go into a venv of the test's own, never the harness's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.sandbox.buildcheck import BACKENDS, build_plan, line_of
from autoenv.sandbox.confine import SANDBOX_VAR, _probe
from autoenv.sandbox.install import install_candidate, site_packages, uv_binary
from tests.conftest import autoenv, commit_all, head, ledger

pytestmark = pytest.mark.timeout(300)

BWRAP = _probe()
needs_bwrap = pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
KEY_VAR, KEY = "HOSTILE_TEST_API_KEY", "sk-install-test-key-never-readable"

TINY_PYPROJECT = """[project]
name = "tiny-env"
version = "0.1.0"
dependencies = []

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["tiny_env"]
"""

# An in-tree backend: what the one in issue 43 did, at import, before any hook is called.
IN_TREE_BACKEND = '''import glob, os, pathlib, sysconfig
here = pathlib.Path(__file__).resolve().parent.parent
for environ in glob.glob("/proc/*/environ"):
    try:
        data = open(environ, "rb").read()
    except OSError:
        continue
    if b"{key}" in data:
        (here / "KEY-READ").write_text(environ)
(here.parent / ".git" / "pwned").write_text("x")
pathlib.Path(sysconfig.get_paths()["purelib"], "zz-backdoor.pth").write_text("import os\\n")
from hatchling.build import *  # noqa
'''

# A hatchling build hook (an allowed backend runs it): in the sandbox, it reports what it reached
# (HOSTILE_MODE=report: by failing the build with the report) or plants files (HOSTILE_MODE=plant); the mode is
# written into the hook, since the build's environment is an allowlist that passes no such variable.
HOOK = '''import glob, os, pathlib, socket, sysconfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

def attempts():
    said = {}
    found = []
    for environ in glob.glob("/proc/*/environ"):
        try:
            if b"{key}" in open(environ, "rb").read():
                found.append(environ)
        except OSError:
            pass
    said["key-in-proc"] = f"succeeded ({found})" if found else "failed (not in any /proc/*/environ)"
    said["key-in-environment"] = "succeeded" if "{key}" in str(os.environ) else "failed"
    for name, target in (("write-git", pathlib.Path("{git}") / "pwned"), ("write-package", pathlib.Path(__file__).with_name("written"))):
        try:
            target.write_text("x")
            said[name] = "succeeded"
        except OSError as e:
            said[name] = f"failed ({e.strerror})"
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
        said["reach-harness-host"] = "succeeded"
    except OSError as e:
        said["reach-harness-host"] = f"failed ({type(e).__name__})"
    return said

class Hostile(BuildHookInterface):
    def initialize(self, version, build_data):
        if "{mode}" == "report":
            raise SystemExit("REPORT " + __import__("json").dumps(attempts()))
        site = pathlib.Path(sysconfig.get_paths()["purelib"])
        (site / "zz-planted.pth").write_text("import sys; sys.stderr.write('PLANTED RAN')\\n")
        (site / "sitecustomize_helper.py").write_text("X = 1\\n")
        with open(site / "editables" / "__init__.py", "a") as f:
            f.write("\\n# changed by a hostile build\\n")
'''


@pytest.fixture
def venv(tmp_path):
    """A venv of the test's own: the installs under test write here, never into the harness's venv."""
    path = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(path)], check=True)
    return str(path / "bin" / "python")


def package(root: Path, pyproject: str = TINY_PYPROJECT) -> Path:
    """A git repository `root` holding the package tiny-env in root/candidate."""
    pkg = root / "candidate"
    (pkg / "tiny_env").mkdir(parents=True)
    (pkg / "tiny_env" / "__init__.py").write_text("VALUE = 41 + 1\n")
    (pkg / "pyproject.toml").write_text(pyproject)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return pkg


def imports(python: str, module: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", f"import {module}; print({module}.VALUE)"], capture_output=True, text=True, check=False)


def test_a_clean_package_installs_and_imports_and_nothing_else_lands(tmp_path, venv):
    pkg = package(tmp_path / "repo")
    site = site_packages(venv)
    started = time.time()
    assert install_candidate(pkg, python=venv) is True
    seconds = time.time() - started
    assert imports(venv, "tiny_env").stdout.strip() == "42"
    own = sorted(p.name for p in site.iterdir() if "tiny" in p.name)
    assert own == ["_editable_impl_tiny_env.pth", "tiny_env-0.1.0.dist-info"], own
    assert install_candidate(pkg, python=venv) is False  # current: nothing runs again
    print(f"\nconfined install of a clean package (pyproject new, backend fetched): {seconds:.2f} s")


@pytest.mark.attack
def test_an_in_tree_backend_is_refused_before_anything_runs(tmp_path, venv, monkeypatch, attack_row):
    monkeypatch.setenv(KEY_VAR, KEY)
    root = tmp_path / "repo"
    pyproject = TINY_PYPROJECT.replace('build-backend = "hatchling.build"',
                                       'build-backend = "evil_backend"\nbackend-path = ["_build"]')
    pkg = package(root, pyproject)
    (pkg / "_build").mkdir()
    (pkg / "_build" / "evil_backend.py").write_text(IN_TREE_BACKEND.replace("{key}", KEY))
    with pytest.raises(AutoEnvError) as caught:
        install_candidate(pkg, python=venv)
    error = caught.value
    file, line = error.where.rsplit(":", 1)
    assert file == str(pkg / "pyproject.toml") and pyproject.splitlines()[int(line) - 1].startswith("backend-path")
    assert "backend-path" in str(error) and "hatchling" in error.fix
    assert not (root / ".git" / "pwned").exists() and not (pkg / "KEY-READ").exists()
    assert not list(site_packages(venv).glob("*.pth"))
    attack_row("in-tree build backend (backend-path) reading /proc/*/environ, writing .git/, dropping a .pth [install]",
               f"refused before the build: {str(error).split(':')[0]} ({Path(file).name}:{line}); .git/ untouched, "
               f"no .pth in site-packages, the backend never imported")


@pytest.mark.parametrize("case", ["setup.py", "unknown backend", "scripts", "dynamic dependencies", "shadowed backend"])
def test_builds_that_run_the_candidates_own_code_are_refused_with_the_line(tmp_path, venv, case):
    pyproject = {
        "unknown backend": TINY_PYPROJECT.replace('"hatchling.build"', '"mybackend.api"'),
        "scripts": TINY_PYPROJECT.replace('dependencies = []', 'dependencies = []\n\n[project.scripts]\nautoenv = "tiny_env:main"'),
        "dynamic dependencies": TINY_PYPROJECT.replace('dependencies = []', 'dynamic = ["dependencies"]'),
    }.get(case, TINY_PYPROJECT)
    pkg = package(tmp_path / "repo", pyproject)
    if case == "setup.py":
        (pkg / "setup.py").write_text("open('RAN', 'w')\nfrom setuptools import setup\nsetup()\n")
    if case == "shadowed backend":
        (pkg / "hatchling").mkdir()
        (pkg / "hatchling" / "__init__.py").write_text("open('RAN', 'w')\n")
    with pytest.raises(AutoEnvError) as caught:
        install_candidate(pkg, python=venv)
    where = caught.value.where
    expected = {"setup.py": f"{pkg / 'setup.py'}:1", "unknown backend": f"{pkg / 'pyproject.toml'}:8",
                "scripts": f"{pkg / 'pyproject.toml'}:6", "dynamic dependencies": f"{pkg / 'pyproject.toml'}:4",
                "shadowed backend": str(pkg / "hatchling")}[case]
    assert where == expected, (where, str(caught.value))
    assert not (pkg / "RAN").exists() and not list(site_packages(venv).glob("*tiny*"))


@needs_bwrap
@pytest.mark.attack
def test_an_allowed_backends_build_hook_runs_confined(tmp_path, venv, monkeypatch, attack_row):
    """hatchling runs a custom build hook from the package folder: candidate code, in the sandbox."""
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("HOSTILE_MODE", "report")
    listener = socket.create_server(("127.0.0.1", 0))
    root = tmp_path / "repo"
    pkg = package(root, TINY_PYPROJECT + "\n[tool.hatch.build.hooks.custom]\n")
    (pkg / "hatch_build.py").write_text(HOOK.replace("{mode}", os.environ.get("HOSTILE_MODE", "")).replace("{key}", KEY).replace("{git}", str(root / ".git"))
                                        .replace("{port}", str(listener.getsockname()[1])))
    with listener, pytest.raises(AutoEnvError) as caught:
        install_candidate(pkg, python=venv)
    report = json.loads(str(caught.value).split("REPORT ", 1)[1].splitlines()[0])
    print("\n" + "\n".join(f"  {k:22} -> {v}" for k, v in report.items()))
    assert all(said.startswith("failed") for said in report.values()), report
    assert not (root / ".git" / "pwned").exists() and not list(site_packages(venv).glob("*tiny*"))
    attack_row("allowed backend (hatchling) build hook: key in /proc, .git/ write, a server on the host [install]",
               "; ".join(f"{k}: {v}" for k, v in report.items()))


@pytest.mark.attack
@pytest.mark.parametrize("sandbox", ["", "none"])
def test_files_a_build_leaves_beyond_its_own_distribution_are_removed_and_named(tmp_path, venv, monkeypatch,
                                                                               attack_row, sandbox, capsys):
    """A .pth shipped in the wheel (hatch force-include) and files a build hook writes straight into site-packages."""
    if sandbox == "" and BWRAP.kind != "bwrap":
        pytest.skip(BWRAP.reason)
    monkeypatch.setenv(SANDBOX_VAR, sandbox)
    monkeypatch.setenv("HOSTILE_MODE", "plant")
    pkg = package(tmp_path / "repo", TINY_PYPROJECT + '\n[tool.hatch.build.targets.wheel.force-include]\n'
                                                      '"shipped.pth" = "zz-shipped.pth"\n\n[tool.hatch.build.hooks.custom]\n')
    (pkg / "shipped.pth").write_text("import sys; sys.stderr.write('SHIPPED RAN')\n")
    (pkg / "hatch_build.py").write_text(HOOK.replace("{mode}", os.environ.get("HOSTILE_MODE", "")).replace("{key}", KEY).replace("{git}", "/nonexistent").replace("{port}", "9"))
    site = site_packages(venv)
    with pytest.raises(AutoEnvError) as caught:
        install_candidate(pkg, python=venv)
    said = str(caught.value)
    for name in ("zz-planted.pth", "sitecustomize_helper.py", "zz-shipped.pth"):
        assert f"{name} (removed)" in said and not (site / name).exists(), said
    assert "editables/__init__.py (changed, still there)" in said and "setup.sh" in caught.value.fix
    assert "tampered" in said and not list(site.glob("*tiny*"))
    ran = subprocess.run([venv, "-c", "pass"], capture_output=True, text=True, check=False).stderr
    assert "RAN" not in ran
    assert ("runs unconfined" in capsys.readouterr().out) == (sandbox == "none")
    attack_row(f"build leaves a .pth (wheel force-include), a top-level module and a changed file in site-packages "
               f"[install, {'bwrap' if not sandbox else 'no sandbox'}]",
               f"install refused: {said.split(': ', 1)[1].split('; tiny-env')[0]}")


def test_the_backends_of_every_example_and_test_environment_are_accepted():
    """No clean package of this repository is refused (their installs: the slow test below and the e2e suite)."""
    folders = [p.parent for p in [*EXAMPLES.glob("*/pyproject.toml"), *(PROJECT / "tests" / "data").glob("*/pyproject.toml"),
                                  PROJECT / "candidate" / "pyproject.toml"]]
    assert len(folders) > 40
    backends = {build_plan(folder).backend for folder in folders}
    assert backends <= set(BACKENDS)


def test_line_of_finds_keys_in_their_table():
    text = '[project]\nname = "x"\n\n[build-system]\nrequires = []\nbuild-backend = "y"\n'
    assert line_of(text, "build-system", "build-backend") == 6
    assert line_of(text, "project", "name") == 2
    assert line_of(text, "build-system", "backend-path") == 4  # absent: the table's header
    assert line_of(text, "tool.missing") == 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_examples_install_confined_and_import(tmp_path, venv):
    """Three examples (one with a dependency beyond verifiers: httpx; one with its own name) installed into
    a fresh venv, each imported there."""
    timings = {}
    for example, module in (("arithmetic", "candidate_env"), ("hack-injection", "candidate_env"),
                            ("real-duel", "high_card")):
        copy = tmp_path / example
        shutil.copytree(EXAMPLES / example, copy, ignore=shutil.ignore_patterns("__pycache__"))
        started = time.time()
        assert install_candidate(copy, python=venv, force=True)
        timings[example] = round(time.time() - started, 2)
        proc = subprocess.run([venv, "-c", f"import {module}; print({module}.__file__)"], capture_output=True, text=True, check=False)
        assert proc.returncode == 0 and str(copy) in proc.stdout, proc.stderr[-2000:]
    print(f"\nconfined installs into a fresh venv (s): {timings}")


@pytest.mark.e2e
@pytest.mark.attack
@pytest.mark.timeout(400)
def test_an_evaluation_of_an_in_tree_backend_is_recorded_as_the_candidates(run_repo, monkeypatch, attack_row):
    monkeypatch.setenv(KEY_VAR, KEY)
    root = run_repo("arithmetic")
    pkg = root / "candidate"
    text = (pkg / "pyproject.toml").read_text()
    (pkg / "pyproject.toml").write_text(text.replace('build-backend = "hatchling.build"',
                                                     'build-backend = "evil_backend"\nbackend-path = ["_build"]'))
    (pkg / "_build").mkdir()
    (pkg / "_build" / "evil_backend.py").write_text(IN_TREE_BACKEND.replace("{key}", KEY))
    commit_all(root, "an in-tree build backend")
    pth_before = sorted(p.name for p in Path(sys.prefix, "lib").glob("python*/site-packages/*.pth"))
    result = autoenv("eval", "--offline", cwd=root, env={KEY_VAR: KEY})
    output = result.stdout + result.stderr
    (entry,) = ledger(root)
    assert entry["commit"] == head(root) and entry["verdict"]["verdict"] == "crash", entry["verdict"]
    assert "backend-path" in json.dumps(entry), entry["verdict"]
    assert not (root / ".git" / "pwned").exists() and not (pkg / "KEY-READ").exists()
    assert sorted(p.name for p in Path(sys.prefix, "lib").glob("python*/site-packages/*.pth")) == pth_before
    assert "backend-path" in output
    attack_row("in-tree build backend (backend-path) in an evaluated commit [autoenv eval]",
               f"exit {result.returncode}, verdict {entry['verdict']['verdict']} at install, the ledger's entry the "
               f"harness's; .git/ untouched, no .pth added to the harness's venv, the key unread")


def server_package(root: Path, requirements: str) -> Path:
    """An OpenEnv server package (openenv.yaml beside pyproject.toml) whose requirements.txt is `requirements`,
    holding tiny-env in ./candidate, as an exported wrapper does."""
    server = root / "server"
    (server / "candidate" / "tiny_env").mkdir(parents=True)
    (server / "candidate" / "tiny_env" / "__init__.py").write_text("VALUE = 42\n")
    (server / "candidate" / "pyproject.toml").write_text(TINY_PYPROJECT)
    (server / "openenv.yaml").write_text("name: tiny\n")
    (server / "pyproject.toml").write_text('[project]\nname = "tiny-server"\nversion = "0.1.0"\ndependencies = []\n')
    (server / "requirements.txt").write_text(requirements)
    return server


@pytest.mark.parametrize("line", ["-e ./candidate", "--index-url http://127.0.0.1:9/simple", "../elsewhere"])
def test_a_server_venvs_requirement_file_takes_requirements_and_its_own_folders_only(tmp_path, monkeypatch, line):
    from autoenv.sandbox.serverenv import prepare

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    server = server_package(tmp_path, f"# the server\n{line}\n")
    with pytest.raises(AutoEnvError) as caught:
        prepare(server)
    assert caught.value.where == f"{server / 'requirements.txt'}:2", str(caught.value)
    assert not (tmp_path / "cache" / "autoenv").exists()  # refused before any venv


@pytest.mark.attack
def test_a_server_venv_builds_the_candidate_confined_and_refuses_a_shipped_pth(tmp_path, monkeypatch, attack_row):
    from autoenv.sandbox.serverenv import prepare, venv_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    server = server_package(tmp_path, "./candidate\n")
    python = prepare(server)
    proc = subprocess.run([str(python), "-c", "import tiny_env; print(tiny_env.VALUE, tiny_env.__file__)"],
                          capture_output=True, text=True, check=False)
    assert proc.stdout.startswith("42 ") and str(venv_dir(server)) in proc.stdout, proc.stderr  # installed, not editable
    shutil.rmtree(venv_dir(server))
    pyproject = server / "candidate" / "pyproject.toml"
    pyproject.write_text(TINY_PYPROJECT + '\n[tool.hatch.build.targets.wheel.force-include]\n"x.pth" = "zz-server.pth"\n')
    (server / "candidate" / "x.pth").write_text("import os\n")
    with pytest.raises(AutoEnvError) as caught:
        prepare(server)
    assert "zz-server.pth (removed)" in str(caught.value), str(caught.value)
    assert not list(venv_dir(server).glob("lib/python*/site-packages/zz-server.pth"))
    attack_row("a .pth shipped by the candidate a server venv installs (./candidate in requirements.txt) [install]",
               f"built in the sandbox, refused: {str(caught.value).split(': ', 1)[1].split('; tiny-env')[0]}")


@pytest.mark.slow
def test_the_candidate_installs_into_a_venv_of_its_own_layered_on_the_harnesss(tmp_path, monkeypatch):
    """Item 0 of issue 43: the harness's venv is not written; the child runs the candidate's venv, which
    imports verifiers and AutoEnv from the harness's site-packages and the candidate from its folder."""
    from autoenv.sandbox import candidatevenv
    from autoenv.sandbox.install import inspect_candidate

    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "hack-injection"  # depends on httpx besides verifiers: the harness satisfies both
    shutil.copytree(EXAMPLES / "hack-injection", copy, ignore=shutil.ignore_patterns("__pycache__"))
    harness = site_packages(sys.executable)
    before = sorted(p.name for p in harness.iterdir())
    started = time.time()
    assert install_candidate(copy) is True
    seconds = time.time() - started
    assert sorted(p.name for p in harness.iterdir()) == before  # nothing added to (or taken from) the harness's venv
    python = candidatevenv.child_python(copy)
    assert python == str(candidatevenv.python_of(copy)) and python != sys.executable
    own = sorted(p.name for p in site_packages(python).iterdir() if not p.name.startswith(("hatchling", "editables",
                                                                                          "_distutils", "distutils")))
    script = "import candidate_env, verifiers, httpx, autoenv; print(candidate_env.__file__, verifiers.__file__, autoenv.__file__)"
    where = subprocess.run([python, "-c", script], capture_output=True, text=True, check=False)
    assert where.returncode == 0, where.stderr[-2000:]
    cand, verifiers_file, autoenv_file = where.stdout.split()
    assert cand.startswith(str(copy)) and verifiers_file.startswith(str(harness))
    assert autoenv_file.startswith(str(PROJECT)), own
    assert inspect_candidate(copy).taskset  # the child, started with the candidate's venv, imports it
    print(f"\ncold install into a new candidate venv (layered; httpx and verifiers from the harness): {seconds:.2f} s; "
          f"its site-packages: {own}")


@pytest.mark.attack
def test_a_sitecustomize_beside_the_package_is_refused(tmp_path, venv, attack_row):
    """The editable hook puts the package's folder on sys.path; a sitecustomize.py there would run at every start."""
    pkg = package(tmp_path / "repo")
    (pkg / "sitecustomize.py").write_text("import sys; sys.stderr.write('CUSTOMIZE RAN')\n")
    with pytest.raises(AutoEnvError) as caught:
        install_candidate(pkg, python=venv)
    assert "sitecustomize.py, which every Python start imports" in str(caught.value), str(caught.value)
    assert "RAN" not in subprocess.run([venv, "-c", "pass"], capture_output=True, text=True, check=False).stderr
    attack_row("sitecustomize.py beside the package (on sys.path through its editable hook) [install]",
               "install refused: " + str(caught.value).split(": ", 1)[1].split("; tiny-env")[0].replace(str(pkg), "<package>"))


@needs_bwrap
@pytest.mark.slow
def test_a_dependency_without_a_wheel_is_built_in_a_sandbox_of_its_own(venv):
    """docopt 0.6.2 is published as an sdist only: its setup.py runs, but not as the harness's user with its key."""
    from autoenv.sandbox.build import fetch

    note = fetch(["docopt==0.6.2"], venv, "pyproject.toml:4", "the dependencies of tiny-env")
    assert note is not None and "built from source in a sandbox (bwrap)" in note
    assert (site_packages(venv) / "docopt.py").is_file()


def test_a_refused_install_into_the_candidates_venv_takes_the_venv_with_it(tmp_path, monkeypatch):
    from autoenv.sandbox import candidatevenv

    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOSTILE_MODE", "plant")
    pkg = package(tmp_path / "repo", TINY_PYPROJECT + "\n[tool.hatch.build.hooks.custom]\n")
    (pkg / "hatch_build.py").write_text(HOOK.replace("{mode}", os.environ.get("HOSTILE_MODE", "")).replace("{key}", KEY).replace("{git}", "/nonexistent").replace("{port}", "9"))
    harness = sorted(p.name for p in site_packages(sys.executable).iterdir())
    with pytest.raises(AutoEnvError, match="zz-planted.pth"):
        install_candidate(pkg)
    assert not candidatevenv.venv_dir(pkg).exists() and candidatevenv.child_python(pkg) == sys.executable
    assert sorted(p.name for p in site_packages(sys.executable).iterdir()) == harness


def test_a_candidate_venv_whose_package_folder_is_gone_is_pruned(tmp_path):
    from autoenv.sandbox.candidatevenv import SOURCE, prune

    kept, gone, making = tmp_path / "venvs" / "kept", tmp_path / "venvs" / "gone", tmp_path / "venvs" / "making"
    for venv in (kept, gone, making):
        venv.mkdir(parents=True)
    (kept / SOURCE).write_text(str(tmp_path))
    (gone / SOURCE).write_text(str(tmp_path / "deleted-scratch-run" / "candidate"))
    assert prune(tmp_path / "venvs") == [gone]
    assert kept.is_dir() and making.is_dir() and not gone.exists()
