"""One iteration's wall time: the seed-shaped pipeline vs `autoenv eval --offline` as shipped.

Same candidate (examples/arithmetic), budget, seed and built-in endpoint, with latency
injected before every model reply (0 s and 1 s by default), side by side in one run:

(a) seed-shaped: a smoke evaluation (1 rollout), then the target evaluation, then the strong
    one, each its own worker process with verifiers' stock null harness, one after the other;
(b) `autoenv eval --offline` on a scratch run repository (autoenv.run.demo.make_run_repo) with
    `[offline] latency` set: install, checks and probes, smoke, both models concurrently
    through the in-process harness, statistics, offline judge, ledger: a run's first evaluation
    (the candidate installed, the warm child's server started);
(c) the loop's next iteration on that run: `autoenv eval --offline --force` again (every rollout
    played again, no cache, no rescoring), the candidate installed, the child forked by the
    warm server (autoenv.sandbox.warmchild).

It prints both wall times, the ratio b/a, and the latency bound of the model calls alone,
`(1 + ceil(rollouts / concurrency)) * turns * latency` (the smoke wave, then every rollout
of both models in waves of `budget.max_concurrent`; one turn per arithmetic rollout).

Usage: .venv/bin/python bench/iteration.py [--examples 40] [--rollouts 4] [--concurrency 8] [--latency 0 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoenv.core.job import Job, RolloutPlan, RuntimeSpec, Seat
from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.core.traces import read_rollouts
from autoenv.run.demo import make_run_repo
from autoenv.sandbox import warmchild
from autoenv.sandbox.rollouts import run_worker

EXAMPLE = "arithmetic"
TURNS = 1


def config_text(examples: int, rollouts: int, concurrency: int, latency: float) -> str:
    text = (PROJECT / "config.toml").read_text()
    for key, value in {"examples": examples, "rollouts_per_example": rollouts, "max_concurrent": concurrency,
                       "latency": latency}.items():
        text, count = re.subn(rf"(?m)^{key} = [^\n#]*", f"{key} = {value}  ", text)
        assert count == 1, key
    return text


def seed_shaped(examples: int, rollouts: int, concurrency: int, latency: float, seed: int) -> float:
    """Smoke, target, strong: three worker processes in a row, stock null harness."""
    candidate = EXAMPLES / EXAMPLE
    stages = [("smoke", "noisy-oracle:0.45", 1, 1), ("target", "noisy-oracle:0.45", examples, rollouts),
              ("strong", "oracle", examples, rollouts)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="autoenv-bench-") as tmp:
        for name, model, n, r in stages:
            out = Path(tmp) / name
            job = Job(candidate_dir=str(candidate), out_dir=str(out), seed=seed, max_concurrent=concurrency,
                      rollout_timeout=300, max_turns=10, embedded_latency=latency,
                      runtime=RuntimeSpec(type="subprocess", harness="stock"),
                      rollouts=RolloutPlan(examples=n, rollouts=r, smoke=False,
                                           roles={"target": Seat(model=model, embedded=True)}))
            run_worker(job)
            done = read_rollouts(out / "target")
            assert len(done) == n * r and all(x.outcome == "ok" for x in done), f"{name}: {len(done)} of {n * r}"
    return time.perf_counter() - started


def shipped(examples: int, rollouts: int, concurrency: int, latency: float) -> list[tuple[float, dict]]:
    """`autoenv eval --offline` through the CLI in a scratch run repository, then `--force` again on it:
    (seconds, stage timings) of each."""
    with tempfile.TemporaryDirectory(prefix="autoenv-bench-") as tmp:
        root = make_run_repo(EXAMPLE, Path(tmp) / "run", config_text(examples, rollouts, concurrency, latency))
        env = {**os.environ, "NO_COLOR": "1", "AUTOENV_WARM": "1", "AUTOENV_CACHE": str(Path(tmp) / "cache")}
        os.environ["AUTOENV_CACHE"] = env["AUTOENV_CACHE"]  # this bench's warm server, stopped at the end
        measured = []
        try:
            for args in (["eval", "--offline"], ["eval", "--offline", "--force"]):
                started = time.perf_counter()
                result = subprocess.run([sys.executable, "-m", "autoenv.cli", *args], cwd=root,
                                        capture_output=True, text=True, env=env)
                seconds = time.perf_counter() - started
                assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
                assert re.search(r"(?m)^verdict:\s+(baseline|inconclusive)$", result.stdout), result.stdout[-2000:]
                entry = json.loads((root / "feedback_log.jsonl").read_text().splitlines()[-1])
                measured.append((seconds, entry.get("timings") or {}))
        finally:
            warmchild.stop_all()
        return measured


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, nargs="*", default=[0.0, 1.0])
    args = parser.parse_args()
    seed = int(re.search(r"(?m)^seed = (\d+)", (PROJECT / "config.toml").read_text()).group(1))
    total = 2 * args.examples * args.rollouts
    print(f"{EXAMPLE}: {args.examples} tasks x {args.rollouts} rollouts x 2 models, concurrency {args.concurrency}, "
          f"{os.cpu_count()} cores")
    print(f"{'latency':>8} {'(a) seed-shaped s':>18} {'(b) first eval s':>17} {'b/a':>6} {'(c) next eval s':>16} "
          f"{'c/a':>6} {'bound s':>8} {'c/bound':>8}")
    for latency in args.latency:
        a = seed_shaped(args.examples, args.rollouts, args.concurrency, latency, seed)
        (b, b_stages), (c, c_stages) = shipped(args.examples, args.rollouts, args.concurrency, latency)
        bound = (1 + math.ceil(total / args.concurrency)) * TURNS * latency
        print(f"{latency:>8g} {a:>18.1f} {b:>17.1f} {b / a:>6.2f} {c:>16.1f} {c / a:>6.2f} {bound:>8.1f} "
              f"{(c / bound if bound else float('nan')):>8.2f}", flush=True)
        for name, stages in (("(b)", b_stages), ("(c)", c_stages)):
            print(f"{'':>8} {name} stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()
                                                        if isinstance(v, (int, float))), flush=True)


if __name__ == "__main__":
    main()
