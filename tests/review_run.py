"""A run to review: one real offline evaluation, then six more through the pipeline's own stages.

The first evaluation is the real thing (install, gates, a worker process with verifiers
rollouts on the built-in endpoint, the offline judge, the ledger, the note). The others
get their traces written in verifiers' traces.jsonl shape for the same sampled tasks,
then go through the pipeline's verdict, judge and record stages, so every verdict kind
is there with real files behind it: baseline, keep, discard, inconclusive, crash, a failed gate,
and an entry of another run in the same ledger. `review_run(base)` crafts the first
evaluation too (a few seconds, for the quick tests); `review_run(base, real=True)` runs
it for real (30-70 s on a busy 2-core machine, for the slow ones). Each is built once per
test process and shared; tests that change a run work on a copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import commit_all, head, small_config

from autoenv.cli import main
from autoenv.core.config import Price, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.formats import stamp
from autoenv.core.record import Entry, GateFinding, GateReport, Verdict
from autoenv.core.traces import read_rollouts
from autoenv.evaluation.context import Context, EvalOptions, Outcome
from autoenv.evaluation.decision import verdict
from autoenv.evaluation.pipeline import evaluate
from autoenv.evaluation.recording import judge, record
from autoenv.evaluation.stats import model_stats
from autoenv.run.demo import make_run_repo
from autoenv.run.gitrepo import Repo

BRANCH = "autoenv/demo-arithmetic"
OTHER = "autoenv/other"
TARGET, STRONG = "noisy-oracle:0.45", "oracle"


@dataclass(frozen=True)
class ReviewRun:
    root: Path
    commits: dict[str, str]
    """In ledger order: real (the first, the run's baseline), discard, inconclusive, crash, gates (failed gates),
    other (on another run's branch), keep, priced (inconclusive, with costs)."""
    tasks: list[dict]


_built: dict[tuple[Path, bool], ReviewRun] = {}
TASKS = [
    {"idx": 4, "key": "arith:Compute: 6 * 12 - 46", "difficulty": "medium", "category": "multiplicative", "answer": "26"},
    {"idx": 6, "key": "arith:Compute: 18 + 20", "difficulty": "easy", "category": "additive", "answer": "38"},
    {"idx": 37, "key": "arith:Compute: (45 + 34) - 49", "difficulty": "medium", "category": "additive", "answer": "30"},
    {"idx": 91, "key": "arith:Compute: (7 * 13) - (96 / 8)", "difficulty": "hard", "category": "multiplicative",
     "answer": "79"},
]


def review_run(base: Path, real: bool = False) -> ReviewRun:
    """The shared run under `base` (built on first use); `real`: its first evaluation is a real
    offline one (about 30-70 s on a busy 2-core machine), else crafted like the others (a few seconds)."""
    key = (base, real)
    if key not in _built:
        _built[key] = _build(base / ("real" if real else "crafted"), real)
    return _built[key]


def copy_run(run: ReviewRun, where: Path) -> ReviewRun:
    """A copy a test may change (the repository with its notes, ledger and outputs)."""
    shutil.copytree(run.root, where, symlinks=True)
    return ReviewRun(root=where, commits=dict(run.commits), tasks=run.tasks)


def _build(base: Path, real: bool) -> ReviewRun:
    # probes on a few tasks: the real evaluation is here to run end to end, not to audit the example
    config = small_config(examples=4, rollouts_per_example=2).replace("sample = 30 ", "sample = 6 ")
    root = make_run_repo("arithmetic", base, config)
    half = [[1.0, 0.0]] * 4
    mixed = [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
    solved = [[1.0, 1.0]] * 4
    if real:
        commits = {"real": evaluate(EvalOptions(cwd=root, description="the arithmetic example as first written",
                                                offline=True)).commit}
        tasks = json.loads((root / "outputs" / commits["real"] / "tasks.json").read_text())
    else:
        tasks = TASKS
        commits = {"real": _crafted(root, tasks, "the arithmetic example as first written",
                                    {"target": [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]], "strong": solved},
                                    None, first=True)}
    commits["discard"] = _crafted(root, tasks, "harder prompts", {"target": [[0.0, 0.0]] * 4, "strong": solved},
                                  Verdict(verdict="discard", reason="farther from the wanted state: target 0.000"))
    commits["inconclusive"] = _crafted(root, tasks, "reworded the system prompt", {"target": mixed, "strong": solved},
                                       Verdict(verdict="inconclusive", reason="the difference is inside the noise"))
    commits["crash"] = _crafted(root, tasks, "a tool server", None, None,
                                error=AutoEnvError("the rollout worker exited with code 1: ImportError: no module x"))
    commits["gates"] = _crafted(root, tasks, "format reward", None, None, gates=GateReport(findings=[
        GateFinding(name="probe echo", status="fail", message="mean 0.900 (allowed 10% of the oracle)")]))
    commits["other"] = _other_run(root, tasks)
    commits["keep"] = _crafted(root, tasks, "partial credit <b>for</b> [bold]steps[/bold]",
                               {"target": half, "strong": solved},
                               Verdict(verdict="keep", reason="more tasks with a learning signal"), tool_call=True)
    commits["priced"] = _crafted(root, tasks, "longer expressions", {"target": mixed, "strong": solved},
                                 Verdict(verdict="inconclusive", reason="inside the noise"), price=Price(1.0, 4.0))
    return ReviewRun(root=root, commits=commits, tasks=tasks)


def _other_run(root: Path, tasks: list[dict]) -> str:
    """An entry of another run (branch autoenv/other) in the same ledger."""
    subprocess.run(["git", "checkout", "-qb", OTHER], cwd=root, check=True)
    commit = _crafted(root, tasks, "another run's idea", {"target": [[1.0, 1.0]] * len(tasks),
                                                           "strong": [[1.0, 1.0]] * len(tasks)},
                      Verdict(verdict="baseline", reason="first evaluation of the run autoenv/other"))
    subprocess.run(["git", "checkout", "-q", BRANCH], cwd=root, check=True)
    return commit


def _crafted(root: Path, tasks: list[dict], description: str, rewards: dict[str, list[list[float]]] | None,
             chosen: Verdict | None, *, error: AutoEnvError | None = None, gates: GateReport | None = None,
             tool_call: bool = False, price: Price | None = None, first: bool = False) -> str:
    """Commit a change (not for the first), write its traces, and record it through the pipeline's stages."""
    if not first:
        readme = root / "candidate" / "README.md"
        readme.write_text(readme.read_text() + f"\n{description}\n")
    commit = commit_all(root, description) if not first else head(root)
    repo = Repo(root)
    config = load_config(root / "config.toml")
    ctx = Context(config=config, repo=repo, head=repo.head(), options=EvalOptions(cwd=root, description=description,
                                                                                   offline=True),
                  run_id=stamp(), out=config.path("outputs") / commit, gates=gates)
    if rewards:  # the task sample, as a worker writes it
        ctx.out.mkdir(parents=True, exist_ok=True)
        (ctx.out / "tasks.json").write_text(json.dumps(tasks, indent=1))
    stats = {}
    for role, per_task in (rewards or {}).items():
        model = TARGET if role == "target" else STRONG
        write_traces(ctx.out / role, tasks, per_task, model, tool_call=tool_call and role == "target")
        stats[role] = model_stats(model, read_rollouts(ctx.out / role), config.bands.solve_threshold,
                                  price=price, seed=config.seed)
    outcome = Outcome(stats=stats, error=error, failed_stage="rollouts" if error else None)
    entry: Entry = verdict(ctx, outcome)
    if error is None:
        entry = judge(ctx, entry)
    if chosen is not None:
        kept = entry.verdict.compared_to
        entry = entry.model_copy(update={"verdict": chosen.model_copy(update={"compared_to": kept})})
    record(ctx, entry)
    return commit


def write_traces(directory: Path, tasks: list[dict], per_task: list[list[float]], model: str,
                 tool_call: bool = False) -> None:
    """traces.jsonl in verifiers' shape: one episode per rollout of each task."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for t, (task, rewards) in enumerate(zip(tasks, per_task)):
        for r, reward in enumerate(rewards):
            trace_id = hashlib.sha256(f"{model}|{task['key']}|{r}|{directory}".encode()).hexdigest()[:32]
            prompt = task["key"].split(":", 1)[1].strip()
            answer = task["answer"] if reward else "0"
            nodes = [{"message": {"role": "system", "content": "Evaluate the expression; answer in <answer></answer>."}},
                     {"message": {"role": "user", "content": prompt}}]
            if tool_call and t == 0 and r == 0:
                nodes += [{"message": {"role": "assistant", "content": "Let me check.", "tool_calls": [
                    {"id": "call_0", "type": "function", "name": "calculator", "arguments": json.dumps({"expr": prompt})}]}},
                          {"message": {"role": "tool", "tool_call_id": "call_0", "name": "calculator",
                                       "content": f"{task['answer']} <script>alert(1)</script>"}}]
            nodes.append({"message": {"role": "assistant", "content": f"<answer>{answer}</answer>"}})
            data = {k: task[k] for k in ("idx", "difficulty", "category", "answer") if k in task}
            trace = {
                "id": trace_id, "task": {"type": "ArithmeticTask", "key": task["key"], "data": {**data, "prompt": prompt}},
                "agent": {"config": {"model": model}, "name": "agent", "trainable": True}, "nodes": nodes,
                "rewards": {"correct": {"score": reward, "weight": 1.0}}, "metrics": {"formatted": 1.0},
                "calls": [{"usage": {"prompt_tokens": 50, "completion_tokens": 6}}],
                "timing": {"agent": {"start": 100.0, "end": 100.4}}, "stop_condition": "agent_completed",
                "is_timeout": False, "errors": [], "ok": True,
            }
            lines.append(json.dumps({"id": trace_id[::-1], "task": trace["task"], "ok": True, "is_timeout": False,
                                     "errors": [], "traces": [trace]}))
    (directory / "traces.jsonl").write_text("\n".join(lines) + "\n")


def review(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    """Run `autoenv ARGS` in-process in `root`; (exit code, stdout, stderr)."""
    capsys.readouterr()
    here = os.getcwd()
    os.chdir(root)
    try:
        code = main(list(args))
    finally:
        os.chdir(here)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG, from its header."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])
