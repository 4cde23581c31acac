"""The oracle's strategy, on the verifiers side: guess the first code consistent with all feedback.

Pure Python with no OpenEnv import: the candidate never imports the server's modules.
"""

from __future__ import annotations

from functools import cache
from itertools import permutations


def bulls_cows(secret: str, guess: str) -> tuple[int, int]:
    bulls = sum(a == b for a, b in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


@cache
def codes(length: int, alphabet: str) -> tuple[str, ...]:
    return tuple("".join(p) for p in permutations(alphabet, length))


def next_guess(length: int, alphabet: str, history: list[dict]) -> str:
    """The first code, in a fixed order, that agrees with every valid guess's feedback."""
    known = [(h["guess"], (h["bulls"], h["cows"])) for h in history if h.get("valid")]
    for code in codes(length, alphabet):
        if all(bulls_cows(code, guess) == feedback for guess, feedback in known):
            return code
    raise ValueError("no code agrees with the feedback: the history is inconsistent")
