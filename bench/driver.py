"""What `autoenv run` adds to every iteration: relaunch time, polling CPU and the hook per tool call.

Side by side in one run, on a scratch run repository with the stand-in agent
(tests/agent_standin.py), no evaluation (the agent's own time is what is subtracted):

(a) relaunch: N launches that each edit and commit; the driver's wall time minus the
    launches' own wall time, per launch (reading the transcript and the ledger, writing
    driver.json, session.json and events.jsonl, git rev-parse, starting the process), next
    to the launch itself;
(b) polling: the driver's CPU seconds while one agent launch hangs for T seconds (every
    `poll` = 0.5 s it reads the transcript and stats the ledger; every 2 s it runs git
    rev-parse and looks at the evaluation locks), as a share of one core;
(c) the PreToolUse hook: one `python -m autoenv.driver.hook` per tool call, next to a bare
    `python -c pass`.

Usage: .venv/bin/python bench/driver.py [--launches 5] [--hang 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoenv.core.paths import PROJECT
from autoenv.driver.loop import RunOptions, drive
from autoenv.run.demo import make_run_repo

STANDIN = PROJECT / "tests" / "agent_standin.py"
TAG = "demo-arithmetic"


def environment(scratch: Path, script: list) -> dict:
    (scratch / "script.json").write_text(json.dumps(script))
    (scratch / "script.json.count").unlink(missing_ok=True)
    return {**os.environ, "STANDIN_SCRIPT": str(scratch / "script.json"), "STANDIN_COST": "0.01"}


def command() -> str:
    return (f"{sys.executable} {STANDIN} -p {{prompt}} --session-id {{session_id}} --output-format stream-json "
            "--verbose --settings {settings}")


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def relaunch(scratch: Path, launches: int) -> tuple[float, float]:
    root = make_run_repo("arithmetic", scratch / "relaunch")
    env = environment(scratch, [[{"edit": "candidate/README.md", "append": "\nx\n"},
                                 {"bash": "git add -A && git commit -qm x"}]])
    began = time.monotonic()
    summary = drive(RunOptions(cwd=root, tag=TAG, command=command(), max_usd=0.01 * launches - 0.001, env=env))
    total = time.monotonic() - began
    events = [json.loads(line) for line in (summary.directory / "events.jsonl").read_text().splitlines()]
    own = [e["seconds"] for e in events if e["event"] == "launch"]
    assert len(own) == launches, (len(own), summary.stop)
    return (total - sum(own)) / launches, statistics.mean(own)


def polling(scratch: Path, hang: float) -> float:
    root = make_run_repo("arithmetic", scratch / "polling")
    env = environment(scratch, [[{"hang": True}]])
    before, began = cpu(), time.monotonic()
    drive(RunOptions(cwd=root, tag=TAG, command=command(), max_hours=hang / 3600, env=env, grace=5))
    return (cpu() - before) / (time.monotonic() - began)


def timed(args: list[str], stdin: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.monotonic()
        subprocess.run(args, input=stdin, capture_output=True, text=True, check=False)
        times.append(time.monotonic() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--hang", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="autoenv-bench-driver-") as tmp:
        scratch = Path(tmp)
        overhead, launch = relaunch(scratch, args.launches)
        share = polling(scratch, args.hang)
    call = json.dumps({"tool_name": "Bash", "tool_input": {"command": "git add -A && git commit -m x"}, "cwd": "/tmp"})
    hook = timed([sys.executable, "-m", "autoenv.driver.hook", "--root", "/tmp"], call, args.repeat)
    bare = timed([sys.executable, "-c", "pass"], "", args.repeat)
    print(f"(a) relaunch   driver {overhead * 1000:7.0f} ms per launch | stand-in launch {launch * 1000:7.0f} ms "
          f"| ratio {overhead / launch:.2f}")
    print(f"(b) polling    driver CPU {share * 100:5.2f}% of one core while an agent runs ({args.hang:g} s hang)")
    print(f"(c) hook       {hook * 1000:7.0f} ms per tool call | bare python {bare * 1000:7.0f} ms "
          f"| ratio {hook / bare:.2f}")


if __name__ == "__main__":
    main()
