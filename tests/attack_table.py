"""Print the table "attack or fault -> what happened": run every test marked `attack`.

Each such test stages one attack or fault for real (a hostile candidate in and out of the
sandbox, a forged or damaged ledger, rewards, load() and tools that never return, provider
bursts, a provider that is down or silent, an unreachable endpoint, bracketed text in each
kind of message), asserts what the harness must do, and adds a row built from what it
observed. The table ends the pytest output (tests/conftest.py); a row whose test failed is
marked so. Extra arguments go to pytest (e.g. `-x`, `-k sandbox`).

    .venv/bin/python tests/attack_table.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    command = [sys.executable, "-m", "pytest", "-m", "attack", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]
    sys.exit(subprocess.run(command, cwd=ROOT, check=False).returncode)
