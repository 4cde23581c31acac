"""The catalog: seeded unit prices and coupons, known to the tool server and the oracle only."""

from __future__ import annotations

import random

SECTIONS = {
    "kitchen": ["ceramic mug", "chef knife", "cutting board", "tea kettle", "dish rack", "whisk",
                "spice jar", "oven mitt", "colander", "measuring cup", "rolling pin", "ladle"],
    "office": ["stapler", "notebook", "gel pen", "desk lamp", "paper tray", "sticky notes",
               "binder clip", "letter opener", "whiteboard marker", "file folder", "mouse pad", "ruler"],
    "garden": ["trowel", "watering can", "seed packet", "plant pot", "pruning shears", "garden gloves",
               "hose nozzle", "bird feeder", "rake", "compost bag", "plant label", "kneeling pad"],
}
COLORS = ["red", "blue", "green", "black", "white", "yellow"]


def _build(seed: int = 1234) -> tuple[dict[str, int], dict[str, str], dict[str, int]]:
    rng = random.Random(seed)
    prices: dict[str, int] = {}
    section_of: dict[str, str] = {}
    for section, items in SECTIONS.items():
        for item in items:
            for color in COLORS:
                name = f"{color} {item}"
                prices[name] = rng.randint(99, 4999)  # cents
                section_of[name] = section
    coupons = {f"SAVE{n}{chr(65 + i)}": n for i, n in enumerate([5, 10, 15, 20, 25, 30])}
    return prices, section_of, coupons


PRICES_CENTS, SECTION_OF, COUPONS = _build()


def price_text(item: str) -> str:
    key = " ".join(item.lower().split())
    if key not in PRICES_CENTS:
        return f"unknown item: {item!r}"
    return f"{key}: ${PRICES_CENTS[key] / 100:.2f} per unit"


def coupon_text(code: str) -> str:
    key = code.strip().upper()
    if key not in COUPONS:
        return f"unknown coupon: {code!r}"
    return f"coupon {key}: {COUPONS[key]}% off the whole order"


def total_cents(lines: list[tuple[str, int]], coupon: str | None) -> int:
    """Order total in cents; a coupon's discount is rounded half up to the cent."""
    subtotal = sum(PRICES_CENTS[item] * qty for item, qty in lines)
    if coupon:
        subtotal -= (subtotal * COUPONS[coupon] + 50) // 100
    return subtotal
