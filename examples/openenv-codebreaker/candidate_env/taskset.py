"""Codebreaker through verifiers' openenv taskset: the OpenEnv server plays the game, verifiers the model.

The config, the task data and the action parser are verifiers' own (verifiers.v1.tasksets.openenv);
this package adds what the harness needs: a prompt per episode (so the oracle hook finds its task),
`difficulty` and `answer` fields, the oracle, and a run loop that speaks OpenEnv's WebSocket
protocol with aiohttp (openenv itself cannot be installed next to verifiers 0.4) and records the
rubric's components with their weights, so their weighted sum is the OpenEnv episode reward.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import aiohttp
import verifiers.v1 as vf
from verifiers.v1.tasksets.openenv.taskset import OpenEnvConfig, OpenEnvData, OpenEnvEnv, parse_action

from candidate_env import launcher
from candidate_env.solver import bulls_cows, next_guess

# A copy of the server's levels (codebreaker_env/server/codebreaker_environment.py): the client
# side never imports the server. difficulty: (code length, alphabet, attempts)
LEVELS = {"easy": (3, "012345", 8), "medium": (4, "0123456789", 10), "hard": (5, "01234567", 10)}
WEIGHTS = {"solved": 0.5, "consistent": 0.25, "well_formed": 0.25}  # the server's rubric weights
SYSTEM = (
    "You play Codebreaker: a secret code of distinct digits is hidden. Each turn, reply with one JSON "
    "action such as {\"guess\": \"0123\"} and nothing else. After each guess you get the environment's "
    "observation: bulls count right digits in the right place, cows right digits in the wrong place. "
    "Crack the code within the guesses you have, and make every guess agree with all the feedback so far."
)
PROMPT = ("Episode {seed} ({difficulty}): the code has {length} distinct digits from {alphabet}; you have "
          "{attempts} guesses. Opening clue: {clue} scored {bulls} bulls and {cows} cows.")


class CodebreakerData(OpenEnvData):
    seed: int
    difficulty: str
    answer: str
    """The secret code (the server draws the same one from the seed); never shown to the model."""


class CodebreakerTask(vf.Task[CodebreakerData]):
    @property
    def key(self) -> str:
        return f"codebreaker:{self.data.seed}:{self.data.difficulty}"

    def oracle(self, messages: list[dict]) -> str:
        """The reference next guess: the first code that agrees with the latest observation's history."""
        length, alphabet, _ = LEVELS[self.data.difficulty]
        secret, clue = episode(self.data.seed, self.data.difficulty)
        history: list[dict] = [{"guess": clue, "valid": True, "clue": True,
                                **dict(zip(("bulls", "cows"), bulls_cows(secret, clue)))}]
        users = [m for m in messages if m.get("role") == "user"]
        if len(users) > 1:
            content = users[-1].get("content")
            text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content or [])
            history = json.loads(text)["observation"].get("history", [])
        return json.dumps({"guess": next_guess(length, alphabet, history)})


class CodebreakerConfig(OpenEnvConfig):
    env: str | None = "codebreaker"
    """The local OpenEnv package (candidate_env/codebreaker_env), started by candidate_env.launcher."""
    num_tasks: int = 1000
    """Episodes: seeds 0..num_tasks-1, a third per difficulty (used when `resets` is left at [{}])."""


class CodebreakerTaskset(vf.Taskset[CodebreakerTask, CodebreakerConfig]):
    def load(self) -> Iterator[CodebreakerTask]:
        config = self.config
        resets = config.resets if config.resets != [{}] else [
            {"seed": i, "difficulty": tuple(LEVELS)[i % 3]} for i in range(config.num_tasks)]
        for reset in resets:
            seed = int(reset.get("seed", 0))
            difficulty = reset.get("difficulty") or tuple(LEVELS)[seed % 3]
            length, alphabet, attempts = LEVELS[difficulty]
            secret, clue = episode(seed, difficulty)
            bulls, cows = bulls_cows(secret, clue)
            yield CodebreakerTask(
                CodebreakerData(
                    name=f"codebreaker#{seed}", system_prompt=SYSTEM, prompt=PROMPT.format(
                        seed=seed, difficulty=difficulty, length=length, alphabet=alphabet, attempts=attempts,
                        clue=clue, bulls=bulls, cows=cows),
                    env=config.env, base_url=config.base_url, use_docker=False, provider_kwargs={},
                    reset={"seed": seed, "difficulty": difficulty}, seed=seed, difficulty=difficulty,
                    answer=secret,
                ),
                config.task,
            )


def episode(seed: int, difficulty: str) -> tuple[str, str]:
    """The secret and the opening clue the server draws for this seed (the same draws, in order)."""
    length, alphabet, _ = LEVELS[difficulty]
    rng = random.Random(seed)
    secret = clue = "".join(rng.sample(alphabet, length))
    while clue == secret:
        clue = "".join(rng.sample(alphabet, length))
    return secret, clue


class CodebreakerEnv(OpenEnvEnv):
    """verifiers' OpenEnv env with the game's prompt first and the rubric's components recorded."""

    async def run(self, task: Any, agents: Any) -> None:
        data = task.data
        base = (data.base_url or launcher.base_url()).rstrip("/")
        components: dict[str, float] = {name: 0.0 for name in WEIGHTS}
        total = 0.0
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            async with http.get(f"{base}/schema") as response:
                response.raise_for_status()
                action_schema = (await response.json())["action"]
            async with http.ws_connect(base.replace("http", "ws", 1) + "/ws") as ws:
                result = await _send(ws, "reset", data.reset)

                def payload() -> str:
                    return json.dumps({"observation": result["observation"], "action_schema": action_schema},
                                      ensure_ascii=False)

                async with agents.player.interaction(task) as interaction:
                    segment = await interaction.turn()  # the prompt speaks first
                    while not segment.terminated and not result.get("done"):
                        action = segment.last_reply.strip()
                        if not action:
                            interaction.trace.stop("empty_action")
                            break
                        try:
                            step = parse_action(action, action_schema)
                        except ValueError:
                            step = {"guess": action}
                        result = await _send(ws, "step", step)
                        total += float(result.get("reward") or 0.0)
                        if result.get("done"):
                            components.update(result["observation"].get("metadata", {}).get("components", {}))
                            break
                        segment = await interaction.turn(payload())
                await ws.send_json({"type": "close"})
        trace = interaction.trace
        for name, weight in WEIGHTS.items():
            trace.record_reward(name, float(components.get(name, 0.0)), weight)
        trace.record_metric("openenv_reward", total)


async def _send(ws: aiohttp.ClientWebSocketResponse, kind: str, data: dict) -> dict:
    """One OpenEnv WebSocket exchange; an action the server rejects comes back as an invalid guess."""
    await ws.send_json({"type": kind, "data": data})
    reply = await ws.receive_json()
    if reply.get("type") == "error" and kind == "step":
        text = json.dumps(data)[:200]
        return await _send(ws, "step", {"guess": text})
    if reply.get("type") != "observation":
        raise RuntimeError(f"OpenEnv {kind} failed: {reply}")
    return reply["data"]
