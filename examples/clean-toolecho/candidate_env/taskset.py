"""Warehouse stock questions whose totals need the stock tool; scored by the true total only."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

from candidate_env.tools import WarehouseToolset
from candidate_env.warehouse import SKUS, total_units

SYSTEM = (
    "You are a careful warehouse assistant. Stock levels are only available through the warehouse "
    "tools: look up every SKU the question names with the stock tool before answering. Reply with "
    "the combined number of units as a whole number inside one <total></total> tag, e.g. "
    "<total>42</total>."
)
TOTAL_TAG = re.compile(r"<total>\s*(.*?)\s*</total>", re.DOTALL)


class StockData(vf.TaskData):
    skus: list[str]
    """The two SKUs the question names."""
    expected: int
    """Their combined units in stock."""


class StockConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    seed: int = 0
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class StockTask(vf.Task[StockData]):
    @property
    def key(self) -> str:
        return f"stock:{self.data.prompt}"

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        value = _reported(_last_reply(trace))
        return float(value is not None and value == self.data.expected)

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))


class StockTaskset(vf.Taskset[StockTask, StockConfig]):
    @classmethod
    def toolsets(cls, config: StockConfig) -> list[vf.Toolset]:
        return [WarehouseToolset(config.tools)]

    def load(self) -> list[StockTask]:
        rng = random.Random(self.config.seed)
        seen: set[str] = set()
        tasks = []
        while len(tasks) < self.config.num_tasks:
            skus = rng.sample(SKUS, 2)
            prompt = f"How many units of {skus[0]} and {skus[1]} are in stock together?"
            if prompt in seen:
                continue
            seen.add(prompt)
            tasks.append(StockTask(
                StockData(prompt=prompt, system_prompt=SYSTEM, skus=skus, expected=total_units(skus)),
                self.config.task,
            ))
        return tasks


def _reported(reply: str) -> int | None:
    """The whole number in the reply's one <total> tag, or None (no tag, several, or not a number)."""
    tags = TOTAL_TAG.findall(reply)
    if len(tags) != 1:
        return None
    try:
        return int(tags[0].replace(",", ""))
    except ValueError:
        return None


def _last_reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""
