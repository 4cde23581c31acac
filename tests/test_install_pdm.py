"""pdm's build backend installs confined (autoenv.sandbox.buildcheck, build): its `.pdm-build` is a private folder.

pdm-backend stages every build in `<package>/.pdm-build`, which the sandbox shows read-only with the rest of
the package; the build gets an empty folder of its own mounted there, and nothing written there is left.
A pdm build hook (`pdm_build.py`, which pdm-backend imports from the package folder) is the candidate's code:
it runs in the sandbox, without the key, the repository or any file outside what the build needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autoenv.core.errors import AutoEnvError
from autoenv.sandbox.buildcheck import build_plan
from autoenv.sandbox.confine import _probe
from autoenv.sandbox.install import install_candidate, site_packages, uv_binary

pytestmark = pytest.mark.timeout(300)

BWRAP = _probe()
needs_bwrap = pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"no bubblewrap sandbox here: {BWRAP.reason}")
KEY_VAR, KEY = "HOSTILE_PDM_API_KEY", "sk-pdm-test-key-never-readable"

PDM_PYPROJECT = """[project]
name = "tiny-pdm"
version = "0.1.0"
dependencies = []

[build-system]
requires = ["pdm-backend"]
build-backend = "pdm.backend"
"""

# pdm-backend calls these module-level hooks from pdm_build.py in the package folder: candidate code at build time.
HOOK = '''import glob, json, os, pathlib

def pdm_build_initialize(context):
    said = {{}}
    found = []
    for environ in glob.glob("/proc/*/environ"):
        try:
            if b"{key}" in open(environ, "rb").read():
                found.append(environ)
        except OSError:
            pass
    said["key-in-proc"] = f"succeeded ({{found}})" if found else "failed"
    said["key-in-environment"] = "succeeded" if "{key}" in str(os.environ) else "failed"
    try:
        said["read-outside"] = "succeeded: " + pathlib.Path("{secret}").read_text()
    except OSError as e:
        said["read-outside"] = f"failed ({{e.strerror}})"
    for name, target in (("write-git", "{git}/pwned"), ("write-package", "{package}/written"),
                         ("write-outside", "{outside}"), ("write-home", "{home}")):
        try:
            pathlib.Path(target).write_text("x")
            said[name] = "wrote (inside the sandbox)"
        except OSError as e:
            said[name] = f"failed ({{e.strerror}})"
    (context.build_dir / "left-behind").parent.mkdir(parents=True, exist_ok=True)
    (context.build_dir / "left-behind").write_text("x")
    raise SystemExit("REPORT " + json.dumps(said))
'''


@pytest.fixture
def venv(tmp_path):
    """A venv of the test's own: the installs under test write here, never into the harness's venv."""
    path = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(path)], check=True)
    return str(path / "bin" / "python")


def pdm_package(root: Path) -> Path:
    """A git repository `root` holding tiny-pdm (pdm-backend's default layout) in root/candidate."""
    pkg = root / "candidate"
    (pkg / "tiny_pdm").mkdir(parents=True)
    (pkg / "tiny_pdm" / "__init__.py").write_text("VALUE = 41 + 1\n")
    (pkg / "pyproject.toml").write_text(PDM_PYPROJECT)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return pkg


@needs_bwrap
def test_a_pdm_backend_package_installs_editable_into_a_venv_and_imports(tmp_path, venv):
    pkg = pdm_package(tmp_path / "repo")
    assert build_plan(pkg).private_writes == (".pdm-build",)
    assert install_candidate(pkg, python=venv) is True
    proc = subprocess.run([venv, "-c", "import tiny_pdm; print(tiny_pdm.VALUE, tiny_pdm.__file__)"],
                          capture_output=True, text=True, check=False)
    assert proc.stdout.split() == ["42", str(pkg / "tiny_pdm" / "__init__.py")], proc.stderr[-2000:]  # editable
    assert not (pkg / ".pdm-build").exists()  # the build's folder was private: nothing of it is left
    own = sorted(p.name for p in site_packages(venv).iterdir() if "tiny" in p.name)
    assert own == ["_editable_impl_tiny_pdm.pth", "tiny_pdm-0.1.0.dist-info"], own
    pth = (site_packages(venv) / "_editable_impl_tiny_pdm.pth").read_text().split()
    assert pth == [str(pkg)], pth


@needs_bwrap
@pytest.mark.attack
def test_a_pdm_build_hook_runs_confined(tmp_path, venv, monkeypatch, attack_row):
    monkeypatch.setenv(KEY_VAR, KEY)
    root = tmp_path / "repo"
    pkg = pdm_package(root)
    secret = tmp_path / "outside" / "credentials"
    secret.parent.mkdir()
    secret.write_text("the harness's secret")
    outside, home = tmp_path / "outside" / "planted", Path.home() / f".autoenv-pdm-test-{tmp_path.name}"
    (pkg / "pdm_build.py").write_text(HOOK.format(key=KEY, secret=secret, git=root / ".git", package=pkg,
                                                  outside=outside, home=home))
    try:
        with pytest.raises(AutoEnvError) as caught:
            install_candidate(pkg, python=venv)
        planted = {path: path.exists() for path in (root / ".git" / "pwned", pkg / "written", outside, home)}
    finally:
        home.unlink(missing_ok=True)
    report = json.loads(str(caught.value).split("REPORT ", 1)[1].splitlines()[0])
    print("\n" + "\n".join(f"  {k:20} -> {v}" for k, v in report.items()))
    assert report["key-in-proc"] == "failed" and report["key-in-environment"] == "failed", report
    assert report["read-outside"].startswith("failed"), report
    assert report["write-git"].startswith("failed") and report["write-package"].startswith("failed"), report
    assert not any(planted.values()), planted  # what it wrote inside the sandbox never reached this machine
    assert not (pkg / ".pdm-build").exists() and not list(site_packages(venv).glob("*tiny*"))
    attack_row("pdm-backend build hook (pdm_build.py): key in /proc and the environment, a file outside the "
               "repository, writes to .git/, the package, /tmp and $HOME [install]",
               "; ".join(f"{k}: {v}" for k, v in report.items())
               + f"; on this machine afterwards: {sum(planted.values())} of {len(planted)} files planted, "
                 "no .pdm-build left, the install refused")


@pytest.mark.parametrize("backend, folder", [("pdm.backend", ".pdm-build"), ("setuptools.build_meta", "build")])
def test_a_link_where_the_build_writes_is_refused(tmp_path, venv, backend, folder):
    """A link there would have the sandbox mount the build's writable folder wherever it points (.git/)."""
    root = tmp_path / "repo"
    pkg = pdm_package(root)
    (pkg / "pyproject.toml").write_text(PDM_PYPROJECT.replace('"pdm.backend"', f'"{backend}"')
                                        .replace('["pdm-backend"]', '["setuptools"]' if "setuptools" in backend
                                                 else '["pdm-backend"]'))
    (pkg / folder).symlink_to(root / ".git")
    with pytest.raises(AutoEnvError) as caught:
        install_candidate(pkg, python=venv)
    assert caught.value.where == str(pkg / folder) and "a link" in str(caught.value), str(caught.value)
    assert not list(site_packages(venv).glob("*tiny*"))
