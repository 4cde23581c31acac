"""contract-env: the reply must end with a JSON contract `{"answer": <integer>}`; the Env parses it after the
rollout and raises on a reply without one, so the episode fails (retryable) instead of being scored against
garbage, as verifiers' proposer_solver does with `SolveTask.from_trace`. A parsed contract is scored 1 when its
answer is the sum asked for."""

from __future__ import annotations

import json
import re

import verifiers.v1 as vf

KEY = "answer"


def contract(reply: str) -> dict:
    """The JSON object on the reply's last line; raises ValueError when there is none (off-contract)."""
    lines = [line.strip() for line in (reply or "").strip().splitlines()]
    last = lines[-1] if lines else ""
    try:
        parsed = json.loads(last) if re.fullmatch(r"\{.*\}", last) else None
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not isinstance(parsed.get(KEY), int):
        raise ValueError(f"the reply did not end with the JSON contract {{{KEY!r}: <integer>}}: ...{reply[-120:]!r}")
    return parsed


class SumData(vf.TaskData):
    a: int
    b: int


class SumTask(vf.Task[SumData]):
    def oracle(self, messages: list[dict]) -> str:
        return f"The sum is {self.data.a + self.data.b}.\n" + json.dumps({"answer": self.data.a + self.data.b})


class ContractEnvConfig(vf.EnvConfig):
    solver: vf.AgentConfig = vf.AgentConfig()


class ContractEnv(vf.Env[ContractEnvConfig]):
    async def run(self, task, agents):
        trace = await agents.solver.run(task)
        answer = contract(trace.last_reply or "")[KEY]
        trace.record_reward("correct", float(answer == task.data.a + task.data.b))


class SumConfig(vf.TasksetConfig):
    pass


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self) -> list[SumTask]:
        return [SumTask(SumData(idx=i, a=i, b=3 * i + 1, prompt=f"What is {i} + {3 * i + 1}? End your reply with "
                                'a last line of JSON: {"answer": <integer>}.'), self.config.task) for i in range(30)]


__all__ = ["ContractEnv", "SumTaskset"]
