"""Dataset measurements made by the harness: size, duplicates, conflicting labels, near-duplicates, balance.

The agent is told to make 1000 meaningfully different tasks; this module measures
whether it did. Two tasks are the same task when the model is given the same thing
(`exact_key`): where the model sees a task only through its prompt (no custom Env, no
tool that receives the task), that is the prompt text, the system prompt and the media
parts; where the task's data fields reach the model later (a custom Env's `run`, a
toolset's `setup_task`), those fields count too. Id-like fields (`id_fields`: a per-row
counter or uuid a real loader carries) never make a task unique. The same prompt with
different answers is a conflicting label (`conflicts`). Near-duplicates are found with
MinHash over word shingles and locality-sensitive hashing, then confirmed with the exact
Jaccard similarity, so 1000 prompts cost milliseconds rather than half a million pairwise
comparisons.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from autoenv.core.levels import order_by

SHINGLE = 3
PERMUTATIONS = 128
BANDS = 32  # 4 rows a band: pairs at Jaccard 0.9 collide with probability ~1
_PRIME = (1 << 31) - 1  # products of two values below it fit in uint64


def normalize(text: str) -> str:
    return " ".join(text.lower().split())


def shingles(text: str, k: int = SHINGLE) -> set[str]:
    words = re.findall(r"\w+|[^\w\s]", normalize(text))
    if len(words) < k:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + k]) for i in range(len(words) - k + 1)}


def _hash(shingle: str) -> int:
    return int.from_bytes(hashlib.blake2b(shingle.encode(), digest_size=8).digest(), "big") % _PRIME


def minhash(sets: list[set[str]], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, _PRIME, size=PERMUTATIONS, dtype=np.uint64)
    b = rng.integers(0, _PRIME, size=PERMUTATIONS, dtype=np.uint64)
    signatures = np.zeros((len(sets), PERMUTATIONS), dtype=np.uint64)
    for row, items in enumerate(sets):
        if not items:
            continue
        hashes = np.array([_hash(s) for s in items], dtype=np.uint64)
        signatures[row] = ((np.outer(hashes, a) + b) % _PRIME).min(axis=0)
    return signatures


def near_duplicate_pairs(texts: list[str], threshold: float) -> list[tuple[int, int, float]]:
    """Index pairs whose word-shingle Jaccard similarity is >= threshold (exact duplicates excluded)."""
    sets = [shingles(t) for t in texts]
    signatures = minhash(sets)
    rows = PERMUTATIONS // BANDS
    candidates: set[tuple[int, int]] = set()
    for band in range(BANDS):
        buckets: dict[bytes, list[int]] = defaultdict(list)
        for i, sig in enumerate(signatures):
            if sets[i]:
                buckets[sig[band * rows : (band + 1) * rows].tobytes()].append(i)
        for members in buckets.values():
            if 1 < len(members) <= 200:
                candidates.update((x, y) for j, x in enumerate(members) for y in members[j + 1 :])
            elif len(members) > 200:
                # mass templating: compare everyone with one representative instead of all pairs
                candidates.update((members[0], y) for y in members[1:])
    pairs = []
    for i, j in sorted(candidates):
        if normalize(texts[i]) == normalize(texts[j]):
            continue
        similarity = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
        if similarity >= threshold:
            pairs.append((i, j, round(similarity, 3)))
    return pairs


ID_WORDS = frozenset({"id", "ids", "idx", "index", "row", "rowid", "uid", "uuid", "guid"})
"""The last word of a field name that says it is a per-row identifier (`example_id`, `row`, `sampleIdx`)."""
HASHLIKE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}", re.IGNORECASE)


def flatten(data: str) -> dict[str, str]:
    """A row's own data fields (JSON) as `path -> JSON value`, nested objects by dotted path (`info.example_id`)."""
    try:
        value = json.loads(data) if data else {}
    except ValueError:
        return {"": data}
    out: dict[str, str] = {}

    def walk(prefix: str, item: Any) -> None:
        if isinstance(item, dict) and item:
            for name, inner in item.items():
                walk(f"{prefix}.{name}" if prefix else str(name), inner)
        else:
            out[prefix] = json.dumps(item, sort_keys=True, ensure_ascii=False)
    walk("", value)
    return out


def id_named(path: str) -> bool:
    name = path.rsplit(".", 1)[-1]
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().replace("-", "_").split("_")
    return words[-1] in ID_WORDS


def id_fields(rows: list[dict[str, Any]]) -> list[str]:
    """The data fields that identify a row rather than describe a task: values all distinct across the
    dataset, and either named like an id (`id`, `idx`, `row`, `example_id`, `sampleIdx`) or every value a
    uuid or hex digest the prompt does not show. A distinct integer not named like an id is kept: it may be
    the task itself (a game's `seed`, which verifiers' textarena tasks carry in `info`); so is `answer`."""
    fields = [flatten(own_data(r)) for r in rows]
    values: dict[str, list[str]] = defaultdict(list)
    for f in fields:
        for path, value in f.items():
            values[path].append(value)
    found = []
    for path, seen in sorted(values.items()):
        if path in ("", "answer") or len(seen) < 2 or len(set(seen)) < len(seen):
            continue
        texts = [json.loads(v) for v in seen]
        hashlike = all(isinstance(t, str) and HASHLIKE.fullmatch(t) for t in texts) and not any(
            str(t).lower() in (r.get("prompt", "") + r.get("system", "")).lower() for t, r in zip(texts, rows))
        if id_named(path) or hashlike:
            found.append(path)
    return found


def own_data(row: dict[str, Any]) -> str:
    """The row's own data fields as JSON; a prompt-less row's `prompt` is them when it carries no `data`."""
    return str(row.get("data", row["prompt"] if row.get("fields") else ""))


def kept_data(row: dict[str, Any], ids: list[str]) -> str:
    """The row's own data fields without its id-like ones, as canonical JSON."""
    return json.dumps({k: v for k, v in flatten(own_data(row)).items() if k not in ids}, sort_keys=True,
                      ensure_ascii=False)


def exact_key(row: dict[str, Any], with_data: bool) -> str:
    """What makes two tasks the same task: what the model is given. The whole prompt (system prompt included)
    and its media parts (image digests); the task's own data fields (`row["data"]`, id-like ones already
    left out) too where they reach the model beyond the prompt (`with_data`) or the task has no prompt."""
    fields = bool(row.get("fields"))
    return "\x1f".join((normalize(row.get("system", "") + "\n" + ("" if fields else row["prompt"])),
                        row.get("parts", ""), row.get("data", "") if with_data or fields else ""))


def conflicts(rows: list[dict[str, Any]], groups: list[list[int]]) -> list[list[tuple[Any, str]]]:
    """Groups of tasks the model is given identically whose answers differ: `[(idx, answer), ...]` per group,
    one task per distinct answer (answers compared as `normalize` sees them)."""
    found = []
    for group in groups:
        answers: dict[str, tuple[Any, str]] = {}
        for i in group:
            answer = rows[i].get("answer")
            if answer is not None and not rows[i].get("fields"):
                answers.setdefault(normalize(str(answer)), (rows[i]["idx"], str(answer)))
        if len(answers) > 1:
            found.append(list(answers.values()))
    return found


def templated(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two prompts filled from one template with the tasks' own, different data (a seed, a deal number): the
    words that differ between them all come from their data fields or media, so they are not near-duplicates."""
    if a.get("data", "") == b.get("data", "") and a.get("parts", "") == b.get("parts", ""):
        return False
    words_a = set(re.findall(r"\w+", normalize(a["prompt"])))
    words_b = set(re.findall(r"\w+", normalize(b["prompt"])))
    fields = set(re.findall(r"\w+", normalize(a.get("data", "") + " " + b.get("data", ""))))
    differ = words_a ^ words_b
    return not differ and a.get("parts", "") != b.get("parts", "") or bool(differ) and differ <= fields


def measure(rows: list[dict[str, Any]], near_threshold: float, reach: str | None = None) -> dict[str, Any]:
    """Numbers about a dataset of rows {key, idx, prompt, system?, parts?, data?, answer?, difficulty?, category?}.

    `reach` says how the task's own data fields reach the model beyond its prompt (a custom Env,
    a toolset given the task), None when the model sees a task only through its prompt. Exact
    duplicates compare what the model is given (`exact_key`), id-like fields left out
    (`id_fields`); with no `reach`, tasks given the same prompt with different answers are
    conflicting labels. Near-duplicates skip prompts templated over different data
    (`templated`, id-like fields again left out), and otherwise compare only the task's own
    prompt, since a shared system prompt would make every pair of short prompts look alike. A
    row marked `fields` has no prompt: it is compared on its own data fields exactly only,
    since word shingles of JSON say nothing about how alike two tasks are.
    """
    ids = id_fields(rows)
    rows = [{**r, "data": kept_data(r, ids)} for r in rows]
    texts = ["" if r.get("fields") else r["prompt"] for r in rows]
    by_fields = sum(1 for r in rows if r.get("fields"))
    by_text: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_text[exact_key(r, reach is not None)].append(i)
    duplicate_groups = [g for g in by_text.values() if len(g) > 1]
    duplicated = sum(len(g) - 1 for g in duplicate_groups)
    conflicting = [] if reach is not None else sorted(conflicts(rows, duplicate_groups), key=len, reverse=True)
    pairs = [p for p in near_duplicate_pairs(texts, near_threshold) if not templated(rows[p[0]], rows[p[1]])]
    in_pairs = {i for p in pairs for i in p[:2]}
    answers = Counter(str(r["answer"]) for r in rows if r.get("answer") is not None)
    top_answer, top_count = answers.most_common(1)[0] if answers else (None, 0)
    keys = Counter(r["key"] for r in rows)
    return {
        "size": len(rows),
        "distinguished_by": "data fields" if by_fields == len(rows) and rows else "prompt and data fields"
        if reach is not None else "prompt" if not by_fields else f"prompt ({by_fields} tasks without one: data fields)",
        "data_reach": reach,
        "id_fields": ids,
        "duplicate_keys": sum(c - 1 for c in keys.values() if c > 1),
        "duplicate_key_examples": [k for k, c in keys.most_common(5) if c > 1],
        "exact_duplicates": duplicated,
        "exact_duplicate_share": round(duplicated / len(rows), 4) if rows else 0.0,
        "duplicate_examples": [[rows[i]["idx"] for i in g[:3]] for g in sorted(duplicate_groups, key=len, reverse=True)[:3]],
        "conflicting_labels": len(conflicting),
        "conflict_examples": [[item for pair in group[:2] for item in pair] for group in conflicting[:3]],
        "near_duplicate_pairs": len(pairs),
        "near_duplicate_share": round(len(in_pairs) / len(rows), 4) if rows else 0.0,
        "near_duplicate_examples": [[rows[i]["idx"], rows[j]["idx"], s] for i, j, s in pairs[:3]],
        "with_answer": sum(answers.values()),
        "distinct_answers": len(answers),
        "top_answer": top_answer,
        "top_answer_share": round(top_count / sum(answers.values()), 4) if answers else None,
        "difficulty": order_by(Counter(str(r["difficulty"]) for r in rows if r.get("difficulty") is not None)),
        "category": dict(sorted(Counter(str(r["category"]) for r in rows if r.get("category") is not None).items())),
    }
