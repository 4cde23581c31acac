"""autoenv/core/venvseal.py: the harness's venv checked against the seal setup wrote, by an interpreter that runs no .pth.

Each test makes a real venv of its own (never the suite's, which other tests use meanwhile) and plants what a
candidate's unconfined build backend once left in the harness's: a `.pth` whose import line runs at every start.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from autoenv.core import venvseal
from autoenv.core.errors import AutoEnvError
from autoenv.evaluation import preflight

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def venv(tmp_path) -> Path:
    """A real venv (no pip: quick), sealed as setup leaves it."""
    path = tmp_path / "project" / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    (venvseal.site_packages(path)[0] / "goodpkg").mkdir()
    (venvseal.site_packages(path)[0] / "goodpkg" / "__init__.py").write_text("X = 1\n")
    venvseal.seal(path)
    return path


def site(venv: Path) -> Path:
    return venvseal.site_packages(venv)[0]


def check(venv: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", str(ROOT / "autoenv/core/venvseal.py"), "check", str(venv)],
                          capture_output=True, text=True, check=False)


def plant_pth(venv: Path, marker: Path) -> Path:
    pth = site(venv) / "zz_candidate_hook.pth"
    pth.write_text(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n")
    return pth


def test_a_sealed_venv_checks_clean_and_a_dropped_pth_is_named_without_running_it(venv, tmp_path):
    assert check(venv).returncode == 0
    marker = tmp_path / "pth-ran"
    pth = plant_pth(venv, marker)
    subprocess.run([str(venv / "bin" / "python"), "-c", "pass"], check=True)
    assert marker.read_text() == "ran"  # the hook is real: any interpreter of the venv runs it
    marker.unlink()
    said = check(venv)
    assert said.returncode == 1 and f"{pth}: a .pth file added since setup" in said.stdout
    assert not marker.exists()  # the check's own interpreter ran none of it


def test_changed_code_a_new_module_and_a_startup_hook_on_a_pth_path_are_named(venv, tmp_path):
    elsewhere = tmp_path / "candidate"
    elsewhere.mkdir()
    before = venvseal.snapshot(venv)
    (site(venv) / "_editable_impl_candidate_env.pth").write_text(str(elsewhere))
    venvseal.admit(venv, before)  # as an install of the candidate admits its path .pth
    assert check(venv).returncode == 0
    (elsewhere / "sitecustomize.py").write_text("import os\n")  # the candidate's code, not the venv, changed
    (site(venv) / "goodpkg" / "__init__.py").write_text("X = 2  # patched\n")
    (site(venv) / "sneaky.py").write_text("")
    out = check(venv).stdout
    assert f"{site(venv) / 'goodpkg'}: code in this package changed since setup" in out
    assert f"{site(venv) / 'sneaky.py'}: a top-level module added since setup" in out
    assert f"{elsewhere / 'sitecustomize'}: a sitecustomize module on a path _editable_impl_candidate_env.pth adds" in out


def test_what_the_install_admits_is_sealed_and_a_removal_is_no_change(venv):
    before = venvseal.snapshot(venv)
    (site(venv) / "newdep").mkdir()
    (site(venv) / "newdep" / "__init__.py").write_text("")
    assert "a top-level package added" in check(venv).stdout
    assert venvseal.admit(venv, before) == [f"{site(venv).relative_to(venv)}/newdep"]
    assert check(venv).returncode == 0
    shutil.rmtree(site(venv) / "goodpkg")
    assert check(venv).returncode == 0


@pytest.mark.attack
def test_evaluate_sh_refuses_before_autoenv_starts_and_preflight_refuses_too(venv, tmp_path, monkeypatch, attack_row):
    project = venv.parent
    shutil.copy(ROOT / "evaluate.sh", project / "evaluate.sh")
    (project / "autoenv" / "core").mkdir(parents=True)
    shutil.copy(ROOT / "autoenv/core/venvseal.py", project / "autoenv/core/venvseal.py")
    ran = tmp_path / "autoenv-ran"
    stand_in = venv / "bin" / "autoenv"  # the harness itself is not what is under test here
    stand_in.write_text(f"#!/bin/sh\necho ran > {ran}\n")
    stand_in.chmod(0o755)
    assert subprocess.run(["bash", str(project / "evaluate.sh")], capture_output=True, check=False).returncode == 0 and ran.exists()
    ran.unlink()
    pth = plant_pth(venv, tmp_path / "marker")
    said = subprocess.run(["bash", str(project / "evaluate.sh")], capture_output=True, text=True, check=False)
    assert said.returncode == 2 and str(pth) in said.stdout and "nothing was evaluated" in said.stderr
    assert not ran.exists()
    monkeypatch.setattr(preflight, "check_from_outside", partial(venvseal.check_from_outside, venv))
    with pytest.raises(AutoEnvError, match="the harness's venv changed since setup") as refused:
        preflight.require_sealed_venv()
    assert str(pth) in refused.value.what and "bash setup.sh" in refused.value.fix
    attack_row("a .pth dropped into the harness's venv (runs in every later autoenv command)",
               f"evaluate.sh exit {said.returncode} before autoenv starts, naming {pth.name}; autoenv eval refuses "
               "in preflight and autoenv verify lists it (checked by an interpreter started -I -S)")
