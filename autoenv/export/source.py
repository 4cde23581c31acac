"""What an export reads about a kept commit: the candidate's files at that commit and its ledger entry.

Everything comes from the record, never from a fresh run: the reward components and their
weights from the stored traces, the held-out evaluation tasks from tasks.json, the probes it
passed and the per-level means from the entry.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core.config import CONFIG_NAME, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.record import Entry
from autoenv.run.cache import resolve
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import last_kept, read_entries


@dataclass
class Component:
    name: str
    weight: float
    measures: str
    mean_target: float | None = None


@dataclass
class Kept:
    """A kept evaluation and what it recorded."""

    root: Path
    entry: Entry
    candidate: Path
    """The candidate's files at the kept commit (extracted into `candidate` of the export's work folder)."""
    components: list[Component]
    held_out: list[dict] = field(default_factory=list)
    """The tasks the harness sampled for its evaluations: kept out of any training split."""

    @property
    def commit(self) -> str:
        return self.entry.commit

    @property
    def passed_probes(self) -> list[str]:
        gates = self.entry.gates
        if gates is None:
            return []
        # a probe passed where its finding says so: not one that failed or warned, nor one not played (n/a, untested)
        passed = {f.name.removeprefix("probe ") for f in gates.findings if f.name.startswith("probe ")
                  and f.status == "pass"}
        return [name for name in gates.probes if name != "oracle" and name in passed]


def kept_entry(root: Path, commit: str | None = None, flagged_ok: bool = False) -> tuple[Entry, Path]:
    """The last kept entry of the run at `root` (or the kept entry of `commit`), and its outputs folder. With
    `flagged_ok` and a `commit`, a commit discarded for its failed gates is taken too (training on a known hack
    is then the experiment: `autoenv train --commit C --allow-flagged`); its `flags` name the hack."""
    cfg = load_config(root / CONFIG_NAME)
    log = cfg.path("log_file")
    entries = read_entries(log) if log.is_file() else []
    if commit:
        full = Repo(root).commit_info(commit).commit
        resolved = [resolve(entries, e) for e in entries if e.commit == full]
        matches = [e for e in resolved if e.kept or flagged_ok and _discarded_for_gates(e)]
        entry = matches[-1] if matches else None
    else:
        entry = newest_kept(entries, Repo(root).head().branch)
    if entry is None:
        flagged = "" if flagged_ok or not commit else (
            "; a commit discarded for its failed gates is trained only on purpose: --commit C --allow-flagged")
        raise AutoEnvError(f"no kept evaluation{' of ' + commit if commit else ''} in {log.name}",
                           where=str(log), fix="evaluate the candidate first (bash evaluate.sh); only a kept "
                           "(or baseline) commit is exported, so the package carries numbers that were measured"
                           + flagged)
    return entry, cfg.path("outputs") / entry.commit


def _discarded_for_gates(entry: Entry) -> bool:
    """Discarded because a gate failed (its evaluation otherwise ran: scored, not tampered, not another env's)."""
    return (entry.verdict.verdict == "discard" and entry.cached_from is None and entry.environment is None
            and entry.gates is not None and any(f.status == "fail" for f in entry.gates.findings)
            and not entry.tampered and bool(entry.outputs))


def newest_kept(entries: list[Entry], branch: str | None) -> Entry | None:
    """The commit `export` and `train` take by default: the newest kept (or baseline) evaluation of the
    run checked out (`branch`), under any rules: one clone can hold several runs' ledger lines, and a kept
    commit after a changed dataset (an unpaired comparison) counts like any other. On a detached HEAD or
    a branch with no kept evaluation, the newest kept candidate of any run. (`Entry.kept` never admits an
    `eval --env` evaluation or a cache pointer.)"""
    own = last_kept(entries, lambda e: e.branch == branch) if branch else None
    return own or last_kept(entries)


def extract_candidate(root: Path, commit: str, dest: Path, folder: str = "candidate") -> Path:
    """`folder` of the repository as it was at `commit`, written under `dest`."""
    proc = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit, folder],
                          capture_output=True, check=False)
    if proc.returncode != 0:
        raise AutoEnvError(f"git could not read {folder}/ at {commit[:12]}: {proc.stderr.decode().strip()}",
                           where=str(root), fix="run the export inside the run's repository")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest / folder


def reward_weights(outputs: Path) -> dict[str, float]:
    """{component: weight} from the first scored trace the evaluation stored (the oracle probe first)."""
    for path in [outputs / "gates" / "oracle" / "traces.jsonl", *sorted(outputs.glob("*/traces.jsonl"))]:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            for trace in json.loads(line).get("traces") or []:
                rewards = trace.get("rewards") or {}
                if rewards and all(isinstance(v, dict) for v in rewards.values()):
                    return {name: float(v.get("weight", 1.0)) for name, v in rewards.items()}
    return {}


def docstrings(folder: Path) -> dict[str, str]:
    """First docstring line of every function and class under `folder`, by name and by snake_case name."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node)
                if doc:
                    first = doc.strip().splitlines()[0]
                    found.setdefault(node.name, first)
                    found.setdefault(re.sub(r"(?<!^)(?=[A-Z])", "_", node.name).lower(), first)
    return found


def load_kept(root: Path, work: Path, commit: str | None = None, flagged_ok: bool = False) -> Kept:
    entry, outputs = kept_entry(root, commit, flagged_ok)
    candidate = extract_candidate(root, entry.commit, work)
    weights = reward_weights(outputs)
    if not weights:
        raise AutoEnvError(f"no scored trace under {outputs} names the reward components",
                           where=str(outputs), fix="re-evaluate the commit so its traces are stored" + (
                               "" if entry.kept else "; a commit whose gates failed has model traces only when "
                               "evaluated with continue_on_failure = true in config.toml"))
    docs = docstrings(candidate)
    target = entry.stats.get("target")
    components = [Component(name, weight, docs.get(name, "(no docstring)"),
                            target.components.get(name) if target else None) for name, weight in weights.items()]
    held_out = json.loads((outputs / "tasks.json").read_text()) if (outputs / "tasks.json").is_file() else []
    return Kept(root=root, entry=entry, candidate=candidate, components=components, held_out=held_out)


def reward_table(kept: Kept) -> str:
    """The README's reward table: component, weight, what it measures, the exploit probes it passed."""
    probes = ", ".join(kept.passed_probes) or "none recorded"
    rows = ["| component | weight | measures | target mean | exploit probes passed |", "|---|---|---|---|---|"]
    for c in kept.components:
        mean = "–" if c.mean_target is None else f"{c.mean_target:.3f}"
        rows.append(f"| `{c.name}` | {c.weight:g} | {c.measures} | {mean} | {probes} |")
    return "\n".join(rows)


def flags(entry: Entry) -> list[str]:
    """What is known to be harvestable in a kept evaluation: the judge's suspected reward hacks, a failed gate, and a
    component the `ceiling` finding saw a content-free probe earn where the reference never does. Training on such a
    commit teaches the hack: `autoenv train` refuses it unless told it is the experiment (`--allow-flagged`)."""
    found: list[str] = []
    judge = entry.judge
    if judge is not None:
        found += [f"the judge suspects a reward hack: {hack.description}"
                  for hack in judge.findings.reward_faithfulness.suspected_hacks]
    if entry.gates is not None:
        found += [f"failed gate {f.name}: {f.message}" for f in entry.gates.findings if f.status == "fail"]
        for f in entry.gates.findings:
            for component, probe in ((f.data or {}).get("beaten") or {}).items() if f.name == "ceiling" else ():
                found.append(f"ceiling: `{component}` is earned by the content-free probe {probe}, never by the "
                             "reference")
    return found
