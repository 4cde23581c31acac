"""The loop's cost over a scripted trajectory of eight commits: model requests, tokens and wall time.

One run of examples/arithmetic: a baseline evaluation, then eight commits as an agent makes
them (two reward-only edits, one docs-only, one prompt change, two task-data changes, one
revert to an earlier tree, one tools change), each evaluated with `--latency` seconds injected
before every model reply, for three pipelines side by side:

(a) seed-shaped: a smoke evaluation (1 rollout), then the target evaluation, then the strong
    one, each its own worker process with verifiers' stock harness (as bench/iteration.py);
(b) AutoEnv without the eval cache and incremental evaluation (`autoenv eval --force`);
(c) AutoEnv as shipped (`autoenv eval`).

(b) and (c) call real-model endpoints served by the built-in endpoint in this process (its
request and token counters are the numbers); (a) counts the requests and tokens its traces
record. The baseline is evaluated first and not counted: the eight commits are the loop.
Targets for (c)/(a): model requests <= 0.5, wall <= 0.35.

The tools change declares the task's toolsets (`toolsets()`; arithmetic has no tool server):
a change to what the model is offered, which must roll out.

Usage: .venv/bin/python bench/loop_cost.py [--examples 4] [--rollouts 2] [--concurrency 4] [--latency 1]
       [--only a b c] [--a-once]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from autoenv.core.job import Job, RolloutPlan, RuntimeSpec, Seat
from autoenv.core.messages import Reply
from autoenv.core.paths import PROJECT
from autoenv.core.traces import read_rollouts
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint, Faults
from autoenv.run.demo import make_run_repo
from autoenv.sandbox.rollouts import run_worker

EXAMPLE = "arithmetic"
TASKSET = "candidate/candidate_env/taskset.py"
TARGET, STRONG = "noisy-oracle:0.45", "oracle"
REVERT = "revert"
TRAJECTORY: list[tuple[str, str, str, str]] = [
    # (kind, file, old, new)
    ("reward-only", TASKSET, "@vf.reward(weight=1.0)", "@vf.reward(weight=0.5)"),
    ("docs-only", "candidate/README.md", "# ", "# Arithmetic: "),
    ("prompt", TASKSET, '"Evaluate the arithmetic expression exactly. ', '"Evaluate the arithmetic expression. '),
    ("reward-only", TASKSET, '    return (messages[-1].content or "") if messages else ""',
     '    return (messages[-1].content or "").strip() if messages else ""'),
    ("task data", TASKSET, "num_tasks: int = 1000", "num_tasks: int = 1200"),
    ("task data", TASKSET, '"easy": ((1, 1), 20, False),', '"easy": ((1, 1), 30, False),'),
    (REVERT, "", "", ""),
    ("tools", TASKSET, "    @vf.stop\n",
     ("    @classmethod\n    def toolsets(cls, config):\n        return []\n\n    @vf.stop\n")),
]


class ArithmeticOracle:
    """The oracle of whatever arithmetic task a prompt states (`Compute: <expression>`), read off the prompt, so
    it follows the trajectory's task-data changes without importing the candidate here."""

    def __init__(self) -> None:
        self.answers: list[str] = []

    def find(self, messages: list[dict], key: str | None = None) -> SimpleNamespace | None:
        prompt = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        if not isinstance(prompt, str) or not prompt.startswith("Compute: "):
            return None
        value = eval(prompt.removeprefix("Compute: "), {"__builtins__": {}})  # the example's own generated text
        return SimpleNamespace(key=f"arith:{prompt}", data=SimpleNamespace(answer=str(value)))

    def next_message(self, messages: list[dict], key: str | None = None) -> Reply | None:
        task = self.find(messages)
        return None if task is None else Reply(content=f"<answer>{task.data.answer}</answer>")

    def task_key(self, messages: list[dict], key: str | None = None) -> str | None:
        task = self.find(messages)
        return None if task is None else task.key


class Served:
    """The built-in endpoint on a thread of its own, with latency, counting requests and tokens."""

    def __init__(self, latency: float, seed: int) -> None:
        self.endpoint = Endpoint(Policies(ArithmeticOracle(), seed=seed), Faults(latency=latency))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> str:
        self.thread.start()
        return asyncio.run_coroutine_threadsafe(self.endpoint.start(), self.loop).result(60).base_url

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.endpoint.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(60)


def config_text(examples: int, rollouts: int, concurrency: int, base_url: str | None) -> str:
    text = (PROJECT / "config.toml").read_text()
    for key, value in {"examples": examples, "rollouts_per_example": rollouts, "max_concurrent": concurrency}.items():
        text, count = re.subn(rf"(?m)^{key} = [^\n#]*", f"{key} = {value}  ", text)
        assert count == 1, key
    if base_url:
        text = re.sub(r'(?m)^model = "gpt-4\.1-mini"', f'model = "{TARGET}"', text)
        text = re.sub(r'(?m)^model = "gpt-4\.1"', f'model = "{STRONG}"', text)
        text = re.sub(r'(?m)^base_url = .*', f'base_url = "{base_url}"', text)
        text = re.sub(r'(?m)^api_key_var = .*', 'api_key_var = ""', text)
        text = re.sub(r'(?m)^backend = .*', 'backend = "offline"', text)
    return text


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def commits(root: Path) -> Iterator[str]:
    """Apply the trajectory to the run repository, one commit at a time; yields each change's kind."""
    baseline = git(root, "rev-parse", "HEAD")
    for kind, file, old, new in TRAJECTORY:
        if kind == REVERT:
            git(root, "checkout", baseline, "--", "candidate")
        else:
            path = root / file
            text = path.read_text()
            assert old in text, f"{file}: {old!r}"
            path.write_text(text.replace(old, new, 1))
        git(root, "add", "-A")
        git(root, "commit", "-qm", kind)
        yield kind


@contextmanager
def served(latency: float, seed: int) -> Iterator[Served]:
    server = Served(latency, seed)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def seed_shaped_one(candidate: Path, examples: int, rollouts: int, concurrency: int, latency: float,
                    seed: int) -> tuple[int, int]:
    """Smoke, target, strong: three worker processes in a row; (requests, tokens) from their traces."""
    requests = tokens = 0
    with tempfile.TemporaryDirectory(prefix="autoenv-loop-") as tmp:
        for name, model, n, r in [("smoke", TARGET, 1, 1), ("target", TARGET, examples, rollouts),
                                  ("strong", STRONG, examples, rollouts)]:
            out = Path(tmp) / name
            job = Job(candidate_dir=str(candidate), out_dir=str(out), seed=seed, max_concurrent=concurrency,
                      rollout_timeout=300, max_turns=10, embedded_latency=latency,
                      runtime=RuntimeSpec(type="subprocess", harness="stock"),
                      rollouts=RolloutPlan(examples=n, rollouts=r, smoke=False,
                                           roles={"target": Seat(model=model, embedded=True)}))
            run_worker(job)
            done = read_rollouts(out / "target")
            requests += sum(max(1, d.turns) for d in done)
            tokens += sum(d.input_tokens + d.output_tokens for d in done)
    return requests, tokens


def run_seed_shaped(args: argparse.Namespace, seed: int) -> list[tuple[str, int, int, float]]:
    """(a) on every commit; with --a-once on the first only, its numbers repeated (the seed-shaped pipeline has no
    cache and no incremental evaluation: every commit costs the same budget)."""
    rows: list[tuple[str, int, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="autoenv-loop-") as tmp:
        root = make_run_repo(EXAMPLE, Path(tmp) / "run", config_text(args.examples, args.rollouts, args.concurrency, None))
        for kind in commits(root):
            if args.a_once and rows:
                rows.append((kind, *rows[0][1:]))
                continue
            started = time.perf_counter()
            requests, tokens = seed_shaped_one(root / "candidate", args.examples, args.rollouts, args.concurrency,
                                               args.latency, seed)
            rows.append((kind, requests, tokens, time.perf_counter() - started))
            print(f"  (a) {kind:<12} {requests:>5} requests {tokens:>7} tokens {rows[-1][3]:>7.1f} s", flush=True)
    return rows


def run_autoenv(args: argparse.Namespace, seed: int, force: bool) -> list[tuple[str, int, int, float, str]]:
    label = "(b)" if force else "(c)"
    rows = []
    with tempfile.TemporaryDirectory(prefix="autoenv-loop-") as tmp, served(args.latency, seed) as server:
        root = make_run_repo(EXAMPLE, Path(tmp) / "run",
                             config_text(args.examples, args.rollouts, args.concurrency, server.endpoint.base_url))
        evaluate(root, force)
        for kind in commits(root):
            before = dict(server.endpoint.counts)
            started = time.perf_counter()
            entry = evaluate(root, force)
            seconds = time.perf_counter() - started
            requests = server.endpoint.counts["requests"] - before.get("requests", 0)
            tokens = server.endpoint.counts["tokens"] - before.get("tokens", 0)
            how = ("cached" if entry.get("cached_from") else "rescored" if entry.get("rescored_from")
                   else "rolled out")
            if how == "rolled out" and not requests:
                how = f"no rollout: {entry['verdict']['verdict']}: {entry['verdict']['reason'][:200]}"
            rows.append((kind, requests, tokens, seconds, how))
            print(f"  {label} {kind:<12} {requests:>5} requests {tokens:>7} tokens {seconds:>7.1f} s  {how}",
                  flush=True)
    return rows


def evaluate(root: Path, force: bool) -> dict:
    cmd = [sys.executable, "-m", "autoenv.cli", "eval", *(["--force"] if force else [])]
    result = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
                            check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((root / "feedback_log.jsonl").read_text().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--only", nargs="*", default=["a", "b", "c"], choices=["a", "b", "c"])
    parser.add_argument("--a-once", action="store_true", help="measure (a) on the first commit and repeat it")
    args = parser.parse_args()
    seed = int(re.search(r"(?m)^seed = (\d+)", (PROJECT / "config.toml").read_text()).group(1))
    print(f"{EXAMPLE}: {len(TRAJECTORY)} commits after a baseline; {args.examples} tasks x {args.rollouts} rollouts "
          f"x 2 models, concurrency {args.concurrency}, {args.latency:g} s per model reply, {os.cpu_count()} cores")
    results: dict[str, list] = {}
    if "a" in args.only:
        results["a"] = run_seed_shaped(args, seed)
    if "b" in args.only:
        results["b"] = run_autoenv(args, seed, force=True)
    if "c" in args.only:
        results["c"] = run_autoenv(args, seed, force=False)
    names = list(results)
    print(f"\n{'commit':<14}" + "".join(f"{'(' + n + ') req':>10}{'tokens':>9}{'wall s':>8}" for n in names))
    for i, (kind, *_rest) in enumerate(TRAJECTORY):
        print(f"{kind:<14}" + "".join(f"{results[n][i][1]:>10}{results[n][i][2]:>9}{results[n][i][3]:>8.1f}"
                                        for n in names))
    totals = {n: (sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows))
              for n, rows in results.items()}
    print(f"{'total':<14}" + "".join(f"{totals[n][0]:>10}{totals[n][1]:>9}{totals[n][2]:>8.1f}" for n in names))
    if "a" in totals:
        for n in [n for n in names if n != "a"]:
            req, wall = totals[n][0] / max(1, totals["a"][0]), totals[n][2] / totals["a"][2]
            target = "  (targets: requests <= 0.5, wall <= 0.35)" if n == "c" else ""
            print(f"({n})/(a): requests {req:.2f}, tokens {totals[n][1] / max(1, totals['a'][1]):.2f}, "
                  f"wall {wall:.2f}{target}")


if __name__ == "__main__":
    main()
