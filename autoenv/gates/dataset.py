"""Dataset measurements made by the harness: size, duplicates, near-duplicates, balance.

The agent is told to make 1000 meaningfully different tasks; this module measures
whether it did. Near-duplicates are found with MinHash over word shingles and
locality-sensitive hashing, then confirmed with the exact Jaccard similarity, so 1000
prompts cost milliseconds rather than half a million pairwise comparisons.
"""

from __future__ import annotations

import hashlib
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


def exact_key(row: dict[str, Any]) -> str:
    """What makes two tasks the same task: the whole prompt (system prompt included), its media parts
    (image digests) and the task's own data fields (answer, info, seed), never the text alone."""
    return "\x1f".join((normalize(row.get("system", "") + "\n" + row["prompt"]), row.get("parts", ""),
                        "" if row.get("fields") else row.get("data", "")))


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


def measure(rows: list[dict[str, Any]], near_threshold: float) -> dict[str, Any]:
    """Numbers about a dataset of rows {key, idx, prompt, system?, parts?, data?, answer?, difficulty?, category?}.

    Exact duplicates compare the whole prompt (system prompt included), its media parts and the
    task's own data fields (`exact_key`); near-duplicates skip prompts templated over different data
    (`templated`), and otherwise
    compare only the task's own prompt, since a shared system prompt would make every
    pair of short prompts look alike. A row marked `fields` has no prompt: its `prompt` is
    its own data fields as JSON (a seeded game's seed and settings), compared exactly only,
    since word shingles of JSON say nothing about how alike two tasks are.
    """
    texts = ["" if r.get("fields") else r["prompt"] for r in rows]
    by_fields = sum(1 for r in rows if r.get("fields"))
    by_text: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_text[exact_key(r)].append(i)
    duplicate_groups = [g for g in by_text.values() if len(g) > 1]
    duplicated = sum(len(g) - 1 for g in duplicate_groups)
    pairs = [p for p in near_duplicate_pairs(texts, near_threshold) if not templated(rows[p[0]], rows[p[1]])]
    in_pairs = {i for p in pairs for i in p[:2]}
    answers = Counter(str(r["answer"]) for r in rows if r.get("answer") is not None)
    top_answer, top_count = answers.most_common(1)[0] if answers else (None, 0)
    keys = Counter(r["key"] for r in rows)
    return {
        "size": len(rows),
        "distinguished_by": "data fields" if by_fields == len(rows) and rows else "prompt" if not by_fields
        else f"prompt ({by_fields} tasks without one: data fields)",
        "duplicate_keys": sum(c - 1 for c in keys.values() if c > 1),
        "duplicate_key_examples": [k for k, c in keys.most_common(5) if c > 1],
        "exact_duplicates": duplicated,
        "exact_duplicate_share": round(duplicated / len(rows), 4) if rows else 0.0,
        "duplicate_examples": [[rows[i]["idx"] for i in g[:3]] for g in sorted(duplicate_groups, key=len, reverse=True)[:3]],
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
