"""The warehouse: seeded SKUs and stock counts, known to the tool server and the reward only."""

from __future__ import annotations

import random
import re

EXAMPLE_SKU = "SKU-4821"
"""The SKU the tools' descriptions show; always stocked."""
LIST_LIMIT = 25
SKU_FORMAT = re.compile(r"^SKU-\d{4}$")


def _build(seed: int = 4821, size: int = 600) -> dict[str, int]:
    rng = random.Random(seed)
    numbers = rng.sample(range(1000, 10000), size)
    skus = sorted({f"SKU-{n}" for n in numbers} | {EXAMPLE_SKU})
    return {sku: rng.randint(1, 99) for sku in skus}


STOCK = _build()
SKUS = sorted(STOCK)


def normalise(sku: str) -> str:
    return sku.strip().upper()


def stock_text(sku: str) -> str:
    key = normalise(sku)
    if key not in STOCK:
        return f"unknown sku: {sku!r}"
    return f"{key}: {STOCK[key]} units"


def list_text(prefix: str) -> str:
    key = normalise(prefix)
    found = [sku for sku in SKUS if sku.startswith(key)]
    if not found:
        return f"no skus start with {prefix!r}"
    shown = ", ".join(found[:LIST_LIMIT])
    more = len(found) - LIST_LIMIT
    return shown + (f" (and {more} more: use a longer prefix)" if more > 0 else "")


def total_units(skus: list[str]) -> int:
    return sum(STOCK[sku] for sku in skus)
