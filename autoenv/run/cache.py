"""The eval cache: an unchanged candidate is not evaluated (and paid for) twice.

An agent that reverts a change, or commits something outside candidate/, used to cost a
full evaluation for numbers the ledger already held. The key covers everything the
numbers depend on: the git tree hash of candidate/ at the commit, spec.md, the effective
config (every key, models included) and whether scripted policies stood in. A finished
evaluation of the same run with the same key (kept, discarded or inconclusive; never a
crash or a tampered one) is recorded for the new commit as a pointer: verdict `cached`,
`cached_from` naming the source, no statistics of its own and no model call; `--force`
evaluates anyway. A pointer is never kept nor a baseline (the source is), and every
reader follows it to the source's statistics, traces and plot with `resolve`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from autoenv.core.config import Config
from autoenv.core.record import Entry
from autoenv.run.gitrepo import Head, Repo
from autoenv.run.runbase import same_run

REUSABLE = ("baseline", "keep", "discard", "inconclusive")


def cache_key(repo: Repo, head: Head, config: Config, offline: bool) -> str | None:
    """The evaluation's key, or None when the candidate is not inside the repository (nothing to hash)."""
    candidate = config.path("candidate").resolve()
    if not config.candidate.install or not candidate.is_relative_to(repo.root):
        return None
    tree = repo.blob(head.commit, candidate.relative_to(repo.root).as_posix())
    if tree is None:
        return None
    spec = config.root / "spec.md"
    settings = {k: v for k, v in dataclasses.asdict(config).items() if k != "root"}
    models = {"target": config.offline.target, "strong": config.offline.strong} if offline else \
        {role: m.model for role, m in config.models().items()}
    material = {"candidate_tree": tree, "spec": hashlib.sha256(spec.read_bytes()).hexdigest() if spec.is_file() else None,
                "config": settings, "models": models, "offline": offline}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def cached(entries: list[Entry], key: str | None, *, branch: str | None, run_base: str | None) -> Entry | None:
    """The newest finished evaluation of the same run with `key`, or None."""
    if key is None:
        return None
    for entry in reversed(entries):
        if entry.cache_key == key and entry.environment is None and same_run(entry, branch, run_base):
            source = resolve(entries, entry)
            if source.verdict.verdict in REUSABLE and source.cached_from is None:
                return source
    return None


def resolve(entries: list[Entry], entry: Entry) -> Entry:
    """The evaluation `entry` stands for: itself, or for a cache hit the source it points at (the
    newest evaluation of `cached_from` recorded before it with the same cache key); a pointer whose
    source is not in `entries` stands for itself."""
    if not entry.cached_from:
        return entry
    before = entries[: next((i for i, e in enumerate(entries) if e is entry), len(entries))]
    for candidate in reversed(before):
        if candidate.commit == entry.cached_from and not candidate.cached_from \
                and (entry.cache_key is None or candidate.cache_key in (None, entry.cache_key)):
            return candidate
    return entry

