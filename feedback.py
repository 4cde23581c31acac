#!/usr/bin/env python3
"""Recompute statistics and the verdict for a commit from its stored traces.

Same flags as the seed's feedback.py: --config --outputs-dir --log-file --commit
--description --eval-success. All logic lives in the harness (`autoenv feedback`).
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE / ".venv" / "bin" / "python"

if __name__ == "__main__":
    if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != (HERE / ".venv").resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])
    try:
        from autoenv.cli import main
    except ImportError:
        sys.exit("feedback.py: the autoenv package is not installed; run: bash setup.sh")
    sys.exit(main(["feedback", *sys.argv[1:]]))
