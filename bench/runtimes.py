"""How many rollouts a minute each of verifiers' runtimes gives, side by side in one run.

For each runtime (subprocess with the in-process harness, the default; docker, in the default
bubblewrap sandbox through the engine guard, with the local base image) and each concurrency, one
offline evaluation of the arithmetic example in a scratch run repository through the real CLI, at
`--tasks` tasks x 2 rollouts x 2 models. The rollouts stage's own time (the entry's `timings`) gives
rollouts per minute and seconds per rollout; the last column is docker's seconds per rollout over the
subprocess runtime's at the same concurrency. Where no Docker engine answers, a dockerd of AutoEnv's own is started (root) and
stopped afterwards. The machine is noisy: compare within one run, not across runs.

`--image TAG` names the docker image (default: the local base image, built when missing), so an older
build can be measured side by side with the current one. `--harness stock` runs the subprocess
runtime with verifiers' stock chat program too (a process a rollout, as in a container), to show
what the container itself adds.

Usage: .venv/bin/python bench/runtimes.py [--concurrency 1,4,8] [--tasks 8] [--image TAG] [--harness stock]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoenv.containers import daemon, image
from autoenv.core.paths import PROJECT
from autoenv.core.runtimes import engine_problem
from autoenv.run.demo import make_run_repo


def config_for(runtime: str, concurrency: int, tasks: int, docker_image: str | None = None,
               harness: str = "inprocess") -> str:
    text = (PROJECT / "config.toml").read_text()
    for key, value in {"examples": tasks, "rollouts_per_example": 2, "max_concurrent": concurrency,
                       "min_tasks": 2}.items():
        text = re.sub(rf"(?m)^{key} = [^\n#]*", f"{key} = {value}  ", text)
    text = text.replace('type = "subprocess"', f'type = "{runtime}"', 1)
    text = re.sub(r'(?m)^harness = "[a-z]+"', f'harness = "{harness}"', text, count=1)
    if runtime == "docker" and docker_image:
        text += f'\n[runtime.docker]\nimage = "{docker_image}"\n'
    return text


def measure(runtime: str, concurrency: int, tasks: int, docker_image: str | None = None,
            harness: str = "inprocess") -> tuple[int, float, float, str]:
    """(rollouts, rollouts-stage seconds, whole evaluation seconds, verdict)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = make_run_repo("arithmetic", Path(tmp) / "run", config_for(runtime, concurrency, tasks, docker_image, harness))
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "autoenv.cli", "eval", "--offline"], cwd=root,
                              capture_output=True, text=True)
        whole = time.perf_counter() - started
        lines = (root / "feedback_log.jsonl").read_text().splitlines() if (root / "feedback_log.jsonl").exists() else []
        if not lines:
            raise SystemExit(f"{runtime} at {concurrency}: no entry (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
        entry = json.loads(lines[-1])
        outputs = root / entry["outputs"]
        rollouts = sum(len((outputs / role / "traces.jsonl").read_text().splitlines())
                       for role in ("target", "strong", "smoke") if (outputs / role / "traces.jsonl").exists())
        return rollouts, float(entry["timings"]["rollouts"]), whole, entry["verdict"]["verdict"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--image", default=None, help="the docker image (default: the local base image)")
    parser.add_argument("--harness", default="inprocess", choices=("inprocess", "stock"),
                        help="the subprocess runtime's harness (docker always runs the stock one)")
    args = parser.parse_args()
    started_daemon = engine_problem("docker") is not None
    if started_daemon:
        print(daemon.start())
    try:
        docker_image = args.image or image.build().tag
        print(f"docker image: {docker_image}")
        print(f"{'concurrency':>11} {'runtime':<10} {'rollouts':>8} {'stage s':>8} {'eval s':>7} {'per min':>8} "
              f"{'s/rollout':>9} {'docker/subprocess':>17}  verdict")
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            seconds = {}
            for runtime in ("subprocess", "docker"):
                n, stage, whole, verdict = measure(runtime, concurrency, args.tasks, docker_image, args.harness)
                seconds[runtime] = stage / n
                ratio = f"{seconds['docker'] / seconds['subprocess']:.1f}x" if runtime == "docker" else ""
                print(f"{concurrency:>11} {runtime:<10} {n:>8} {stage:>8.1f} {whole:>7.1f} {60 / seconds[runtime]:>8.1f} "
                      f"{seconds[runtime]:>9.3f} {ratio:>17}  {verdict}", flush=True)
    finally:
        if started_daemon:
            print(daemon.stop())


if __name__ == "__main__":
    main()
