"""How often the feedback names the planted flaw first, with its own fix, and nothing else.

Usage: .venv/bin/python bench/judge.py [--examples hack-format,hack-recall] [--clean quiz-numbers] [--seeds 10]
                                       [--backend offline|claude|anthropic]

Each planted example (examples/hack-*, labelled in bench/judge_labels.toml) goes through one real offline evaluation
in a scratch run repository (the config's probe budget, the tests' small model budget) and its feedback is scored:
- first cause right: the first item of "Fix first" holds the label's `issue` words (the planted component and what it
  pays for, or the dataset check);
- fix specific: the fix holds the label's `fix` words where it has them, and no other planted example got the same
  fix (its component's name aside): no shared generic sentence;
- false causes: the items after the first (each names a cause that was not planted);
- size: the feedback file's bytes.
Then the clean example is evaluated over `--seeds` seeds (other tasks each time) and every cause of failed gates its
feedback names is a false one. The judge is the offline one unless `--backend` names another; the Claude and Anthropic backends need
their key (ANTHROPIC_API_KEY) and are skipped, with the reason, without it. Prints a markdown table and the rates.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.evaluation.report import check_fix
from autoenv.judge.causes import causes
from autoenv.run.demo import make_run_repo

LABELS = Path(__file__).with_name("judge_labels.toml")
BUDGET = {"examples": 3, "rollouts_per_example": 2, "max_concurrent": 4, "rollout_timeout": 60, "min_tasks": 2}
"""The model budget of an offline evaluation here (as the tests' small config): the gates are what is scored."""


def config_text(seed: int | None, backend: str) -> str:
    text = (PROJECT / "config.toml").read_text()
    for key, value in BUDGET.items():
        text = re.sub(rf"(?m)^{key} = [^\n#]*", f"{key} = {value}  ", text)
    if seed is not None:
        text = re.sub(r"(?m)^seed = [^\n#]*", f"seed = {seed}  ", text)
    return re.sub(r'(?m)^backend = "auto"', f'backend = "{backend}"', text, count=1)


def evaluated(example: str, root: Path, seed: int | None, backend: str) -> tuple[list, int, int]:
    """(the feedback's "Fix first" items, the causes of failed gates it names, the feedback file's bytes) of one
    offline evaluation of `example`."""
    repo = make_run_repo(example, root, config_text(seed, backend), run_base=True)
    entry = evaluate(EvalOptions(cwd=repo, offline=True, description=f"bench judge {example}"))
    priorities = list(entry.judge.findings.priorities) if entry.judge and entry.judge.findings else []
    named = len(causes(entry.gates, check_fix)) if entry.gates is not None else 0
    feedback = repo / "feedback" / f"{entry.commit}.md"
    return priorities, named, feedback.stat().st_size if feedback.is_file() else 0


def generic(fix: str) -> str:
    """A fix without the component it names: what two causes would share if it were one sentence for all."""
    return re.sub(r"^`[^`]+`: ", "", fix)


def backend_ready(backend: str) -> str | None:
    """Why `backend` cannot run here, or None."""
    if backend == "offline":
        return None
    if not os.environ.get("ANTHROPIC_API_KEY"):
        return "ANTHROPIC_API_KEY is not set"
    if backend == "claude" and shutil.which("claude") is None:
        return "the claude CLI is not installed"
    return None


def main() -> None:
    labels = tomllib.loads(LABELS.read_text())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", default=",".join(labels))
    parser.add_argument("--clean", default="quiz-numbers", help="a clean example evaluated over --seeds seeds")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--backend", default="offline", choices=("offline", "claude", "anthropic"))
    args = parser.parse_args()
    why = backend_ready(args.backend)
    if why is not None:
        print(f"the {args.backend} judge is skipped: {why}")
        return
    names = [n for n in args.examples.split(",") if n]
    rows: dict[str, dict] = {}
    print(f"judge: {args.backend}\n")
    print("| example | first cause right | fix holds its words | false causes | bytes | first fix |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="autoenv-bench-judge-") as tmp:
        for name in names:
            label = labels.get(name, {})
            priorities, _, size = evaluated(name, Path(tmp) / name, None, args.backend)
            first = priorities[0] if priorities else None
            right = first is not None and all(w in first.issue for w in label.get("issue", ["\0"]))
            worded = first is not None and all(w in first.fix for w in label.get("fix", []))
            rows[name] = {"right": right, "worded": worded, "false": max(len(priorities) - 1, 0), "size": size,
                          "fix": generic(first.fix) if first else ""}
            fix = (first.fix if first else "(none)").replace("|", "/")
            print(f"| {name} | {'yes' if right else 'NO'} | {'yes' if worded else 'NO'} | {rows[name]['false']} | "
                  f"{size} | {fix[:90]}{'...' if len(fix) > 90 else ''} |", flush=True)
        shared = {n for n, r in rows.items() if r["fix"] and sum(o["fix"] == r["fix"] for o in rows.values()) > 1}
        clean = []
        for seed in range(args.seeds):
            _, named, _ = evaluated(args.clean, Path(tmp) / f"clean-{seed}", 1000 + seed, args.backend)
            clean.append(named)
    n = len(rows) or 1
    print(f"\nfirst cause right: {sum(r['right'] for r in rows.values())}/{len(rows)} "
          f"({sum(r['right'] for r in rows.values()) / n:.0%})")
    print(f"fix specific (its words, and no other example's fix): "
          f"{sum(r['worded'] and name not in shared for name, r in rows.items())}/{len(rows)}"
          + (f"; shared by {', '.join(sorted(shared))}" if shared else ""))
    print(f"false causes: {sum(r['false'] for r in rows.values())} over {len(rows)} planted examples")
    print(f"feedback size: {min((r['size'] for r in rows.values()), default=0)}–"
          f"{max((r['size'] for r in rows.values()), default=0)} bytes")
    print(f"clean example {args.clean} over {args.seeds} seeds: causes named {clean} "
          f"({sum(1 for c in clean if c)} of {args.seeds} seeds with a false cause)")


if __name__ == "__main__":
    main()
