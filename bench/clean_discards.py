"""How often is a clean example discarded online by chance? docs/training.md's training example, with a real model.

`addition` (a clean example: its reward reads the last equation) is evaluated online with the local
SmolLM2 as target and the scripted oracle as strong, at the real-model budget (12 tasks x 4 rollouts),
once per seed of the task sample. A clean example must never be discarded: any `discard` is a false
cause, and the table says which gate named it. Before issue 33, the derived kitchen-sink put the true
line last by chance on 2 of 12 tasks about one run in nine, and the commit was discarded for
"finds the answer anywhere in the reply".

Needs the local model (`bash setup.sh --with-model`); 10 seeds take about 15-25 minutes on 2 cores.

Usage: .venv/bin/python bench/clean_discards.py [--seeds 10] [--example addition]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from autoenv.core.paths import EXAMPLES
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.model.realrun import local_model, oracle_endpoint, real_config
from autoenv.run.demo import make_run_repo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--example", default="addition")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autoenv-clean-discards-"))
    rows = []
    with local_model("smollm2", log=work / "llama-server.log", progress=print) as server, \
            oracle_endpoint(EXAMPLES / args.example, log=work / "oracle.log") as strong_url:
        for seed in range(1, args.seeds + 1):
            config = real_config(server.base_url, "smollm2", strong_url, {"max_concurrent": server.slots})
            config = re.sub(r"(?m)^seed = \d+", f"seed = {seed}", config)
            root = make_run_repo(args.example, work / f"seed-{seed}", config)
            started = time.monotonic()
            entry = evaluate(EvalOptions(cwd=root, description=f"{args.example}, sample seed {seed}"))
            gates = entry.gates
            warned = [f.name for f in gates.findings if f.status == "warn" and "within noise" in f.message
                      or "unconfirmed" in f.message] if gates else []
            target = entry.stats.get("target")
            rows.append((seed, entry.verdict.verdict, target.mean if target else None, warned,
                         entry.verdict.reason, time.monotonic() - started))
            print(f"seed {seed}: {entry.verdict.verdict} in {rows[-1][-1]:.0f} s; target {rows[-1][2]}; "
                  f"noise warnings {warned}; {entry.verdict.reason[:160]}", flush=True)
    print()
    print(f"{args.example}, online with SmolLM2 as target, {args.seeds} seeds of the task sample (outputs in {work})")
    print(f"{'seed':>4}  {'verdict':<12} {'target':>7}  noise warnings (within noise / unconfirmed: no cause)")
    for seed, verdict, mean, warned, _, _ in rows:
        print(f"{seed:>4}  {verdict:<12} {'-' if mean is None else f'{mean:.3f}':>7}  {', '.join(warned) or '-'}")
    discards = [r for r in rows if r[1] == "discard"]
    print(f"discards of the clean example: {len(discards)} of {len(rows)}")
    for seed, _, _, _, reason, _ in discards:
        print(f"  seed {seed}: {reason}")


if __name__ == "__main__":
    main()
