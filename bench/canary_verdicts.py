"""Do the canaries change a clean example's verdict? The same evaluation with and without them, seed by seed.

For each seed (config.toml's `seed`, which draws the tasks) and each clean example (default: addition and
arithmetic, offline, config.toml's own budget), two scratch run repositories are evaluated with
`autoenv eval --offline`: `[probes] canaries = 0` and the shipped default. A clean example must get the
same verdict both ways and no failed gate: the table shows each pair, and the count of changes is the
answer (0 wanted). It also prints each run's wall time, the canaries served and the target's mean (the
statistics never see the canaries, but the extra rollouts change how the tasks' rollouts fall).

Usage: .venv/bin/python bench/canary_verdicts.py [--seeds 10] [--examples addition arithmetic]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoenv.core.paths import PROJECT
from autoenv.run.demo import make_run_repo


def run(example: str, seed: int, canaries: float | None, directory: Path) -> tuple[dict, float]:
    config = re.sub(r"(?m)^seed = \d+", f"seed = {seed}", (PROJECT / "config.toml").read_text())
    if canaries is not None:
        config = re.sub(r"(?m)^canaries = [^#\n]*", f"canaries = {canaries}  ", config)
    root = make_run_repo(example, directory, config, run_base=False)
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "autoenv.cli", "eval", "--offline"], cwd=root, capture_output=True,
                            text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=1800)
    wall = time.time() - started
    if result.returncode != 0:
        raise SystemExit(f"{example} seed {seed}: autoenv eval failed:\n{result.stdout[-2000:]}\n{result.stderr[-1000:]}")
    return json.loads((root / "feedback_log.jsonl").read_text().splitlines()[-1]), wall


def describe(entry: dict) -> tuple[str, list[str], str]:
    failed = [f["name"] for f in (entry.get("gates") or {}).get("findings", []) if f["status"] == "fail"]
    canary = next((f for f in (entry.get("gates") or {}).get("findings", []) if f["name"] == "canaries"), None)
    served = f"{canary['data'].get('served')}/{canary['data'].get('planned')}" if canary else "-"
    return entry["verdict"]["verdict"], failed, served


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--examples", nargs="+", default=["addition", "arithmetic"])
    args = parser.parse_args()
    changed = failures = 0
    walls: dict[str, list[float]] = {"off": [], "on": []}
    print("| example | seed | verdict without | verdict with | failed gates with | canaries served | target mean "
          "without / with | wall s without / with |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="autoenv-canary-verdicts-") as tmp:
        for example in args.examples:
            for seed in range(1, args.seeds + 1):
                off, wall_off = run(example, seed, 0.0, Path(tmp) / f"{example}-{seed}-off")
                on, wall_on = run(example, seed, None, Path(tmp) / f"{example}-{seed}-on")
                walls["off"].append(wall_off)
                walls["on"].append(wall_on)
                (v_off, f_off, _), (v_on, f_on, served) = describe(off), describe(on)
                changed += v_off != v_on
                failures += bool(f_on) or bool(f_off)
                mean = lambda e: e["stats"]["target"]["mean"] if e.get("stats") else float("nan")  # noqa: E731
                print(f"| {example} | {seed} | {v_off} | {v_on} | {', '.join(f_on) or '-'} | {served} | "
                      f"{mean(off):.3f} / {mean(on):.3f} | {wall_off:.1f} / {wall_on:.1f} |", flush=True)
    total = len(walls["on"])
    print(f"\nverdicts changed by the canaries: {changed} of {total}; runs with a failed gate: {failures}")
    print(f"wall time with canaries / without: {sum(walls['on']) / sum(walls['off']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
