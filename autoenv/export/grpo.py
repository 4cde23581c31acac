"""`autoenv export grpo`: what a GRPO run needs from a kept commit.

The dataset split (every task but the ones the harness sampled for its evaluations, which
are held out), the reward components with their weights, and a trainer's entry point: a TRL
`GRPOTrainer` script whose reward functions are the candidate's own (scored through
verifiers, num_generations = the budget's group size), or a prime-rl environment config.
When tasks carry `difficulty`, the training split is ordered by level, easiest first by the
target's mean per level from the ledger, and the README says when to unlock the next one.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from autoenv.core.config import CONFIG_NAME, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.levels import natural_order
from autoenv.export.source import Kept, load_kept, reward_table
from autoenv.sandbox.candidaterun import confined, installed

TEMPLATES = Path(__file__).parent / "templates"
IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".venv", "build", "dist")


def export_grpo(root: Path, trainer: str, out: Path | None = None, commit: str | None = None,
                flagged_ok: bool = False) -> Path:
    """Write the GRPO hand-off of the run at `root`'s last kept commit (or `commit`; with `flagged_ok`, also one
    discarded for its failed gates: autoenv.export.source.kept_entry); return its folder."""
    cfg = load_config(root / CONFIG_NAME)
    with tempfile.TemporaryDirectory(prefix="autoenv-grpo-") as work:
        kept = load_kept(root, Path(work), commit, flagged_ok)
        if trainer == "trl":
            _refuse_multi_turn(kept)
        out = out or root / "export" / f"grpo-{trainer}"
        if out.exists():
            if not (out / "rewards.json").is_file():
                raise AutoEnvError(f"{out} exists and is not an earlier GRPO export", where=str(out),
                                   fix="pass --out to an empty or new folder")
            shutil.rmtree(out)
        (out / "dataset").mkdir(parents=True)
        rows = dump_tasks(kept.candidate)
        held = {row["key"] for row in kept.held_out}
        levels, ordered_by = level_order(kept, rows, cfg.stats.min_tasks)
        rank = {level: i for i, level in enumerate(levels)}
        train = sorted((r for r in rows if r["key"] not in held), key=lambda r: rank.get(str(r.get("difficulty")), 0))
        evals = [r for r in rows if r["key"] in held]
        for name, part in (("train", train), ("eval", evals)):
            (out / "dataset" / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part))
        weights = {c.name: c.weight for c in kept.components}
        (out / "rewards.json").write_text(json.dumps(weights, indent=1) + "\n")
        group = kept.entry.budget.rollouts_per_example if kept.entry.budget else cfg.budget.rollouts_per_example
        curriculum = _curriculum(kept, levels, train, cfg.bands.target_max) | {"order": ordered_by}
        (out / "curriculum.json").write_text(json.dumps(curriculum, indent=1) + "\n")
        shutil.copytree(kept.candidate, out / "candidate", ignore=IGNORE)
        if trainer == "trl":
            script = (TEMPLATES / "train_trl.py.tmpl").read_text().replace("__GROUP__", str(group))
            (out / "train_trl.py").write_text(script)
        else:
            (out / "prime-rl.toml").write_text(_prime_rl(kept, group))
        (out / "README.md").write_text(_readme(kept, trainer, group, len(train), len(evals), curriculum))
    return out


def dump_tasks(candidate: Path) -> list[dict]:
    """Every task of the candidate, loaded by its own venv's Python in the sandbox (autoenv.sandbox.candidaterun:
    verifiers and the candidate's code, no secret, nothing writable; `candidate` is a copy, its venv removed after)."""
    with installed(candidate, disposable=True) as folder:
        cmd, env = confined(folder, "autoenv.export.dump", [str(folder)])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env, cwd=folder)
    if proc.returncode != 0:
        raise AutoEnvError("loading the candidate's tasks failed:\n" + proc.stderr.strip()[-800:], where=str(candidate),
                           fix="run `autoenv check` on the kept commit to see the candidate's error")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _refuse_multi_turn(kept: Kept) -> None:
    for path in (kept.candidate / "candidate_env").rglob("*.py"):
        if re.search(r"\bvf\.(Toolset|SingleAgentEnv|Env)\b|@vf\.tool\b|OpenEnvEnv", path.read_text(errors="replace")):
            raise AutoEnvError(
                f"the candidate is multi-turn or uses tools ({path.relative_to(kept.candidate)}): the TRL script "
                "scores one completion per prompt", where=str(kept.root / "candidate" / path.relative_to(kept.candidate)),
                fix="use --trainer prime-rl, whose trainer runs verifiers environments (multi-turn and tools included)")


def level_order(kept: Kept, rows: list[dict], min_tasks: int = 10) -> tuple[list[str], str]:
    """Difficulty levels, easiest first, and which order that is: by the target's measured mean per
    level only when every step between neighbours is beyond noise, else the natural order (autoenv.core.levels)."""
    natural = natural_order(str(r["difficulty"]) for r in rows if r.get("difficulty") is not None)
    target = kept.entry.stats.get("target")
    groups = target.by_difficulty if target else {}
    means = {k: g.mean for k, g in groups.items() if g.mean is not None}
    if not natural or any(level not in means for level in natural):
        return natural, "natural order (easy < medium < hard, else as listed): not every level was measured"
    measured = sorted(natural, key=lambda level: -means[level])
    if measured == natural:
        return natural, "natural order, which the measured means agree with"
    per_task = kept.entry.budget.rollouts_per_example if kept.entry.budget else 1
    steps = list(itertools.pairwise(measured))
    noisy = [f"{a} {means[a]:.3f} vs {b} {means[b]:.3f}" for a, b in steps
             if not beyond_noise(groups[a].n / per_task, means[a], groups[b].n / per_task, means[b], min_tasks)]
    if noisy:
        return natural, ("natural order (easy < medium < hard, else as listed): the measured means would order "
                         f"them otherwise, but within noise ({'; '.join(noisy)}; fewer than stats.min_tasks = "
                         f"{min_tasks} tasks per level, or a gap under two standard errors)")
    return measured, "measured: the target's mean per level, easiest first, every step beyond noise"


def beyond_noise(tasks_a: float, mean_a: float, tasks_b: float, mean_b: float, min_tasks: int) -> bool:
    """Two levels' means differ by more than two standard errors, each level over at least `min_tasks` tasks
    (rewards in [0, 1]: a level's variance is at most mean x (1 - mean), counted per task)."""
    if min(tasks_a, tasks_b) < min_tasks:
        return False
    var = sum(max(m * (1 - m), 0.01) / n for m, n in ((mean_a, tasks_a), (mean_b, tasks_b)))
    return abs(mean_a - mean_b) > 2 * var ** 0.5


def _curriculum(kept: Kept, levels: list[str], train: list[dict], unlock_at: float) -> dict:
    target = kept.entry.stats.get("target")
    means = {k: g.mean for k, g in target.by_difficulty.items()} if target else {}
    return {"levels": [{"difficulty": level, "train_tasks": sum(r.get("difficulty") == level for r in train),
                        "target_mean_at_export": means.get(level)} for level in levels],
            "unlock_next_when_mean_reaches": unlock_at}


def _prime_rl(kept: Kept, group: int) -> str:
    return f"""# prime-rl: the kept candidate as a verifiers environment (written by autoenv export grpo).
# Install the environment into the trainer's venv first: uv pip install -e ./candidate
# Keys follow prime-rl's orchestrator config; check them against the prime-rl version you run.

[orchestrator]
rollouts_per_example = {group}   # the GRPO group size AutoEnv evaluated with

[[orchestrator.env]]
id = "candidate-env"             # the package exported by candidate/ (module candidate_env)

[orchestrator.sampling]
max_tokens = 1024
"""


def _readme(kept: Kept, trainer: str, group: int, n_train: int, n_eval: int, curriculum: dict) -> str:
    entry = kept.entry
    lines = [f"# GRPO hand-off of commit `{kept.commit}` ({trainer})", "",
             f"Verdict at export: {entry.verdict.verdict}. {entry.verdict.reason[:300]}", "", "## Baseline (from the ledger)", ""]
    for role, stats in entry.stats.items():
        lines.append(f"- {role} `{stats.model}`: mean {stats.mean:.3f}, solve rate {stats.solve_rate:.3f}, "
                     f"disagreeing tasks {stats.disagree_share:.2f}" if stats.mean is not None else f"- {role}: no score")
    lines += ["", "## Rewards", "", reward_table(kept), "",
              (f"## Data\n\n`dataset/train.jsonl`: {n_train} tasks; `dataset/eval.jsonl`: the {n_eval} tasks AutoEnv "
               "sampled for its evaluations, held out of training. Rows: idx, key, messages, difficulty, answer."), ""]
    if curriculum["levels"]:
        lines += ["## Curriculum", "", ("The training split is ordered by level, easiest first, in "
                  f"{curriculum.get('order', 'natural order')}:"), ""]
        for level in curriculum["levels"]:
            mean = level["target_mean_at_export"]
            lines.append(f"- `{level['difficulty']}`: {level['train_tasks']} tasks, target mean at export "
                         + ("–" if mean is None else f"{mean:.3f}"))
        lines += ["", (f"Unlock the next level when the policy's mean reward on the current one reaches "
                       f"{curriculum['unlock_next_when_mean_reaches']} (the top of the target band), measured on "
                       "that level's held-out tasks."), ""]
    if trainer == "trl":
        lines += ["## Run", "", "```bash", "pip install torch trl datasets 'verifiers==0.4.0' -e ./candidate",
                  "python train_trl.py --model Qwen/Qwen2.5-0.5B-Instruct --max-steps 200 --output-dir runs/grpo",
                  "```", "", (f"`num_generations` = {group} (the budget's rollouts per example). `--tiny` builds a "
                              "small random model and tokenizer locally (no download) to check the plumbing on CPU."), ""]
    else:
        lines += ["## Run", "", ("`prime-rl.toml` names the environment and the group size; install ./candidate "
                                 "into the trainer's venv."), ""]
    lines += ["## Before and after", "", ("Evaluate the trained model against the base one on the held-out tasks "
                                          "with `autoenv compare --models` (point [target] at each model's endpoint)."), ""]
    return "\n".join(lines)
