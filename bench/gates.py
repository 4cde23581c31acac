"""Are the gates cheap enough to run before every evaluation?

For each clean example, in one run: the wall time of `autoenv check`, of `autoenv probe`
(checks + oracle + exploit probes at the default sample sizes) and of one full offline
evaluation at the config's budget, each in a scratch run repository through the real
CLI. Prints the probe / evaluation ratio (aim: under 0.25).

Usage: .venv/bin/python bench/gates.py [--examples arithmetic,shopping] [--examples-per-eval N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoenv.core.paths import PROJECT, examples
from autoenv.run.demo import make_run_repo


def timed(args: list[str], cwd: Path) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "autoenv.cli", *args], cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - started, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    clean = [e for e in examples() if not e.startswith("hack-")]
    parser.add_argument("--examples", default=",".join(clean))
    parser.add_argument("--examples-per-eval", type=int, default=None, help="override budget.examples (default: config)")
    args = parser.parse_args()
    config = (PROJECT / "config.toml").read_text()
    if args.examples_per_eval:
        config = re.sub(r"(?m)^examples = \d+", f"examples = {args.examples_per_eval}", config)
    budget = re.search(r"(?m)^examples = (\d+)", config).group(1), re.search(r"(?m)^rollouts_per_example = (\d+)", config).group(1)
    print(f"budget: {budget[0]} tasks x {budget[1]} rollouts x 2 models (offline)")
    print(f"{'example':<12} {'check s':>8} {'probe s':>8} {'eval s':>8} {'probe/eval':>11}")
    for example in args.examples.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            root = make_run_repo(example, Path(tmp) / "run", config)
            timed(["check"], root)  # the first call installs the candidate; time the steady state
            check, rc_check = timed(["check"], root)
            probe, rc_probe = timed(["probe"], root)
            evaluation, rc_eval = timed(["eval", "--offline"], root)
            codes = "" if (rc_check, rc_probe, rc_eval) == (0, 0, 0) else f"  exit codes {rc_check}/{rc_probe}/{rc_eval}"
            print(f"{example:<12} {check:>8.1f} {probe:>8.1f} {evaluation:>8.1f} {probe / evaluation:>11.2f}{codes}")


if __name__ == "__main__":
    main()
