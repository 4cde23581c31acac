"""What the audit the candidate cannot tell apart costs an evaluation: the fresh child, the stored rewards scored
again, the blind probes, measured inside real evaluations beside the evaluation's whole wall time.

For each example (default: arithmetic, a single-turn taskset, and clean-toolecho, a tool env), on a scratch
run repository with config.toml's own budget (40 tasks x 4 rollouts x 2 models), `autoenv eval --offline`
runs, then `--force` again (the next iteration: installed, the child forked by the warm server when it runs).
Each run's ledger entry and records give:

- restart: ending the audit's child and starting the fresh one (ctx timings `restart`);
- reproduce: every stored rollout scored again in it (timings `reproduce`);
- blind: the blind probes on the stored traces (gates/derived.json `blind_seconds`);
- wall: the evaluation's whole wall time (the sum of its stage timings).

It prints one row per run and the share `added / (wall - added)`: the evaluation's wall time against the same
evaluation without these parts (the commit before them ran exactly the rest). The issue's bound is 15%.

Usage: .venv/bin/python bench/audit_cost.py [--examples arithmetic clean-toolecho] [--warm 0|1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autoenv.core.paths import PROJECT
from autoenv.run.demo import make_run_repo
from autoenv.sandbox import warmchild

STAGES = ("install", "gates", "rollouts", "derived", "stats", "judge", "record")


def evaluate(root: Path, env: dict[str, str], *extra: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "autoenv.cli", "eval", "--offline", *extra], cwd=root, env=env,
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise SystemExit(f"autoenv eval failed in {root}:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return json.loads((root / "feedback_log.jsonl").read_text().splitlines()[-1])


def row(name: str, run: str, root: Path, entry: dict) -> tuple[str, float]:
    timings = entry.get("timings") or {}
    derived = json.loads((root / entry["outputs"] / "gates" / "derived.json").read_text())
    restart, reproduce = timings.get("restart", 0.0), timings.get("reproduce", 0.0)
    blind = derived.get("blind_seconds") or 0.0
    wall = sum(timings.get(stage, 0.0) for stage in STAGES)
    added = restart + reproduce + blind
    share = added / (wall - added) if wall > added else float("nan")
    return (f"| {name} | {run} | {wall:.1f} | {restart:.2f} | {reproduce:.2f} | {blind:.2f} | {added:.2f} | "
            f"{share:+.1%} |"), share


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=["arithmetic", "clean-toolecho"])
    parser.add_argument("--warm", choices=("0", "1"), default="1", help="AUTOENV_WARM for the runs (default 1)")
    args = parser.parse_args()
    shares = []
    print("| example | run | wall s | restart s | reproduce s | blind s | added s | added / rest |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="autoenv-audit-cost-") as tmp:
        env = {**os.environ, "NO_COLOR": "1", "AUTOENV_WARM": args.warm, "AUTOENV_CACHE": str(Path(tmp) / "cache")}
        try:
            for name in args.examples:
                root = make_run_repo(name, Path(tmp) / name, (PROJECT / "config.toml").read_text(), run_base=False)
                for run, extra in (("first", ()), ("next (--force)", ("--force",))):
                    line, share = row(name, run, root, evaluate(root, env, *extra))
                    print(line, flush=True)
                    shares.append(share)
        finally:
            os.environ["AUTOENV_CACHE"] = env["AUTOENV_CACHE"]
            warmchild.stop_all()
    print(f"\nlargest share: {max(shares):+.1%} (the issue's bound: 15%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
