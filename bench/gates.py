"""Are the gates cheap enough to run before every evaluation?

For each clean example, in one run: the wall time of `autoenv check`, of `autoenv probe`
(checks + oracle + exploit probes at the default sample sizes) and of one full offline
evaluation at the config's budget, each in a scratch run repository through the real
CLI. Prints the probe / evaluation ratio (aim: under 0.25).

Usage: .venv/bin/python bench/gates.py [--examples arithmetic,shopping] [--examples-per-eval N]
       .venv/bin/python bench/gates.py --before REF [--examples arithmetic,shopping,hack-toolspam] [--runs 2]

`--before REF`: the cost of the audit itself, side by side: `autoenv probe` on each example with the harness of
the git ref REF and with this tree's, alternating, `--runs` times each (the first `check` warms the install);
prints the best wall time of each and the audit's own probe seconds (audit.json), and their ratios. REF's tree is
exported with `git archive` and installed editable into a venv of its own (uv, about a minute the first time: the
package index or uv's cache), so both the harness and the candidate's child run REF's code: the child imports
AutoEnv from the venv its harness runs in, and a harness run from this venv with REF on PYTHONPATH would drive a
child of this tree's code.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from autoenv.core.paths import PROJECT, examples
from autoenv.run.demo import make_run_repo


def timed(args: list[str], cwd: Path, python: str = sys.executable) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run([python, "-m", "autoenv.cli", *args], cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - started, proc.returncode


def harness_of(ref: str, into: Path) -> str:
    """The python of a venv holding the harness of git ref `ref`, installed editable from its exported tree."""
    data = subprocess.run(["git", "-C", str(PROJECT), "archive", ref], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    venv = into / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        sys.exit("bench/gates.py --before needs uv (bash setup.sh installs it into .venv)")
    proc = subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "-e", str(into)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"could not install the harness of {ref} into {venv}: {proc.stderr.strip()[-1500:]}")
    return str(venv / "bin" / "python")


def probe_seconds(root: Path) -> float:
    """The audit's own probe time of the newest probe run under `root` (gates/audit.json)."""
    newest = max((root / "outputs" / "scratch").glob("*/gates/audit.json"), key=lambda p: p.stat().st_mtime)
    return float(json.loads(newest.read_text()).get("probe_seconds") or 0.0)


def side_by_side(examples_: list[str], ref: str, runs: int) -> None:
    """`autoenv probe` under the harness of `ref` and under this tree's, alternating, best of `runs` each."""
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        pythons = {"before": harness_of(ref, before), "after": sys.executable}
        print(f"harness before: {ref} (its own venv); after: this tree; best of {runs} runs each")
        print(f"{'example':<16} {'probe s before':>15} {'after':>8} {'ratio':>6} {'audit s before':>15} {'after':>8} "
              f"{'ratio':>6}")
        for example in examples_:
            best: dict[str, tuple[float, float]] = {}
            for side, path in (("before", before), ("after", PROJECT)) * runs:
                config = (path / "config.toml").read_text()  # each harness with the config it knows
                root = make_run_repo(example, Path(tmp) / f"{example}-{side}", config) \
                    if not (Path(tmp) / f"{example}-{side}").exists() else Path(tmp) / f"{example}-{side}"
                timed(["check"], root, pythons[side])
                wall, code = timed(["probe"], root, pythons[side])
                if code not in (0, 1):  # 1: a gate failed (a planted example), which is still a measured audit
                    sys.exit(f"`autoenv probe` on {example} under the {side} harness exited {code}: see {root}")
                audit = probe_seconds(root)
                old = best.get(side)
                best[side] = (min(wall, old[0]), min(audit, old[1])) if old else (wall, audit)
            (wb, ab), (wa, aa) = best["before"], best["after"]
            print(f"{example:<16} {wb:>15.1f} {wa:>8.1f} {wa / wb:>6.2f} {ab:>15.1f} {aa:>8.1f} {aa / max(ab, 1e-9):>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    clean = [e for e in examples() if not e.startswith("hack-")]
    parser.add_argument("--examples", default=",".join(clean))
    parser.add_argument("--examples-per-eval", type=int, default=None, help="override budget.examples (default: config)")
    parser.add_argument("--before", help="git ref: time the audit under that harness and this tree's, side by side")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    if args.before:
        side_by_side(args.examples.split(","), args.before, args.runs)
        return
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
