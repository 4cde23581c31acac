"""The desk's hidden state, drawn from each id alone (so the shared tool server and the reward agree on it)."""

from __future__ import annotations

import random

FACE_UP = 8
"""Cards 0..FACE_UP of a deck are face up; card FACE_UP + 1 is face down."""
CODES = 12
"""A vault's code is a whole number from 1 to CODES."""


def vault_code(vault: str) -> int:
    return random.Random(f"vault:{vault}").randint(1, CODES)


def deck(deck_id: str) -> list[int]:
    rng = random.Random(f"deck:{deck_id}")
    start, step = rng.randint(1, 40), rng.randint(2, 9)
    return [start + step * i for i in range(FACE_UP + 2)]


def approval(change: str) -> str:
    return f"AP-{random.Random(f'change:{change}').randint(1000, 9999)}"


def receipt(change: str) -> str:
    return f"R-{random.Random(f'receipt:{change}').randint(10000, 99999)}"

TOWNS = tuple(f"{side}{root}{end}" for side in ("", "Upper ", "Lower ") for root in ("Halver", "Brack", "Ost", "Dun", "Fels", "Car", "Amber", "Tess", "Wold",
                                          "Raven", "Kettle", "Pen")
              for end in ("ton", "mere", "wick", "more", "by", "row", "ly", "holm", "field", "bury"))
"""The archive's 360 towns: entry DOC-N tells the founding year of TOWNS[N % len(TOWNS)] (each town's entries agree)."""


def founded(town: str) -> int:
    return random.Random(f"town:{town}").randint(1100, 1899)


def archive_entry(doc: str) -> str | None:
    """Entry DOC-1000 .. DOC-2999's text, or None."""
    number = int(doc[4:]) if doc.startswith("DOC-") and doc[4:].isdigit() else -1
    if not 1000 <= number <= 2999:
        return None
    town = TOWNS[number % len(TOWNS)]
    return f"{doc}: The founding of {town}. {town} was founded in {founded(town)}."
