"""The fixed cost of an evaluation: one child process for every stage vs a fresh process per stage.

Same candidate, job and seed, side by side in one run, for each clean example:

(a) three children: the import check, the audit (checks and probes) and the rollouts each
    in a fresh child process, as the harness did before (each pays for the interpreter,
    verifiers' import and the candidate's import);
(b) one child: the same three stages in one autoenv.child.main process, as shipped;
(c) `autoenv eval --offline` through the CLI on a scratch run repository whose candidate is
    already installed (a loop's usual case), at the smallest budget (1 task x 2 rollouts x
    2 models): preflight, install check, gates, smoke, rollouts, statistics, offline judge,
    ledger, git note, with a cold child (AUTOENV_WARM=0). With rollouts this few, its wall
    time is the evaluation's fixed cost;
(d) the same with the warm child as shipped (autoenv.sandbox.warmchild: the run's server started by
    an evaluation before the timed ones, each timed evaluation's child forked by it), and the
    gates stage's own time in (d), from the evaluation's output.

Then the parts of that fixed cost a warm child (a fork server with verifiers already
imported) or a deferred plot would save, each a fresh interpreter, side by side in the
same run: the bare interpreter, `import verifiers.v1` (paid by every evaluation's child),
`import autoenv.cli` (the harness), matplotlib with a figure saved (the run plot).

Usage: .venv/bin/python bench/fixed_cost.py [--repeat 3] [--examples arithmetic shopping]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoenv.core.config import load_config
from autoenv.core.job import Job, RolloutPlan, Seat
from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.gates.rules import audit_plan
from autoenv.run.demo import make_run_repo
from autoenv.sandbox import warmchild
from autoenv.sandbox.rollouts import Worker

STAGES = ("inspect", "audit", "rollouts")


def job(example: str, out: Path) -> Job:
    config = load_config(PROJECT / "config.toml")
    roles = {"target": Seat(model="noisy-oracle:0.45", embedded=True), "strong": Seat(model="oracle", embedded=True)}
    return Job(candidate_dir=str(EXAMPLES / example), out_dir=str(out), seed=config.seed,
               max_concurrent=config.budget.max_concurrent, rollout_timeout=config.budget.rollout_timeout,
               max_turns=config.budget.max_turns, audit=audit_plan(config),
               rollouts=RolloutPlan(examples=1, rollouts=2, roles=roles, smoke=True))


def children(example: str, per_stage: bool) -> float:
    """Wall seconds for the three stages, in a fresh child each (per_stage) or all in one."""
    with tempfile.TemporaryDirectory(prefix="autoenv-bench-") as tmp:
        the_job = job(example, Path(tmp))
        started = time.perf_counter()
        if per_stage:
            for stage in STAGES:
                with Worker(the_job) as worker:
                    worker.run(stage)
        else:
            with Worker(the_job) as worker:
                for stage in STAGES:
                    worker.run(stage)
        return time.perf_counter() - started


def shipped(root: Path, warm: bool, cache: Path) -> tuple[float, float]:
    """Wall seconds of one `autoenv eval --offline --force`, and its gates stage's seconds as it printed them."""
    env = {**os.environ, "NO_COLOR": "1", "AUTOENV_WARM": "1" if warm else "0", "AUTOENV_CACHE": str(cache)}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "autoenv.cli", "eval", "--offline", "--force"], cwd=root,
                            capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert ("warm child: forked" in result.stdout) == warm, result.stdout[-2000:]
    gates = re.search(r"✓ check \+ probe \(([\d.]+) s\)", result.stdout)
    return seconds, float(gates.group(1)) if gates else float("nan")


def smallest_budget() -> str:
    text = (PROJECT / "config.toml").read_text()
    for key, value in {"examples": 1, "rollouts_per_example": 2}.items():
        text, count = re.subn(rf"(?m)^{key} = [^\n#]*", f"{key} = {value}  ", text)
        assert count == 1, key
    return text


IMPORTS = {
    "interpreter": "pass",
    "verifiers.v1": "import verifiers.v1",
    "autoenv.cli": "import autoenv.cli",
    "matplotlib + figure": "import io; from matplotlib.figure import Figure; from matplotlib.backends.backend_agg "
                           "import FigureCanvasAgg; f = Figure(); FigureCanvasAgg(f); f.add_subplot().plot([1, 2]); "
                           "f.savefig(io.BytesIO(), format='png')",
}


def import_costs(repeat: int) -> dict[str, float]:
    """Median wall seconds of each IMPORTS line in a fresh interpreter (rounds interleaved: a noisy machine
    slows every column alike)."""
    times: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(repeat):
        for name, code in IMPORTS.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--examples", nargs="*", default=["arithmetic", "shopping"])
    parser.add_argument("--imports-only", action="store_true", help="only the import costs")
    args = parser.parse_args()
    costs = import_costs(args.repeat)
    print(f"fresh-interpreter costs, median of {args.repeat}: " + ", ".join(f"{n} {s:.2f} s" for n, s in costs.items()))
    print(f"a warm child would save about {costs['verifiers.v1'] - costs['interpreter']:.2f} s per evaluation "
          "(verifiers' import); the run plot costs matplotlib's import once per evaluation", flush=True)
    if args.imports_only:
        return
    print(f"median of {args.repeat} runs, {os.cpu_count()} cores; stages: import check, audit, 1 x 2 x 2 rollouts + smoke")
    print(f"{'example':<12} {'(a) a child per stage s':>24} {'(b) one child s':>16} {'b/a':>6} "
          f"{'(c) eval, cold s':>17} {'(d) eval, warm s':>17} {'d/c':>5} {'(d) gates s':>12}")
    for example in args.examples:
        a, b, c, d, g = [], [], [], [], []
        with tempfile.TemporaryDirectory(prefix="autoenv-bench-") as tmp:
            root, cache = make_run_repo(example, Path(tmp) / "run", smallest_budget()), Path(tmp) / "cache"
            os.environ["AUTOENV_CACHE"] = str(cache)  # this bench's warm servers only, stopped at the end
            try:
                shipped(root, warm=True, cache=cache)  # installs the candidate and starts the server, as a loop does
                for _ in range(args.repeat):
                    a.append(children(example, per_stage=True))
                    b.append(children(example, per_stage=False))
                    c.append(shipped(root, warm=False, cache=cache)[0])
                    seconds, gates = shipped(root, warm=True, cache=cache)
                    d.append(seconds)
                    g.append(gates)
            finally:
                warmchild.stop_all()
        ma, mb, mc, md, mg = (statistics.median(x) for x in (a, b, c, d, g))
        print(f"{example:<12} {ma:>24.1f} {mb:>16.1f} {mb / ma:>6.2f} {mc:>17.1f} {md:>17.1f} {md / mc:>5.2f} "
              f"{mg:>12.1f}", flush=True)


if __name__ == "__main__":
    main()
