"""Every `keep` and `baseline` in the ledger decided again from what the entry itself stores.

The hash chain and the git notes prove who appended a line, not that the decision in it
is the rules': a candidate whose install dropped a `.pth` into the harness's venv once
wrapped the decision in-process, and the harness itself appended `keep | gates failed: 17`
with a valid chain and note. So `autoenv verify` (and preflight) also re-runs the verdict
(autoenv.evaluation.verdict.decide) on each entry's stored statistics, gate findings and
tampered list, against the entry its verdict names as compared to, under the config of the
entry's run base (the rules it was judged by). A `keep` or `baseline` the rules would not
give is named as forged. Only those two are checked: they are what a forger wants, and the
verdicts that rest on facts the entry does not store (a provider that was down, a model the
scripted endpoint could not play) are never one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autoenv.core.config import CONFIG_NAME, Config, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.record import Entry
from autoenv.evaluation.report import check_fix
from autoenv.evaluation.verdict import decide
from autoenv.judge.causes import causes
from autoenv.run.gitrepo import Repo

CHECKED = ("keep", "baseline")
FORGED = "a verdict the rules would not give, forged"


Show = Callable[[str], str]  # the config.toml of a commit


def config_at(repo: Repo, config: Config) -> Show:
    """`show` for `forged`: the text of `config`'s file at a commit of `repo`."""
    source = config.root / CONFIG_NAME
    relative = source.relative_to(repo.root) if source.is_relative_to(repo.root) else Path(CONFIG_NAME)
    return lambda commit: repo.run_git("show", f"{commit}:{relative.as_posix()}")


def rules_config(entry: Entry, config: Config, show: Show | None) -> Config:
    """The config the entry was judged by: its run base's config.toml where git still has it, else `config`."""
    if not entry.run_base or show is None:
        return config
    try:
        return load_config(config.root / CONFIG_NAME, text=show(entry.run_base) + "\n")
    except (AutoEnvError, OSError, ValueError):
        return config


def redecided(entry: Entry, earlier: list[Entry], config: Config) -> str | None:
    """The verdict the rules give `entry` from what it stores (None when it cannot be decided again)."""
    if entry.verdict.verdict not in CHECKED or entry.cached_from:
        return None
    kept = None
    if entry.verdict.compared_to:
        named = [e for e in earlier if e.commit == entry.verdict.compared_to and e.verdict.verdict in CHECKED]
        if not named:
            return "keep-without-reference" if entry.verdict.verdict == "keep" else None
        kept = named[-1]
    elif entry.verdict.verdict == "keep":
        return "keep-without-reference"
    gates = entry.gates
    decision = decide(
        entry.stats or {}, config.bands, kept, eval_success=entry.eval_success, error=entry.error,
        gates_failed=[c.issue for c in causes(gates, check_fix)] if gates else None,
        run=entry.branch, confidence=config.verdict.confidence, seed=config.seed, tampered=entry.tampered or None,
        min_tasks=config.stats.min_tasks, gates_untested=gates.untested if gates else None)
    return decision.verdict


def redecide_all(entries: list[Entry], config: Config, show: Show | None = None) -> dict[int, str]:
    """{index: the verdict the rules give} for each `keep`/`baseline` entry whose stored numbers give another."""
    found: dict[int, str] = {}
    configs: dict[str | None, Config] = {}
    for i, entry in enumerate(entries):
        if entry.run_base not in configs:
            configs[entry.run_base] = rules_config(entry, config, show)
        earlier = [e for j, e in enumerate(entries[:i]) if j not in found]  # a forged keep is no reference
        again = redecided(entry, earlier, configs[entry.run_base])
        if again is not None and again != entry.verdict.verdict:
            found[i] = again
    return found


def genuine(entries: list[Entry], config: Config, show: Show | None = None) -> list[Entry]:
    """`entries` less the forged ones (what a verdict may be compared with)."""
    found = redecide_all(entries, config, show)
    return [e for i, e in enumerate(entries) if i not in found]


def forged(entries: list[Entry], config: Config, show: Show | None = None) -> list[str]:
    """One problem line per `keep`/`baseline` entry whose stored numbers do not give that verdict."""
    problems = []
    for i, again in redecide_all(entries, config, show).items():
        entry = entries[i]
        failed = sum(f.status == "fail" for f in entry.gates.findings) if entry.gates else 0
        if again == "keep-without-reference":
            said = f"it names no earlier kept or baseline entry it beat (compared_to {entry.verdict.compared_to})"
        else:
            said = f"its own stored statistics and gates give `{again}`"
        problems.append(
            f"entry {i + 1} (commit {entry.commit[:12]}) says `{entry.verdict.verdict}` but {said}"
            f"{f' ({failed} gate(s) failed)' if failed else ''}: {FORGED} "
            "(look for a foreign .pth or module in the harness's venv: autoenv verify lists them)")
    return problems
