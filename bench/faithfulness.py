"""The faithfulness matrix: every example x every probe, with and without its oracle hooks.

For each example (clean and planted hacks), once as shipped and once with its oracle hooks
removed (an example written without hooks runs once, hook `none`), one offline evaluation through the real CLI in a scratch run repository (with
probes.continue_on_failure = true, so the rollouts run and the probes derived from them
are played too). Prints one row per (example, hook) with each probe's result and mean:
`F` failed, `p` passed, `w` warned, `-` not tested (n/a), the content-free rule (`free`: the reference-free
invariant of autoenv.gates.free, with the probes it failed), then the verdict.

Usage: .venv/bin/python bench/faithfulness.py [--examples a,b] [--tasks N] [--markdown]
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

from autoenv.core.paths import EXAMPLES, PROJECT, examples
from autoenv.gates.probes import DERIVED_EXPLOITS, EXPLOITS
from autoenv.run.demo import make_run_repo

MARK = {"fail": "F", "pass": "p", "warn": "w", "skip": "-"}


def config_text(tasks: int) -> str:
    text = (PROJECT / "config.toml").read_text()
    text = re.sub(r"(?m)^examples = \d+", f"examples = {tasks}", text)
    text = re.sub(r"(?m)^rollouts_per_example = \d+", "rollouts_per_example = 2", text)
    return text.replace("continue_on_failure = false", "continue_on_failure = true")


def evaluate(example: str, oracle: bool, tasks: int) -> tuple[dict | None, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = make_run_repo(example, Path(tmp) / "run", config_text(tasks), oracle=oracle)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autoenv.cli", "eval", "--offline"], cwd=root, capture_output=True,
                       text=True)
        seconds = time.perf_counter() - started
        log = root / "feedback_log.jsonl"
        if not log.is_file():
            return None, seconds
        return json.loads(log.read_text().splitlines()[-1]), seconds


def cells(entry: dict, columns: list[str]) -> list[str]:
    gates = entry.get("gates") or {}
    status = {f["name"].removeprefix("probe "): f["status"] for f in gates.get("findings", [])}
    probes = gates.get("probes") or {}
    out = []
    for column in columns:
        st = status.get(column)
        mean = (probes.get(column) or {}).get("mean")
        if st is None:
            out.append("")
        elif mean is None or st == "skip":
            out.append("-")
        else:
            out.append(f"{MARK[st]} {mean:.2f}")
    return out


def has_hook(example: str) -> bool:
    return any("def oracle(" in p.read_text() for p in (EXAMPLES / example).rglob("*.py"))


def free_cell(entry: dict) -> str:
    found = [f for f in (entry.get("gates") or {}).get("findings", []) if f["name"] == "content-free"]
    if not found:
        return ""
    f = found[0]
    return MARK[f["status"]] + (" " + ",".join(f["data"].get("failed") or []) if f["status"] == "fail" else "")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", default=",".join(examples()))
    parser.add_argument("--tasks", type=int, default=8, help="tasks per offline evaluation (budget.examples)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    columns = ["oracle", *EXPLOITS, *[f"derived {n}" for n in DERIVED_EXPLOITS]]
    short = [c.replace("derived ", "d:") for c in columns]
    header = ["example", "hook", *short, "tested", "free", "verdict", "s"]
    rows = []
    for example in args.examples.split(","):
        for oracle in (True, False) if has_hook(example) else (True,):
            hook = ("yes" if oracle else "no") if has_hook(example) else "none"
            entry, seconds = evaluate(example, oracle, args.tasks)
            if entry is None:
                rows.append([example, hook, *[""] * len(columns), "", "", "no entry", f"{seconds:.0f}"])
            else:
                tested = next((f["message"].split(" exploit")[0] for f in entry["gates"]["findings"]
                               if f["name"] == "probes tested"), "")
                rows.append([example, hook, *cells(entry, columns), tested, free_cell(entry),
                             entry["verdict"]["verdict"], f"{seconds:.0f}"])
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
