"""Difficulty levels in their natural order, never alphabetical (easy, hard, medium).

The order is the one the environment declares when it does, else the usual words ranked
(trivial < easy < medium < hard < expert ...), else the order the levels were first seen.
Every reader that lists levels (show, the report, compare, the feedback, the gates, the GRPO
export) goes through `natural_order`.
"""

from __future__ import annotations

from collections.abc import Iterable

RANKS = {name: rank for rank, names in enumerate([
    ("trivial",), ("very easy", "very-easy", "very_easy"), ("easy", "simple", "beginner"),
    ("medium", "moderate", "intermediate", "normal", "mid"), ("hard", "difficult", "advanced"),
    ("very hard", "very-hard", "very_hard"), ("expert", "extreme", "insane")]) for name in names}


def natural_order(names: Iterable[str], declared: Iterable[str] | None = None) -> list[str]:
    """`names` (duplicates dropped) in the declared order, else by the known words, else as listed."""
    seen = list(dict.fromkeys(names))
    if declared:
        order = {name: i for i, name in enumerate(dict.fromkeys(declared))}
        return sorted(seen, key=lambda n: (order.get(n, len(order)), seen.index(n)))
    if seen and all(n.strip().lower() in RANKS for n in seen):
        return sorted(seen, key=lambda n: (RANKS[n.strip().lower()], seen.index(n)))
    return seen


def order_by(items: dict, declared: Iterable[str] | None = None) -> dict:
    """`items` (level -> value) re-keyed in the natural order of its levels."""
    return {name: items[name] for name in natural_order(items, declared)}
