"""The gates on existing environments, before and after the harness learnt to take them as they are.

Usage: .venv/bin/python bench/real_envs.py [--before main] [--examples real-glossary real-duel]
       .venv/bin/python bench/real_envs.py --shapes stop-guard kuhn-seats [--before REF]
       .venv/bin/python bench/real_envs.py --envs PATH/verifiers/environments [--before REF | --no-before]

`--envs` runs every environment of the folders given (verifiers' own environments/, fetched from
PrimeIntellect-ai/verifiers; public v1 envs) through `autoenv probe --env` as it is, and prints per env
false failed gates, vacuous passes, untested probes and true findings, before and after. Which failed gates
are true findings (a real flaw of that env's reward, read in its source) is in bench/real_envs_labels.toml;
every other failed gate is counted false. An env that needs the Hub or a remote server says so.

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
import random
import re
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
    applicable = [f for f in probes if "does not apply" not in f["message"]]
    vacuous = 0
    if not failed and applicable and n_tested < len(applicable) / 2 \
            and (tested or {}).get("data", {}).get("coverage") != "untested":
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


LABELS = Path(__file__).with_name("real_envs_labels.toml")
"""Per env: the gates that name a real flaw of it (`true`), and why it cannot run here (`cannot`), when known."""
ENV_TIMEOUT = 900


def env_dirs(folders: list[str]) -> list[Path]:
    """Each environment under the folders given (a folder with a pyproject.toml, or holding such folders)."""
    out: list[Path] = []
    for folder in map(Path, folders):
        if (folder / "pyproject.toml").is_file():
            out.append(folder)
        else:
            out.extend(sorted(p.parent for p in folder.glob("*/pyproject.toml")))
    return out


HUB_IMPORT = re.compile(r"^(\s*)from datasets import load_dataset\s*$", re.M)


def local_rows(dataset: str) -> list[dict] | None:
    """Rows written here, in the schema of a Hub dataset a public env loads (never the dataset itself): what its
    loader reads when the Hub cannot be reached. None for a dataset with no local stand-in."""
    rng = random.Random(dataset)
    if dataset == "openai/gsm8k":  # one question per shape, as gsm8k's are: no two read alike
        shapes = [
            ("A baker makes {a} loaves each morning for {b} days. How many loaves is that?", lambda a, b: a * b),
            ("Mia has {a} stickers and gives away {b}. How many does she keep?", lambda a, b: a - b),
            ("A train car seats {a} people. How many people fit in {b} cars?", lambda a, b: a * b),
            ("Tom read {a} pages on Monday and {b} on Tuesday. How many pages in all?", lambda a, b: a + b),
            ("A hen house holds {b} hens that each lay {a} eggs a year. How many eggs a year?",
             lambda a, b: a * b),
            ("A rope {a} metres long loses {b} metres to a knot. How long is it now?", lambda a, b: a - b),
            ("Each of {b} classrooms needs {a} chairs. How many chairs are needed?", lambda a, b: a * b),
            ("Lena saves {a} dollars a week for {b} weeks, then spends 5. What is left?", lambda a, b: a * b - 5),
            ("A pond has {a} ducks; {b} more land and 2 fly off. How many ducks now?", lambda a, b: a + b - 2),
            ("Sam runs {a} laps of a {b}-metre track. How many metres does he run?", lambda a, b: a * b),
            ("A library lends {a} books and gets {b} back. By how many did its shelves shrink?",
             lambda a, b: a - b),
            ("Paint covers {b} square metres per can. How many square metres do {a} cans cover?", lambda a, b: a * b),
            ("A bus carries {a} riders, drops {b} at a stop and picks up 7. How many ride on?",
             lambda a, b: a - b + 7),
            ("Grandma bakes {a} cookies and her {b} grandchildren each eat 2. How many remain?",
             lambda a, b: a - 2 * b),
            ("A garden has {a} rows of {b} tulips and 3 roses. How many flowers grow there?", lambda a, b: a * b + 3),
        ]
        rows = []
        for text, answer in shapes:
            a, b = rng.randint(20, 60), rng.randint(2, 9)
            rows.append({"question": text.format(a=a, b=b), "answer": f"The total is {answer(a, b)}.\n#### {answer(a, b)}"})
        return rows
    if dataset == "PrimeIntellect/Reverse-Text-RL":
        words = ("the a of in on under over near river stone lamp quiet orbit maple copper signal harbor velvet "
                 "garden winter falcon bright slow quick yellow narrow ancient hidden tall small soft loud cold "
                 "warm morning evening market bridge window letter candle forest meadow island engine ladder "
                 "pocket ribbon saddle thunder valley whisper anchor basket cabin desert feather glacier hammer "
                 "jacket kettle lantern marble needle ocean pepper quartz rabbit shadow tunnel violin walnut "
                 "carries finds holds opens paints reads sings watches builds follows gathers").split()
        sentences = {" ".join(rng.choice(words) for _ in range(rng.randint(5, 14))).capitalize() + "."
                     for _ in range(200)}
        return [{"prompt": s} for s in sorted(sentences)]
    if dataset == "kalomaze/alphabetic-arxiv-authors-it1":
        syllables = "ka lo mi ren su ta vel bo ni dar el fi gus ha jo ri an mar te os".split()
        def word() -> str:
            return "".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))).capitalize()
        # as many rows as the first pass of a real split offers the probes (1,200 lists of authors)
        return [{"names": [f"{word()} {word()}" for _ in range(rng.randint(8, 16))]} for _ in range(1200)]
    return None


def local_data_copy(env_dir: Path, into: Path) -> tuple[Path, str] | None:
    """A copy of an env whose loader reads a Hub dataset, its `from datasets import load_dataset` pointed at rows
    written here (local_rows); None when it loads nothing from the Hub or the dataset has no local stand-in."""
    sources = [p for p in env_dir.rglob("*.py") if HUB_IMPORT.search(p.read_text(errors="replace"))]
    if not sources:
        return None
    names = {m for p in sources for m in re.findall(r"[\"']([\w.-]+/[\w.-]+)[\"']", p.read_text())}
    names |= {m for p in env_dir.rglob("*.py") for m in re.findall(r"=\s*[\"']([\w.-]+/[\w.-]+)[\"']", p.read_text())}
    datasets = {n: rows for n in names if (rows := local_rows(n)) is not None}
    if not datasets:
        return None
    shutil.copytree(env_dir, into, ignore=shutil.ignore_patterns("__pycache__"))
    for source in sources:
        copy = into / source.relative_to(env_dir)
        package = ".".join(copy.parent.relative_to(into).parts)
        (copy.parent / "_local_rows.py").write_text(
            '"""Rows written by AutoEnv\'s bench/real_envs.py in the schema of the Hub datasets this env loads."""\n'
            f"ROWS = {datasets!r}\n\n\ndef load_dataset(name, *args, **kwargs):\n    return ROWS[name]\n")
        copy.write_text(HUB_IMPORT.sub(lambda m: f"{m.group(1)}from {package}._local_rows import load_dataset",
                                       copy.read_text()))
    return into, ", ".join(sorted(datasets))


def env_row(env_dir: Path, cwd: Path, source: Path | None, config: Path, labels: dict) -> str:
    """One harness on one env: `false failed / vacuous / untested / true` (or why nothing ran)."""
    cwd.mkdir()
    shutil.copy(config, cwd / "config.toml")
    env = {**os.environ, "NO_COLOR": "1", **({"PYTHONPATH": str(source)} if source is not None else {})}
    try:
        result = subprocess.run([sys.executable, "-m", "autoenv.cli", "probe", "--env", str(env_dir)], cwd=cwd, env=env,
                                capture_output=True, text=True, timeout=ENV_TIMEOUT)
        tail = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["no output"]
    except subprocess.TimeoutExpired:
        return f"did not finish in {ENV_TIMEOUT} s"
    found = sorted((cwd / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return "no gates: " + tail[0][:120].replace("|", "/")
    findings = json.loads(found[-1].read_text())["findings"]
    true = set(labels.get("true") or [])
    failed = [f["name"] for f in findings if f["status"] == "fail"]
    _, untested, vacuous = shape_counts(findings)
    false = [name for name in failed if name not in true]
    caught = [name for name in failed if name in true]
    return (f"{len(false)} / {vacuous} / {untested} / {len(caught)}"
            + (f" (false: {', '.join(false)})" if false else "") + (f" (true: {', '.join(caught)})" if caught else ""))


def real_envs(folders: list[str], before_ref: str | None) -> None:
    labels = tomllib.loads(LABELS.read_text()) if LABELS.is_file() else {}
    cols = ["env", *(["before"] if before_ref else []), "after"]
    print("Each cell: false failed gates / vacuous passes / untested probes / true findings.\n")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    with tempfile.TemporaryDirectory(prefix="autoenv-real-envs-") as tmp:
        root = Path(tmp)
        source = export(before_ref, root / "before-src") if before_ref else None
        runs: list[tuple[str, Path]] = []
        for env_dir in env_dirs(folders):
            runs.append((env_dir.name, env_dir))
            local = local_data_copy(env_dir, root / "local" / env_dir.name)
            if local is not None:  # the Hub is out of reach here: the same code on rows written here
                runs.append((f"{env_dir.name} (local data: {local[1]})", local[0]))
        for name, env_dir in runs:
            key = name.split(" ")[0] + (" local" if "(local data" in name else "")
            mine = labels.get(key, {})
            slug = key.replace(" ", "-")
            cells = []
            if source is not None:
                cells.append(env_row(env_dir, root / f"before-{slug}", source, source / "config.toml", mine))
            cells.append(env_row(env_dir, root / f"after-{slug}", None, PROJECT / "config.toml", mine))
            note = f" ({mine['cannot']})" if mine.get("cannot") else ""
            print(f"| {name}{note} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git ref of the harness before (default: main)")
    parser.add_argument("--examples", nargs="+", default=["real-glossary", "real-duel"])
    parser.add_argument("--shapes", nargs="+", help="envs under tests/data, run with --env under both harnesses")
    parser.add_argument("--envs", nargs="+", help="env folders (e.g. verifiers' environments/, fetched), each env run "
                        "with `autoenv probe --env` under both harnesses, judged against real_envs_labels.toml")
    parser.add_argument("--no-before", action="store_true", help="with --envs: this tree's harness only")
    args = parser.parse_args()
    if args.envs:
        real_envs(args.envs, None if args.no_before else args.before)
        return
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
