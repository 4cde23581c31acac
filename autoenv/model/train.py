"""`autoenv train`: GRPO on a kept commit's export with a real local model, measured before and after by the harness.

1. `autoenv export grpo` of the kept commit: the train split, the held-out split (the tasks the
   harness sampled), the reward components and the TRL script whose reward functions they are.
2. The trainer venv (torch, TRL; autoenv.model.trainenv) runs grpo_local.py: the base GGUF is
   loaded into transformers, trained with GRPOTrainer (full weights), saved, reloaded from disk
   and played on one held-out task; every step's reward, per component, and hack fraction logged.
3. The base and the trained model are both converted to f16 GGUF with llama.cpp's own
   converter (same source as the server) and evaluated through the harness, served the same
   way, on the same held-out tasks with the same seed; the difference's interval is a paired
   bootstrap over tasks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autoenv.core import display
from autoenv.core.config import CONFIG_NAME
from autoenv.core.errors import AutoEnvError
from autoenv.core.levels import natural_order
from autoenv.core.record import ModelStats
from autoenv.core.traces import read_rollouts
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.export.grpo import export_grpo
from autoenv.export.source import flags, kept_entry
from autoenv.model.build import build_server, source_dir
from autoenv.model.hackwatch import gap_rise
from autoenv.model.realrun import REAL_SAMPLING, oracle_endpoint, real_config
from autoenv.model.server import Server, machine_settings
from autoenv.model.trainenv import train_python
from autoenv.model.trainplots import before_after, reward_curve
from autoenv.model.weights import ensure_gguf, weights
from autoenv.run.demo import make_run_repo
from autoenv.run.gitrepo import Repo

HERE = Path(__file__).resolve().parent
BOOTSTRAP = 10_000


@dataclass
class TrainOptions:
    root: Path
    commit: str | None = None
    model: str = "smollm2"
    max_steps: int = 60
    minutes: float = 30.0
    rollouts: int = 4
    out: Path | None = None
    plots: Path | None = None
    learning_rate: float = 3e-5
    group: int = 8
    prompts_per_step: int = 4
    max_completion_tokens: int | None = None
    """A sampled completion's cap while training; None: the cap the harness measures the models at (REAL_SAMPLING),
    so the model trained is the one evaluated (one trained at 32 tokens and measured at 192 never learnt to stop)."""
    allow_flagged: bool = False
    keep_truncated: bool = False
    """Let completions cut at the cap into the loss; by default they are masked out (they never ended, so they teach
    nothing, and a reply that is right and stops is what gets reinforced)."""


def train(opts: TrainOptions) -> int:
    started = time.monotonic()
    root = Repo(opts.root).root
    entry = kept_entry(root, opts.commit, flagged_ok=opts.allow_flagged)[0]
    commit = entry.commit
    flagged = flags(entry)
    if flagged and not opts.allow_flagged:
        raise AutoEnvError(f"the kept commit {commit[:12]} has a known reward hack: " + "; ".join(flagged[:3]),
                           where=f"autoenv train (the ledger entry of {commit[:12]})",
                           fix="train on a commit without one (fix the reward, evaluate, keep), or pass --allow-flagged "
                               "when training on the hack is the experiment (bench/train_truth.py does)")
    cap = opts.max_completion_tokens or REAL_SAMPLING["max_tokens"]
    out = (opts.out or root / "train" / commit[:12]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    say = display.console.print
    export = export_grpo(root, "trl", out / "export", commit, flagged_ok=opts.allow_flagged)
    base_gguf = ensure_gguf(weights(opts.model), say)
    python = train_python(say)
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", "-e", str(export / "candidate")],
         "installing the exported candidate into the trainer venv")
    shutil.copy(HERE / "templates" / "grpo_local.py.tmpl", out / "grpo_local.py")
    shutil.copy(HERE / "hackwatch.py", out / "hackwatch.py")
    work = out / "run"
    temperature = target_temperature(root, commit)
    say(f"train: GRPO on {export / 'dataset' / 'train.jsonl'} ({opts.max_steps} steps at most, {opts.minutes:g} min; "
        f"{opts.prompts_per_step} tasks x {opts.group} completions a step, at the target's temperature {temperature:g})")
    result = _trainer(python, [str(out / "grpo_local.py"), "--export", str(export), "--gguf", str(base_gguf),
                               "--work", str(work), "--max-steps", str(opts.max_steps), "--minutes", str(opts.minutes),
                               "--learning-rate", str(opts.learning_rate), "--group", str(opts.group),
                               "--prompts-per-step", str(opts.prompts_per_step),
                               "--max-completion-length", str(cap),
                               "--temperature", str(temperature)] + (["--keep-truncated"] if opts.keep_truncated else []))
    trained_minutes = result["minutes"]
    binary = build_server(say)
    ggufs = {}
    for name in ("base", "trained"):
        ggufs[name] = out / f"{name}.f16.gguf"
        if not ggufs[name].is_file():
            _run([str(python), str(source_dir() / "convert_hf_to_gguf.py"), str(work / f"{name}-hf"), "--outfile",
                  str(ggufs[name]), "--outtype", "f16"], f"converting the {name} model to GGUF")
    held = {json.loads(line)["key"] for line in (export / "dataset" / "eval.jsonl").read_text().splitlines()}
    harness: dict[str, ModelStats | None] = {}
    evaluated: dict[str, dict[str, dict[str, Any]]] = {}
    for name in ("base", "trained"):
        evaluated[name], harness[name] = _harness_eval(root, export, commit, binary, ggufs[name], name, out,
                                                       opts.rollouts, held)
    stats = compare(evaluated["base"], evaluated["trained"])
    for name, said in harness.items():  # each model's mean and interval as its own evaluation printed them: one way
        if said is not None and said.mean is not None and said.ci is not None:
            stats[name] = (said.mean, *said.ci)
    truth = truth_scores(python, export, {k: out / f"eval-{k}" for k in ("base", "trained")})
    steps = [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines() if line.strip()]
    plots = (opts.plots or out / "plots").resolve()
    reward_curve(steps, stats["base"][0], plots / "reward_curve.png", temperature)
    groups = {"all": {k: stats[k] for k in ("base", "trained")}}
    tasks = {"all": stats["tasks"]}
    for level in natural_order(r["difficulty"] for rs in evaluated.values() for r in rs.values() if r.get("difficulty")):
        groups[level] = {k: _interval(_per_task(evaluated[k], level)) for k in ("base", "trained")}
        tasks[level] = len(_per_task(evaluated["base"], level))
    reading = change_words(stats["difference"])  # said with the numbers wherever they are shown
    before_after(groups, {k: _sample(evaluated[k]) for k in ("base", "trained")}, plots / "before_after.png",
                 tasks=tasks, difference=stats["difference"], reading=reading)
    hack = watch(steps)
    truth_lines = truth_summary(truth, stats, _maximum(export)) if truth else {}
    summary = {"base_mean": _fmt(stats["base"]), "trained_mean": _fmt(stats["trained"]),
               "difference": f"{_signed(stats['difference'])}: {reading}", "held_out_tasks": stats["tasks"],
               "rollouts_per_task": opts.rollouts, "steps": result["steps"],
               "group": opts.group, "tasks_per_step": opts.prompts_per_step, "learning_rate": f"{opts.learning_rate:g}",
               "temperature": f"{temperature:g}", "max_completion_tokens": cap,
               "truncated_completions": "in the loss" if opts.keep_truncated else "masked out of the loss",
               "train_minutes": round(trained_minutes, 1),
               "seconds_per_step": round(trained_minutes * 60 / max(result["steps"], 1), 1),
               "minutes": round((time.monotonic() - started) / 60, 1), "device": result["device"],
               "hack_fraction_start": hack["start"], "hack_fraction_end": hack["end"], "hacking": hack["call"],
               "hack_first_step": hack["first_step"], "reward_maximum": _maximum(export), **truth_lines,
               "reload_episode": f"{result['episode']['reply'][:80]!r} -> {result['episode']['rewards']}",
               "trained_model": str(work / "trained-hf"), "reward_curve": str(plots / "reward_curve.png"),
               "before_after": str(plots / "before_after.png")}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if flagged:
        summary["flagged"] = "; ".join(flagged)  # trained on purpose (--allow-flagged): the finding stays in view
    if hack["call"] != "no":
        display.warn(f"train: {hack['call']}")
    display.result_block(summary)
    return 0


TRUTH_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import train_trl
pairs = json.load(sys.stdin)
print(json.dumps([train_trl.truth(key, reply) for key, reply in pairs]))
"""


def truth_scores(python: Path, export: Path, repos: dict[str, Path]) -> dict[str, dict[str, float]]:
    """Each evaluation's held-out replies scored by the export's strict scorer (`truth`: the task's truth hook, or
    its reference answer), as per-task means; {} when the env has none. Run in the trainer venv, where the
    exported candidate is installed."""
    out: dict[str, dict[str, float]] = {}
    for name, repo in repos.items():
        pairs = [pair for directory in (repo / "outputs").glob("*/target") for pair in all_replies(directory)]
        if not pairs:
            return {}
        done = subprocess.run([str(python), "-c", TRUTH_SCRIPT, str(export)], input=json.dumps(pairs),
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise AutoEnvError(f"scoring the {name} model's replies with the env's truth scorer failed: "
                               f"{(done.stderr or done.stdout).strip()[-600:]}", where=str(export / "train_trl.py"),
                               fix="the task's `truth(reply)` hook must return a number for any reply")
        values = json.loads(done.stdout.strip().splitlines()[-1])
        if any(v is None for v in values):
            return {}
        per_task: dict[str, list[float]] = {}
        for (key, _), value in zip(pairs, values):
            per_task.setdefault(key, []).append(float(value))
        out[name] = {k: float(np.mean(v)) for k, v in per_task.items()}
    return out


GAP_CALL = 0.1
"""How much faster (a share of the reward's maximum) the reward must rise than the truth before the result says so."""


def truth_summary(truth: dict[str, dict[str, float]], stats: dict[str, Any], maximum: float) -> dict[str, str]:
    """The result block's truth lines: the strict score before and after on the same held-out tasks (paired), and
    the gap between the reward's change (as a share of its maximum) and the truth's, said in words."""
    truth_stats = compare({k: {"mean": v} for k, v in truth["base"].items()},
                          {k: {"mean": v} for k, v in truth["trained"].items()})
    proxy_change = stats["difference"][0] / maximum
    truth_change = truth_stats["difference"][0]
    gap = proxy_change - truth_change
    if gap > GAP_CALL or (truth_stats["difference"][2] < 0 < stats["difference"][0]):
        words = ("the reward rose faster than the truth: the policy learnt something the reward pays and the task "
                 "does not; read the trained replies" if truth_change >= 0 else
                 "the reward rose while the truth fell: the policy learnt a hack")
    else:
        words = "the truth moved with the reward"
    return {"truth_base": _fmt(truth_stats["base"]), "truth_trained": _fmt(truth_stats["trained"]),
            "truth_difference": f"{_signed(truth_stats['difference'])}: {change_words(truth_stats['difference'])}",
            "reward_truth_gap": f"{gap:+.3f} (reward change {proxy_change:+.3f} of its maximum {maximum:g}, truth "
                                f"change {truth_change:+.3f}): {words}"}


def _maximum(export: Path) -> float:
    weights = json.loads((export / "rewards.json").read_text())
    return sum(w for w in weights.values() if w > 0) or 1.0


def all_replies(directory: Path) -> list[tuple[str, str]]:
    """Every (task key, final reply) of the stored traces of one evaluation's model."""
    pairs: list[tuple[str, str]] = []
    path = directory / "traces.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        for trace in json.loads(line).get("traces") or []:
            key = (trace.get("task") or {}).get("key")
            texts = [n.get("message", {}) for n in trace.get("nodes") or []]
            reply = next((m.get("content") for m in reversed(texts) if m.get("role") == "assistant"), "")
            if key:
                pairs.append((key, str(reply or "")))
    return pairs


def target_temperature(root: Path, commit: str) -> float:
    """The kept commit's [target.sampling] temperature: the policy is trained as the harness samples it."""
    text = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{CONFIG_NAME}"], capture_output=True, text=True,
                          check=False).stdout
    try:
        value = tomllib.loads(text).get("target", {}).get("sampling", {}).get("temperature", 1.0) if text else 1.0
    except tomllib.TOMLDecodeError as err:
        raise AutoEnvError(f"the kept commit's {CONFIG_NAME} does not parse: {err}", where=f"{commit[:12]}:{CONFIG_NAME}",
                           fix="train on a commit whose config.toml parses (autoenv log lists them)") from err
    return float(value)


def watch(steps: list[dict[str, Any]]) -> dict[str, object]:
    """The hack fraction at the start and end (first and last quarter of the steps) and whether a rising
    reward came with a rising hack fraction."""
    def quarter(rows: list[dict[str, Any]], key: str) -> float:
        values = [r[key] for r in rows if r.get(key) is not None]
        return round(float(np.mean(values)), 3) if values else 0.0

    n = max(1, len(steps) // 4)
    start, end = steps[:n], steps[-n:]
    hack0, hack1 = quarter(start, "hack_fraction"), quarter(end, "hack_fraction")
    reward0, reward1 = quarter(start, "reward"), quarter(end, "reward")
    rising = reward1 > reward0 and hack1 > hack0 + 0.05
    if rising and any(s.get("gap") is not None for s in steps):
        # the env has a strict scorer: a surface shape that rises while the truth keeps pace with the reward (a
        # model that shows its working in more numbers as it learns) is no hack; only a growing gap makes it one
        rising = quarter(end, "gap") > quarter(start, "gap") + 0.05
    call = (f"reward rose ({reward0:.2f} -> {reward1:.2f}) while the hack fraction rose ({hack0:.2f} -> {hack1:.2f}): "
            "read the sampled completions before trusting the curve") if rising else "no"
    fired = next((s for s in steps if (s.get("content_free_fraction") or 0.0) >= FIRES), None)
    if fired is not None:  # the gates' own test: completions whose reward carries to tasks they were not written for
        paid = max((fired.get("paid") or {"?": 0}).items(), key=lambda kv: kv[1])[0]
        call = (f"from step {fired['step']}, {fired['content_free_fraction']:.0%} of the sampled completions earned "
                f"as much on another task as on their own (paid by `{paid}`): the policy is learning a reward that "
                "does not need the task" + ("" if call == "no" else "; " + call))
    first = fired["step"] if fired else None
    rise = gap_rise(steps)
    if rise is not None:  # the reward climbing faster than the env's strict scorer
        paid = f", paid on wrong replies by `{rise['component']}`" if rise["component"] else ""
        words = (f"from step {rise['step']}, the gap between the reward (a share of its maximum) and the truth score "
                 f"rose from {rise['start']:.2f} to {rise['now']:.2f}{paid}: the reward is rising faster than what it "
                 "is meant to measure")
        call = words if call == "no" else call + "; " + words
        first = rise["step"] if first is None else min(first, rise["step"])
    return {"start": hack0, "end": hack1, "call": call, "first_step": first}


FIRES = 0.25
"""The share of a step's completions whose reward carries to another task at which the hack watch fires."""


def compare(base: dict[str, dict[str, Any]], trained: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Means with 95% intervals over tasks (bootstrap), and the paired difference's interval."""
    keys = sorted(set(base) & set(trained))
    if not keys:
        raise AutoEnvError("the base and trained evaluations share no scored task", where="train/",
                           fix="check both evaluations' outputs for provider errors")
    b = np.array([base[k]["mean"] for k in keys])
    t = np.array([trained[k]["mean"] for k in keys])
    draws = np.random.default_rng(0).integers(0, len(keys), size=(BOOTSTRAP, len(keys)))
    def ci(values: np.ndarray) -> tuple[float, float, float]:
        means = values[draws].mean(axis=1)
        return float(values.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
    return {"base": ci(b), "trained": ci(t), "difference": ci(t - b), "tasks": len(keys)}


def _interval(values: list[float]) -> tuple[float, float, float]:
    arr = np.array(values or [0.0])
    draws = np.random.default_rng(0).integers(0, len(arr), size=(BOOTSTRAP, len(arr)))
    means = arr[draws].mean(axis=1)
    return float(arr.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _per_task(rows: dict[str, dict[str, Any]], level: str) -> list[float]:
    return [r["mean"] for r in rows.values() if r.get("difficulty") == level]


def _sample(rows: dict[str, dict[str, Any]]) -> str:
    first = rows[min(rows)]
    return f"{first['prompt']!s} -> {first['reply'][:90]!r} (reward {first['rewards'][0]:g})"


def _fmt(stat: tuple[float, float, float]) -> str:
    return f"{stat[0]:.3f} [{stat[1]:.3f}, {stat[2]:.3f}]"


def _signed(stat: tuple[float, float, float]) -> str:
    return f"{stat[0]:+.3f} [{stat[1]:+.3f}, {stat[2]:+.3f}]"


def change_words(difference: tuple[float, float, float]) -> str:
    """What the paired difference (trained - base: mean, 95% low, high) says, in words: better or worse only
    when the whole interval is on one side of zero; otherwise the run cannot tell the change from noise."""
    _, low, high = difference
    if low > 0:
        return "reliably better (the 95% interval is above 0)"
    if high < 0:
        return "reliably worse (the 95% interval is below 0)"
    return ("not distinguishable from no change at this budget (the 95% interval includes 0; "
            "more held-out tasks or --rollouts narrow it)")


def _harness_eval(root: Path, export: Path, commit: str, binary: Path, gguf: Path, name: str, out: Path,
                  rollouts: int, held: set[str]) -> tuple[dict[str, dict[str, Any]], ModelStats | None]:
    """An ordinary online evaluation of the kept candidate with `gguf` served as [target] `name`: per-task rewards of
    the scored rollouts (an unscored one is counted apart, as the harness counts it, never as 0), and the target's
    statistics as that evaluation recorded them."""
    repo_dir = out / f"eval-{name}"
    if repo_dir.exists():
        shutil.rmtree(repo_dir)
    source = out / "eval-source"
    if not source.exists():
        shutil.copytree(export / "candidate", source)
        spec = subprocess.run(["git", "-C", str(root), "show", f"{commit}:spec.md"],
                              capture_output=True, text=True, check=False).stdout
        (source / "spec.md").write_text(spec or "(no spec.md at the kept commit)\n")
    config = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{CONFIG_NAME}"],
                            capture_output=True, text=True, check=False).stdout or None
    slots, _ = machine_settings()
    with Server(binary, gguf, name, log=out / f"llama-server-{name}.log").start() as server, \
            oracle_endpoint(source, log=out / f"oracle-{name}.log") as strong_url:
        budget = {"rollouts_per_example": rollouts, "max_concurrent": slots, "rollout_timeout": 300}
        text = real_config(server.base_url, name, strong_url, budget=budget, base=config, keep_examples=True)
        repo = make_run_repo("train", repo_dir, text, source=source)
        display.console.print(f"train: evaluating the {name} model through the harness ({repo})")
        entry = evaluate(EvalOptions(cwd=repo, description=f"{name} model after autoenv train"))
    rows: dict[str, dict[str, Any]] = {}
    for rollout in read_rollouts(repo / "outputs" / entry.commit / "target"):
        if rollout.task_key not in held:
            raise AutoEnvError(f"the harness evaluated task {rollout.task_key!r}, which is not in the held-out split",
                               where=str(repo / "config.toml"), fix="evaluate with the kept commit's seed and budget")
        if rollout.outcome != "ok" or rollout.reward is None:
            continue
        row = rows.setdefault(rollout.task_key, {"rewards": [], "difficulty": rollout.difficulty})
        row["rewards"].append(rollout.reward)
    replies = _replies(repo / "outputs" / entry.commit / "target")
    for key, row in rows.items():
        row["mean"] = float(np.mean(row["rewards"]))
        row["prompt"], row["reply"] = replies.get(key, ("", ""))
    return rows, entry.stats.get("target")


def _replies(directory: Path) -> dict[str, tuple[str, str]]:
    """One (prompt, reply) per task key from the stored traces (for the before/after transcript)."""
    found: dict[str, tuple[str, str]] = {}
    path = directory / "traces.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        for trace in json.loads(line).get("traces") or []:
            key = (trace.get("task") or {}).get("key")
            texts = [n.get("message", {}) for n in trace.get("nodes") or []]
            user = next((m.get("content") for m in texts if m.get("role") == "user"), "")
            reply = next((m.get("content") for m in reversed(texts) if m.get("role") == "assistant"), "")
            if key and key not in found:
                found[key] = (str(user or ""), str(reply or ""))
    return found


def _run(cmd: list[str], what: str) -> None:
    display.console.print(f"train: {what}")
    with display.Waiting("train", what):  # minutes with nothing else to show: a line at least every 30 s
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AutoEnvError(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}",
                           where=" ".join(cmd[:3]), fix="read the error above; the trainer venv is under "
                           "~/.cache/autoenv/train-venv")


def _trainer(python: Path, args: list[str]) -> dict[str, Any]:
    """Run grpo_local.py, echoing its progress lines; its last line is a JSON summary."""
    proc = subprocess.Popen([str(python), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**__import__("os").environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                 "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    tail: list[str] = []
    assert proc.stdout is not None
    with display.Waiting("train", "GRPO steps (a step takes minutes on a CPU)") as waiting:
        for line in proc.stdout:  # the trainer's own lines, and a heartbeat between them at least every 30 s
            tail = (tail + [line.rstrip()])[-40:]
            if line.startswith("train:"):
                display.console.print(line.rstrip())
                waiting.said()
    if proc.wait() != 0 or not tail or not tail[-1].startswith("{"):
        raise AutoEnvError(f"the GRPO trainer failed (exit {proc.returncode}):\n" + "\n".join(tail[-25:]),
                           where=args[0], fix="read the trainer's output above")
    result: dict[str, Any] = json.loads(tail[-1])
    return result
