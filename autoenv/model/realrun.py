"""An online evaluation with a real local model as [target] and the built-in scripted oracle as [strong] (no key)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import PROJECT
from autoenv.model.build import build_server
from autoenv.model.server import Server, free_port
from autoenv.model.weights import ensure_gguf, weights

# A small budget that a 135M model on 2 CPU cores finishes in minutes; replies are capped so a
# rambling small model cannot hold a slot for minutes.
REAL_BUDGET = {"examples": 12, "rollouts_per_example": 4, "max_concurrent": 2, "rollout_timeout": 300}
REAL_SAMPLING = {"max_tokens": 192}


def real_config(target_url: str, target_model: str, strong_url: str, budget: dict[str, int] | None = None,
                base: str | None = None, keep_examples: bool = False) -> str:
    """config.toml (`base`, default the project's) with [target] at a local server, [strong] at the built-in
    oracle, the offline judge, no key; `keep_examples` keeps the base's task count (so the seed draws the
    same tasks as the evaluation whose held-out split is measured)."""
    text = base or (PROJECT / "config.toml").read_text()
    settings = {**REAL_BUDGET, **(budget or {})}
    if keep_examples:
        settings.pop("examples", None)
    for key, value in settings.items():
        text = re.sub(rf"(?m)^{key} = [^\n#]*", f"{key} = {value}  ", text)
    target, strong = text.split("[strong]", 1)
    target = re.sub(r'(?m)^model = "[^"]*"', f'model = "{target_model}"', target, count=1)
    target = re.sub(r'(?m)^base_url = "[^"]*"', f'base_url = "{target_url}"', target, count=1)
    target = re.sub(r'(?m)^max_tokens = \d+', f'max_tokens = {REAL_SAMPLING["max_tokens"]}', target, count=1)
    strong = re.sub(r'(?m)^model = "[^"]*"', 'model = "oracle"', strong, count=1)
    strong = re.sub(r'(?m)^base_url = "[^"]*"', f'base_url = "{strong_url}"', strong, count=1)
    text = target + "[strong]" + strong
    text = text.replace('api_key_var = "OPENAI_API_KEY"', 'api_key_var = ""')
    return re.sub(r'(?m)^backend = "[^"]*"', 'backend = "offline"', text, count=1)


@contextmanager
def oracle_endpoint(candidate: Path, log: Path | None = None) -> Iterator[str]:
    """The built-in scripted endpoint (`autoenv serve`) playing the candidate's oracle hook; yields its base URL."""
    port = free_port()
    out = log.open("w") if log else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "autoenv.cli", "serve", "--port", str(port), "--candidate",
                             str(candidate)], stdout=subprocess.PIPE, stderr=out, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"})
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if "serving" not in line:
            raise AutoEnvError(f"the built-in oracle endpoint did not start: {line.strip() or 'no output'}",
                               where=str(log or candidate), fix="run `autoenv check` on the candidate first")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def local_model(name: str = "smollm2", gguf: Path | None = None, log: Path | None = None,
                progress: Callable[[str], None] = print,
                slots: int = 0) -> Iterator[Server]:
    """The weights and the server binary (both cached), the server started and healthy; stopped on exit."""
    model = weights(name)
    path = gguf or ensure_gguf(model, progress)
    binary = build_server(progress)
    started = time.monotonic()
    with Server(binary, path, name, slots=slots, log=log).start() as server:
        progress(f"model: {name} ({path.name}) served at {server.base_url} "
                 f"({server.slots} slots, {server.threads} threads; ready in {time.monotonic() - started:.1f} s)")
        yield server
