"""`autoenv demo --real-model`: an example evaluated online with a real local model as target, the oracle as strong."""

from __future__ import annotations

import tempfile
from pathlib import Path

from autoenv.core import display
from autoenv.core.paths import EXAMPLES
from autoenv.core.record import Entry
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.model.realrun import local_model, oracle_endpoint, real_config
from autoenv.run.demo import make_run_repo


def real_model_demo(example: str, model: str = "smollm2", directory: Path | None = None,
                    budget: dict[str, int] | None = None) -> tuple[Entry, Path]:
    """Serve `model` and the oracle, build the scratch run repository pointing at them, evaluate it online."""
    logs = Path(tempfile.mkdtemp(prefix="autoenv-real-model-logs-"))
    with local_model(model, log=logs / "llama-server.log", progress=display.console.print) as server, \
            oracle_endpoint(EXAMPLES / example, log=logs / "oracle.log") as strong_url:
        budget = {"max_concurrent": server.slots, **(budget or {})}
        root = make_run_repo(example, directory, real_config(server.base_url, model, strong_url, budget))
        display.console.print(f"scratch run repository: {root} (branch autoenv/demo-{example}); "
                              f"target {model} at {server.base_url}, strong: the scripted oracle at {strong_url}")
        entry = evaluate(EvalOptions(cwd=root, description=f"demo of the {example} example with {model} as target"))
    display.console.print(f"results: {root}/feedback/{entry.commit}.md, {root}/outputs/{entry.commit}/; "
                          f"server logs: {logs}")
    return entry, root
