"""The gates on existing environments, before and after the harness learnt to take them as they are.

Usage: .venv/bin/python bench/real_envs.py [--before main] [--examples real-glossary real-duel]

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

from autoenv.install import install_candidate  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git ref of the harness before (default: main)")
    parser.add_argument("--examples", nargs="+", default=["real-glossary", "real-duel"])
    args = parser.parse_args()
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
