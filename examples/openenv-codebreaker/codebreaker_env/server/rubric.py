"""The episode's reward: three components from openenv.core.rubrics, scored at the last step.

Sequential(Gate(Solved), WeightedSum(...)) pays nothing unless the code was cracked, so a
player that only formats its guesses well, or only reasons consistently, earns 0.
"""

from __future__ import annotations

from typing import Any

from openenv.core.rubrics import Gate, Rubric, Sequential, WeightedSum

WEIGHTS = {"solved": 0.5, "consistent": 0.25, "well_formed": 0.25}  # binary fractions: the sum is exact
MEANING = {
    "solved": "the secret code was cracked within the attempts",
    "consistent": "share of guesses that agree with every earlier feedback (no wasted guess)",
    "well_formed": "share of guesses that were valid codes (right length, distinct digits from the alphabet)",
}


def score(secret: str, guess: str) -> tuple[int, int]:
    """(bulls, cows): right digit in the right place, right digit in the wrong place."""
    bulls = sum(a == b for a, b in zip(secret, guess))
    return bulls, len(set(secret) & set(guess)) - bulls


class Solved(Rubric):
    def forward(self, action: Any, observation: Any) -> float:
        return float(bool(observation.done and observation.solved))


def _played(observation: Any) -> list[dict]:
    """The player's guesses (the opening clue excluded)."""
    return [h for h in observation.history if not h.get("clue")]


class Consistent(Rubric):
    def forward(self, action: Any, observation: Any) -> float:
        valid = [h for h in observation.history if h["valid"]]
        played = [i for i, h in enumerate(valid) if not h.get("clue")]
        if not observation.done or not played:
            return 0.0
        agree = sum(all(score(earlier["guess"], valid[i]["guess"]) == (earlier["bulls"], earlier["cows"])
                        for earlier in valid[:i]) for i in played)
        return agree / len(played)


class WellFormed(Rubric):
    def forward(self, action: Any, observation: Any) -> float:
        played = _played(observation)
        if not observation.done or not played:
            return 0.0
        return sum(h["valid"] for h in played) / len(played)


class CodebreakerRubric(Rubric):
    """0 until the episode ends; then 0 unless solved, else the weighted sum of the components."""

    def __init__(self) -> None:
        super().__init__()
        self.solved = Solved()
        self.consistent = Consistent()
        self.well_formed = WellFormed()
        self.total = Sequential(Gate(self.solved, threshold=1.0),
                                WeightedSum([self.solved, self.consistent, self.well_formed], list(WEIGHTS.values())))

    def forward(self, action: Any, observation: Any) -> float:
        return self.total(action, observation)

    def components(self) -> dict[str, float]:
        """Each component's last score, as the total counted it (all 0 when the gate closed)."""
        opened = (self.solved.last_score or 0.0) >= 1.0
        return {name: float(getattr(self, name).last_score or 0.0) if opened else 0.0 for name in WEIGHTS}
