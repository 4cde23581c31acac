"""Wire types shared by the client and the server (the only module both import)."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class GuessAction(Action):
    """One guess at the secret code."""

    guess: str = Field(..., description="the code you guess: distinct digits from the alphabet, e.g. '0123'")

class CodebreakerObservation(Observation):
    """What the player sees after reset and after every guess; reward and done ride along."""

    difficulty: str = Field(..., description="easy, medium or hard")
    length: int = Field(..., description="how many distinct digits the secret code has")
    alphabet: str = Field(..., description="the digits the code is drawn from")
    attempts_left: int = Field(..., description="guesses left, this one excluded")
    history: list[dict] = Field(default_factory=list,
                                description="the opening clue and every guess so far: {guess, bulls, cows, valid, clue?}")
    message: str = ""
    solved: bool = False

class CodebreakerState(State):
    """Episode bookkeeping for the infrastructure (never the secret)."""

    difficulty: str = ""
    length: int = 0
    guesses: int = 0
    solved: bool = False
