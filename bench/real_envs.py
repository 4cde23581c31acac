"""The gates on existing environments, before and after the harness learnt to take them as they are.

Usage: .venv/bin/python bench/real_envs.py [--before main] [--examples real-glossary real-duel]
       .venv/bin/python bench/real_envs.py --shapes stop-guard kuhn-seats [--before REF]

`--shapes` runs the real verifiers v1 shapes under tests/data (each written here after a public env
of verifiers' environments/ folder: stop-guard ~ interception, kuhn-seats ~ kuhn_poker, contract-env
~ proposer_solver, judged-answer ~ wiki_search's judge, version-verify ~ gsm8k's uv script) with
`autoenv probe --env` under both harnesses (the before ref must have `--env`), and prints one row per
env: false failed gates (every env is a legitimate design, so every failed gate is false), untested
exploit probes (skipped although they apply: a probe that does not apply to the shape is not counted), and
vacuous passes (`passed` with under half the probes tested, a matrix over 0
components, an answer-balance warning when every answer is distinct).

For each example under examples/ (an environment with its own name and shape), `autoenv probe`
runs twice, with the probe budget of config.toml:
- before: the harness of the git ref `--before` (exported with `git archive`, run from its own
  source tree with this venv), on a copy of the example renamed into the workspace contract
  (package `candidate-env`, module `candidate_env`), since that harness could import nothing else;
- after: this tree's harness, `autoenv probe --env examples/<name>`, the example as it is.
It prints one markdown table per example: each gate's status and message, before and after.
The before run installs the renamed copy as candidate-env in this venv; the repository's own
candidate/ is installed again at the end.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from autoenv.sandbox.install import install_candidate  # noqa: E402


def export(ref: str, into: Path) -> Path:
    """The harness source of `ref` (autoenv/, config.toml) under `into`."""
    data = subprocess.run(["git", "-C", str(PROJECT), "archive", ref, "autoenv", "config.toml"],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def renamed(example: Path, into: Path) -> Path:
    """The example as the workspace contract wants it: distribution candidate-env, module candidate_env."""
    name = tomllib.loads((example / "pyproject.toml").read_text())["project"]["name"]
    module = name.replace("-", "_")
    shutil.copytree(example, into, ignore=shutil.ignore_patterns("__pycache__"))
    (into / module).rename(into / "candidate_env")
    for path in [*into.rglob("*.py"), into / "pyproject.toml"]:
        text = path.read_text()
        path.write_text(text.replace(f'name = "{name}"', 'name = "candidate-env"').replace(module, "candidate_env"))
    return into


def probe(cwd: Path, args: list[str], source: Path | None) -> dict[str, tuple[str, str]]:
    env = {**os.environ, "NO_COLOR": "1"}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    result = subprocess.run([sys.executable, "-m", "autoenv.cli", "probe", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=1800)
    found = sorted((cwd / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return {"(no gates)": ("error", (result.stdout + result.stderr).strip().splitlines()[-1][:200])}
    gates = json.loads(found[-1].read_text())
    return {f["name"]: (f["status"], " ".join(f["message"].split())[:150]) for f in gates["findings"]}


def table(name: str, before: dict, after: dict) -> str:
    lines = [f"### {name}", "", "| gate | before | after |", "|---|---|---|"]
    for gate in list(dict.fromkeys([*before, *after])):
        b, a = before.get(gate, ("–", "")), after.get(gate, ("–", ""))
        cell = lambda s: f"**{s[0]}** {s[1]}".replace("|", "/") if s[0] != "–" else "–"  # noqa: E731
        lines.append(f"| {gate} | {cell(b)} | {cell(a)} |")
    return "\n".join(lines)


def findings_of(cwd: Path, args: list[str], source: Path | None) -> list[dict]:
    env = {**os.environ, "NO_COLOR": "1", **({"PYTHONPATH": str(source)} if source is not None else {})}
    subprocess.run([sys.executable, "-m", "autoenv.cli", "probe", *args], cwd=cwd, env=env, capture_output=True,
                   text=True, timeout=1800)
    found = sorted((cwd / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(found[-1].read_text())["findings"] if found else []


def shape_counts(findings: list[dict]) -> tuple[int, int, int]:
    """(false failed gates, untested exploit probes, vacuous passes) of one legitimate env's gate report."""
    failed = sum(1 for f in findings if f["status"] == "fail")
    tested = next((f for f in findings if f["name"] == "probes tested"), None)
    probes = [f for f in findings if f["name"].startswith("probe ") and not f["name"].startswith("probe derived")]
    # a probe that does not apply to the env's shape (no labelled options, not a code task) is not untested
    untested = sum(1 for f in probes if f["status"] == "skip" and "does not apply" not in f["message"])
    n_tested = len((tested or {}).get("data", {}).get("tested") or [])
    vacuous = 0
    if not failed and probes and n_tested < len(probes) / 2 and (tested or {}).get("data", {}).get("coverage") != "untested":
        vacuous += 1  # passed on under half of the probes
    vacuous += sum(1 for f in findings if "no reward component of 0 harvested" in f["message"])
    balance = next((f for f in findings if f["name"] == "answer balance"), None)
    if balance and balance["status"] == "warn" and balance["data"].get("distinct") == balance["data"].get("tasks"):
        vacuous += 1
    return failed, untested, vacuous


def shapes(names: list[str], before_ref: str) -> None:
    print("| env | before: false failed / untested / vacuous | after: false failed / untested / vacuous |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="autoenv-shapes-") as tmp:
        root = Path(tmp)
        source = export(before_ref, root / "before-src")
        for name in names:
            env_dir = PROJECT / "tests" / "data" / name
            row = []
            for label, src, config in (("before", source, source / "config.toml"), ("after", None, PROJECT / "config.toml")):
                cwd = root / f"{label}-{name}"
                cwd.mkdir()
                shutil.copy(config, cwd / "config.toml")
                row.append(" / ".join(map(str, shape_counts(findings_of(cwd, ["--env", str(env_dir)], src)))))
            print(f"| {name} | {row[0]} | {row[1]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git ref of the harness before (default: main)")
    parser.add_argument("--examples", nargs="+", default=["real-glossary", "real-duel"])
    parser.add_argument("--shapes", nargs="+", help="envs under tests/data, run with --env under both harnesses")
    args = parser.parse_args()
    if args.shapes:
        shapes(args.shapes, args.before)
        return
    tables = []
    with tempfile.TemporaryDirectory(prefix="autoenv-real-envs-") as tmp:
        root = Path(tmp)
        source = export(args.before, root / "before-src")
        try:
            for name in args.examples:
                example = PROJECT / "examples" / name
                before_dir = root / f"before-{name}"
                before_dir.mkdir()
                shutil.copy(source / "config.toml", before_dir / "config.toml")
                renamed(example, before_dir / "candidate")
                before = probe(before_dir, [], source)
                after_dir = root / f"after-{name}"
                after_dir.mkdir()
                shutil.copy(PROJECT / "config.toml", after_dir / "config.toml")
                after = probe(after_dir, ["--env", str(example)], None)
                tables.append(table(name, before, after))
                print(tables[-1], "\n", flush=True)
        finally:
            install_candidate(PROJECT / "candidate", force=True)


if __name__ == "__main__":
    main()
