"""Codebreaker: an OpenEnv environment (bulls and cows). The client side: models and client only."""

from .client import CodebreakerEnv
from .models import CodebreakerObservation, CodebreakerState, GuessAction

__all__ = ["CodebreakerEnv", "CodebreakerObservation", "CodebreakerState", "GuessAction"]
