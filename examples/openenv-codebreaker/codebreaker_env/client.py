"""The typed WebSocket client. It imports openenv.core and models only, never the server."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .models import CodebreakerObservation, CodebreakerState, GuessAction


class CodebreakerEnv(EnvClient[GuessAction, CodebreakerObservation, CodebreakerState]):
    """`with CodebreakerEnv(base_url="http://127.0.0.1:8000").sync() as env: env.reset(seed=3)`."""

    def _step_payload(self, action: GuessAction) -> dict[str, Any]:
        return {"guess": action.guess}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CodebreakerObservation]:
        observation = CodebreakerObservation(**payload.get("observation", {}),
                                             done=payload.get("done", False), reward=payload.get("reward"))
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> CodebreakerState:
        return CodebreakerState(**payload)
