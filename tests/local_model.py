"""Whether the real local model can be used by a test: built already (cached), or asked for.

The server build takes about 15 CPU-minutes and the trainer venv several more, so a plain
`bash setup.sh` leaves them out and these tests skip, saying why; `bash setup.sh --with-model`
(or `autoenv model build`) builds them once, and `AUTOENV_REAL_MODEL=1` lets a test build them itself.
"""

from __future__ import annotations

import os

import pytest

from autoenv.model.build import server_binary
from autoenv.model.trainenv import trainer_ready
from autoenv.model.weights import gguf_path, weights


def local_model_or_skip(trainer: bool = False) -> None:
    """Skip the calling test, with the way to run it, unless the model (and the trainer venv) are ready."""
    if os.environ.get("AUTOENV_REAL_MODEL") == "1":
        return
    missing = [what for what, ready in (("llama-server", server_binary().is_file()),
                                        ("the SmolLM2 weights", gguf_path(weights("smollm2")).is_file()),
                                        ("the trainer venv", trainer_ready() if trainer else True)) if not ready]
    if missing:
        pytest.skip(f"the local model is not built ({', '.join(missing)} missing): run `.venv/bin/autoenv model "
                    "build` or `bash setup.sh --with-model` once, or set AUTOENV_REAL_MODEL=1 to build it here")
