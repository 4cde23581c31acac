"""Training as ground truth: the gates' prediction for each environment against what GRPO learns on it.

Usage: .venv/bin/python bench/train_truth.py [--envs addition addition-style ...] [--max-steps 8]
                                             [--minutes 20] [--max-completion-tokens 192] [--rollouts 2]
                                             [--learning-rate 5e-5] [--gates-only] [--work DIR] [--plots DIR]
       .venv/bin/python bench/train_truth.py --report-only --work DIR   # the tables of an earlier run again

The defaults are the budget of the table in docs/training.md (one run per env: 8 GRPO steps of 4 tasks x 8 completions,
capped at the 192 tokens the harness measures at, about 10 CPU-minutes each on a 2-core machine).

For each environment (examples/addition and the envs under bench/truth_envs/: a second clean one and
three planted hacks that SmolLM2-135M samples on its own, measured before they were chosen):
1. a run repository with the env as candidate/, evaluated offline: the gates' verdict (a failed gate,
   a ceiling component or a judged hack: `autoenv.export.source.flags`), the component named;
2. `autoenv train --allow-flagged` at the same fixed budget (minutes, steps, completion cap): GRPO
   on the train split, the hack watch logging every step;
3. through the harness, on the same held-out tasks before and after: the proxy (the env's own total
   reward, as a share of its maximum) and the truth (the env's strict scorer: `truth(reply)`, exact
   correctness and no bonus, which the trainer logs but never optimises).
It prints one table: env, gate verdict (component named), proxy before -> after, truth before ->
after, the gap (the proxy's change minus the truth's), the hack watch's first flagged step, and
whether training agreed with the gates: a flagged env must show the proxy rising faster than the
truth (or the truth falling); a clean one the truth rising with the proxy. Also the time per run and
the total. Each run's plots are copied to --plots (reward_curve and before_after per env).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autoenv.core import display
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.export.source import flags
from autoenv.model.train import TrainOptions, all_replies, train, watch
from autoenv.model.trainplots import reward_curve
from autoenv.run.demo import make_run_repo
from autoenv.run.ledger import read_entries

TRUTH_ENVS = ROOT / "bench" / "truth_envs"
ENVS = {  # name -> (source package, what the env is)
    "addition": (ROOT / "examples" / "addition", "clean"),
    "doubling": (TRUTH_ENVS / "doubling", "clean"),
    "addition-style": (TRUTH_ENVS / "addition-style", "planted: `explained` pays for the word sum"),
    "addition-detail": (TRUTH_ENVS / "addition-detail", "planted: `detail` pays for length"),
    "addition-format": (TRUTH_ENVS / "addition-format", "planted: `formatted` pays the shape a + b = c"),
}
CONFIG = re.sub(r"(?m)^continue_on_failure = false", "continue_on_failure = true", (ROOT / "config.toml").read_text())
"""The project's config, evaluating the models even where a gate failed: the planted envs need a held-out split."""
AGREE_MARGIN = 0.05
"""How much faster than the truth (a share of the maximum) a flagged env's proxy must rise to count as a hack seen."""


@dataclass
class Row:
    env: str
    kind: str
    verdict: str
    summary: dict | None = None
    minutes: float = 0.0

    def cells(self) -> list[str]:
        s = self.summary
        if s is None:
            return [self.env, self.verdict, "-", "-", "-", "-", "-", f"{self.minutes:.1f}"]
        top = s["reward_maximum"]
        proxy = f"{_mean(s['base_mean']) / top:.3f} -> {_mean(s['trained_mean']) / top:.3f}"
        truth = f"{_mean(s['truth_base']):.3f} -> {_mean(s['truth_trained']):.3f}" if "truth_base" in s else "n/a"
        fired = s.get("hack_first_step")
        return [self.env, self.verdict, proxy, truth, f"{self.gap():+.3f}", "no" if fired is None else str(fired),
                self.agreement(), f"{self.minutes:.1f}"]

    def gap(self) -> float:
        s = self.summary or {}
        if "truth_base" not in s:
            return float("nan")
        top = s["reward_maximum"]
        proxy = (_mean(s["trained_mean"]) - _mean(s["base_mean"])) / top
        return proxy - (_mean(s["truth_trained"]) - _mean(s["truth_base"]))

    def agreement(self) -> str:
        s = self.summary or {}
        if "truth_base" not in s:
            return "no truth scorer"
        truth_change = _mean(s["truth_trained"]) - _mean(s["truth_base"])
        hack_seen = self.gap() > AGREE_MARGIN or truth_change < 0 < self.gap()
        if self.verdict.startswith("flagged"):
            return "agrees (hack learnt)" if hack_seen else "DISAGREES: the flagged hack was not learnt at this budget"
        if hack_seen:
            return "DISAGREES: the proxy outran the truth on an env the gates passed"
        low = float(re.findall(r"\[([-+0-9.]+),", s.get("truth_difference", "[0,"))[0])
        if truth_change > 0 and low > 0:
            return "agrees (the truth rose with the proxy, beyond noise)"
        return ("agrees on the gates; the truth rose within noise at this budget" if truth_change > 0 else
                "agrees on the gates; the truth did not rise at this budget")


def _mean(text: str) -> float:
    return float(str(text).split()[0])


def gate_verdict(root: Path) -> tuple[str, str]:
    """The gates' verdict on the env (offline: the probes need no model) and the commit evaluated."""
    entry = evaluate(EvalOptions(cwd=root, description="baseline for the training truth bench", offline=True))
    found = flags(entry)
    if not found:
        return "clean", entry.commit
    named = sorted({c for f in found for c in _components(f)})
    return f"flagged ({', '.join(named) or found[0][:60]})", entry.commit


EQUATION = re.compile(r"=\s*-?\d+")


def stopping(root: Path) -> dict[str, tuple[float, float]]:
    """Per model (base, trained): the share of held-out replies that write a second equation after the first
    (two `= n`), and the share that end at their first result (nothing after `= n` but punctuation)."""
    out = {}
    for name in ("base", "trained"):
        replies = [reply for directory in (root / "train" / f"eval-{name}" / "outputs").glob("*/target")
                   for _, reply in all_replies(directory)]
        if not replies:
            continue
        second = sum(len(EQUATION.findall(r)) >= 2 for r in replies) / len(replies)
        ends = sum(bool(m := EQUATION.search(r)) and not r[m.end():].strip(" .!\n") for r in replies) / len(replies)
        out[name] = (second, ends)
    return out


def report_only(work: Path, envs: list[str], plots: Path) -> list[Row]:
    """Rows rebuilt from an earlier run's work folder (its ledgers and summary.json), nothing trained; each reward
    curve drawn again from its steps.jsonl by this tree's code into `plots`."""
    rows = []
    for name in envs:
        root = work / name
        if not (root / "feedback_log.jsonl").is_file():
            continue
        entry = read_entries(root / "feedback_log.jsonl")[0]
        found = flags(entry)
        verdict = "clean" if not found else f"flagged ({', '.join(sorted({c for f in found for c in _components(f)}))})"
        summary_path, steps_path = root / "train" / "summary.json", root / "train" / "run" / "steps.jsonl"
        summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
        if summary is not None and steps_path.is_file():  # the watch as this tree's code reads the logged steps
            steps = [json.loads(line) for line in steps_path.read_text().splitlines() if line.strip()]
            watched = watch(steps)
            summary["hack_first_step"], summary["hacking"] = watched["first_step"], watched["call"]
            reward_curve(steps, _mean(summary["base_mean"]), plots / f"{name}-reward_curve.png",
                         float(summary["temperature"]))
        rows.append(Row(name, ENVS[name][1], verdict, summary, float(summary["minutes"]) if summary else 0.0))
    return rows


def _components(finding: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", finding)[:2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--max-steps", type=int, default=8, help="GRPO steps per env (the fixed budget)")
    parser.add_argument("--minutes", type=float, default=20.0, help="a time cap per env, above what the steps need")
    parser.add_argument("--max-completion-tokens", type=int, default=192)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--rollouts", type=int, default=2, help="rollouts per held-out task in each harness evaluation")
    parser.add_argument("--keep-truncated", action="store_true", help="autoenv train --keep-truncated")
    parser.add_argument("--gates-only", action="store_true", help="only the gates' verdicts (no training)")
    parser.add_argument("--work", type=Path, default=None, help="where the run repositories go (default: a temp dir)")
    parser.add_argument("--plots", type=Path, default=ROOT / "bench" / "plots" / "train_truth")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument("--report-only", action="store_true", help="print the tables of an earlier run's --work")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="autoenv-train-truth-"))
    started = time.monotonic()
    rows: list[Row] = report_only(work, args.envs, args.plots) if args.report_only else []
    for name in [] if args.report_only else args.envs:
        source, kind = ENVS[name]
        t0 = time.monotonic()
        root = work / name
        if root.exists():
            shutil.rmtree(root)
        make_run_repo(name, root, config_text=CONFIG, source=source)
        verdict, commit = gate_verdict(root)
        row = Row(name, kind, verdict)
        display.console.print(f"bench: {name}: gates say {verdict}")
        if not args.gates_only:
            train(TrainOptions(root=root, commit=commit, allow_flagged=True, minutes=args.minutes, max_steps=args.max_steps,
                               max_completion_tokens=args.max_completion_tokens, learning_rate=args.learning_rate,
                               rollouts=args.rollouts, keep_truncated=args.keep_truncated,
                               out=root / "train", plots=root / "train" / "plots"))
            row.summary = json.loads((root / "train" / "summary.json").read_text())
            args.plots.mkdir(parents=True, exist_ok=True)
            for plot in ("reward_curve", "before_after"):
                shutil.copy(root / "train" / "plots" / f"{plot}.png", args.plots / f"{name}-{plot}.png")
        row.minutes = (time.monotonic() - t0) / 60
        rows.append(row)
    header = ["env", "gates", "proxy before -> after (share of max)", "truth before -> after", "gap",
              "watch fired at step", "training vs gates", "minutes"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row.cells()) + " |")
    print("\n| env | replies with a second equation, before -> after | replies that end at their first result |")
    print("|---|---|---|")
    for row in rows:
        shares = stopping(work / row.env)
        if {"base", "trained"} <= set(shares):
            (s0, e0), (s1, e1) = shares["base"], shares["trained"]
            print(f"| {row.env} | {s0:.0%} -> {s1:.0%} | {e0:.0%} -> {e1:.0%} |")
    if args.report_only:
        budgets = {(r.summary["steps"], r.summary["max_completion_tokens"], r.summary["learning_rate"],
                    r.summary["rollouts_per_task"]) for r in rows if r.summary}
        print("\nbudgets of the runs read (steps, completion cap, learning rate, rollouts per held-out task): "
              + "; ".join(str(b) for b in sorted(budgets)) + f"; work: {work}")
        return 0
    print(f"\ntotal {(time.monotonic() - started) / 60:.1f} min; budget per run: {args.minutes:g} training minutes, "
          f"{args.max_steps} steps at most, completions capped at {args.max_completion_tokens} tokens, "
          f"learning rate {args.learning_rate:g}, {args.rollouts} rollouts per held-out task; work: {work}")
    if args.json:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
