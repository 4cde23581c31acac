"""Codebreaker (bulls and cows): crack a secret code of distinct digits from the feedback on each guess.

Levels: easy 3 digits of 0-5, medium 4 of 0-9, hard 5 of 0-7; the secret is drawn from
reset's seed, so an episode replays exactly, and so is one opening clue: a guess already
played, with its feedback, that makes every episode a different puzzle from the first turn. Every instance holds its own episode, so the
server may run many WebSocket sessions at once.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment

from ..models import CodebreakerObservation, CodebreakerState, GuessAction
from .rubric import CodebreakerRubric, score

LEVELS = {  # difficulty: (code length, alphabet, attempts)
    "easy": (3, "012345", 8),
    "medium": (4, "0123456789", 10),
    "hard": (5, "01234567", 10),
}


class CodebreakerEnvironment(Environment[GuessAction, CodebreakerObservation, CodebreakerState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__(rubric=CodebreakerRubric())
        self._secret = ""
        self._state = CodebreakerState()
        self._history: list[dict[str, Any]] = []
        self._level = LEVELS["easy"]

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              difficulty: str | None = None, **kwargs: Any) -> CodebreakerObservation:
        rng = random.Random(seed)
        difficulty = difficulty or ("easy", "medium", "hard")[(seed or 0) % 3]
        if difficulty not in LEVELS:
            raise ValueError(f"difficulty must be one of {sorted(LEVELS)}, got {difficulty!r}")
        self._level = LEVELS[difficulty]
        length, alphabet, _ = self._level
        self._secret = "".join(rng.sample(alphabet, length))
        clue = self._secret
        while clue == self._secret:
            clue = "".join(rng.sample(alphabet, length))
        bulls, cows = score(self._secret, clue)
        self._history = [{"guess": clue, "bulls": bulls, "cows": cows, "valid": True, "clue": True}]
        self._state = CodebreakerState(episode_id=episode_id or str(uuid.uuid4()), step_count=0,
                                       difficulty=difficulty, length=length)
        self._reset_rubric()
        return self._observation(f"Guess a code of {length} distinct digits from {alphabet}.")

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> CodebreakerObservation:
        length, alphabet, attempts = self._level
        if self._state.solved or self._state.guesses >= attempts:
            return self._observation("The episode is over: reset to play again.")
        guess = action.guess.strip()
        valid = len(guess) == length and len(set(guess)) == length and set(guess) <= set(alphabet)
        bulls, cows = score(self._secret, guess) if valid else (0, 0)
        self._history.append({"guess": guess, "bulls": bulls, "cows": cows, "valid": valid})
        self._state.step_count += 1
        self._state.guesses += 1
        self._state.solved = valid and bulls == length
        if not valid:
            message = f"{guess[:40]!r} is not {length} distinct digits from {alphabet}; the attempt is lost."
        elif self._state.solved:
            message = "Cracked!"
        else:
            message = f"{bulls} bulls, {cows} cows."
        observation = self._observation(message)
        observation.reward = self._apply_rubric(action, observation)
        assert isinstance(self.rubric, CodebreakerRubric)
        if observation.done:
            observation.metadata = {"components": self.rubric.components()}
        return observation

    @property
    def state(self) -> CodebreakerState:
        return self._state

    def _observation(self, message: str) -> CodebreakerObservation:
        length, alphabet, attempts = self._level
        done = self._state.solved or self._state.guesses >= attempts
        return CodebreakerObservation(difficulty=self._state.difficulty, length=length, alphabet=alphabet,
                                      attempts_left=attempts - self._state.guesses, history=list(self._history),
                                      message=message, solved=self._state.solved, done=done, reward=0.0)
