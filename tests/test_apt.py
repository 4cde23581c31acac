"""apt-get at setup (autoenv/core/apt.py and setup.sh's apt_get): a held package lock is waited out, and told apart
from an unreachable archive. A fake `apt-get` on PATH plays the lock (a real one cannot be held here on purpose)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from autoenv.core.apt import apt_get, held_lock
from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import PROJECT

LOCKED = ("E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)\n"
          "E: Unable to lock directory /var/lib/apt/lists/")


@pytest.fixture
def fake_apt(tmp_path, monkeypatch):
    """An apt-get that fails with the lock message its first `locked` calls, then succeeds (or fails otherwise)."""
    def make(locked: int, then: str = "ok") -> tmp_path:
        count = tmp_path / "count"
        count.write_text("0")
        script = tmp_path / "bin" / "apt-get"
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"""#!/bin/sh
n=$(cat {count}); echo $((n + 1)) > {count}
if [ "$n" -lt {locked} ]; then printf '%s\\n' "{LOCKED}" >&2; exit 100; fi
if [ "{then}" = ok ]; then exit 0; fi
echo "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Could not resolve host" >&2; exit 100
""")
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
        return count
    return make


def test_the_lock_message_names_the_lock_and_its_holder():
    assert held_lock(LOCKED) == "/var/lib/apt/lists/lock (held by process 4242, apt-get)"
    assert held_lock("E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend)") is not None
    assert held_lock("E: Unable to locate package nosuch") is None


def test_a_held_lock_is_waited_out_and_said_once(fake_apt):
    count = fake_apt(locked=3)
    said = []
    apt_get("update", "-qq", poll=0.01, note=said.append)
    assert count.read_text().strip() == "4"
    assert len(said) == 1 and "waiting for the package lock /var/lib/apt/lists/lock (held by process 4242" in said[0]


def test_a_lock_held_past_the_wait_names_the_lock_and_what_to_do(fake_apt):
    fake_apt(locked=10**6)
    with pytest.raises(AutoEnvError) as caught:
        apt_get("update", wait=0.05, poll=0.01, note=lambda _: None)
    assert "the package lock /var/lib/apt/lists/lock (held by process 4242, apt-get) was still held" in caught.value.what
    assert "unattended-upgrades" in caught.value.fix and "reachable" not in caught.value.fix


def test_an_unreachable_archive_is_not_called_a_lock(fake_apt):
    fake_apt(locked=0, then="unreachable")
    with pytest.raises(AutoEnvError) as caught:
        apt_get("update", poll=0.01, note=lambda _: None)
    assert "Could not resolve host" in caught.value.what and "archive is reachable" in caught.value.fix


def test_setup_sh_waits_for_the_lock_the_same_way(fake_apt, tmp_path):
    function = re.search(r"(?ms)^apt_get\(\) \{.*?^\}\n", (PROJECT / "setup.sh").read_text()).group(0)
    function = function.replace("sleep 5", "sleep 0.01")  # the wait, shortened for the test
    fake_apt(locked=2)
    ok = subprocess.run(["bash", "-c", f"set -euo pipefail\n{function}\napt_get update -qq && echo installed"],
                        capture_output=True, text=True, env=os.environ)
    assert ok.returncode == 0 and "waiting for the package lock" in ok.stdout and "installed" in ok.stdout
    fake_apt(locked=0, then="unreachable")
    failed = subprocess.run(["bash", "-c", f"set -euo pipefail\n{function}\napt_get update -qq || echo failed"],
                            capture_output=True, text=True, env=os.environ)
    assert "Could not resolve host" in failed.stderr and "failed" in failed.stdout and "waiting" not in failed.stdout
