"""Shopping lists whose totals need the catalog tools; scored exactly to the cent."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

from candidate_env.catalog import COUPONS, PRICES_CENTS, SECTIONS, total_cents
from candidate_env.tools import CatalogToolset

SYSTEM = (
    "You are a careful shopping assistant. Unit prices and coupon discounts are only "
    "available through the catalog tools: look up every item (and the coupon, if any) "
    "before answering. Give the order total in dollars with two decimals inside one "
    "<answer></answer> tag, e.g. <answer>23.45</answer>."
)
ANSWER_TAG = re.compile(r"<answer>\s*\$?\s*(.*?)\s*</answer>", re.DOTALL)
PRICE_LINE = re.compile(r"^(?P<item>.+?): \$(?P<price>\d+\.\d\d) per unit$")
COUPON_LINE = re.compile(r"^coupon (?P<code>\S+): (?P<pct>\d+)% off")
LEVELS = {"easy": (1, 1, False), "medium": (2, 3, False), "hard": (3, 4, True)}


class ShoppingData(vf.TaskData):
    items: list[tuple[str, int]]
    """(catalog item, quantity) pairs."""
    coupon: str | None = None
    answer: str
    """The total in dollars, two decimals."""
    difficulty: str
    category: str


class ShoppingConfig(vf.TasksetConfig):
    num_tasks: int = 1000
    seed: int = 0
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class ShoppingTask(vf.Task[ShoppingData]):
    @property
    def key(self) -> str:
        return f"shop:{self.data.prompt}"

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        tags = ANSWER_TAG.findall(_last_reply(trace))
        if len(tags) != 1:
            return 0.0
        try:
            value = round(float(tags[0].replace(",", "")) * 100)
        except ValueError:
            return 0.0
        return float(value == round(float(self.data.answer) * 100))

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))

    def oracle(self, messages: list[dict]) -> dict | str:
        """Turn 1: look everything up. Turn 2: add up what the tools returned."""
        results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
        if not results:
            calls = [{"name": "price", "arguments": {"item": item}} for item, _ in self.data.items]
            if self.data.coupon:
                calls.append({"name": "coupon", "arguments": {"code": self.data.coupon}})
            return {"content": "Let me look up the prices.", "tool_calls": calls}
        unit = {}
        percent = 0
        for text in results:
            line = text.strip()
            if m := PRICE_LINE.match(line):
                unit[m["item"]] = round(float(m["price"]) * 100)
            elif m := COUPON_LINE.match(line):
                percent = int(m["pct"])
        subtotal = sum(unit.get(item, 0) * qty for item, qty in self.data.items)
        total = subtotal - (subtotal * percent + 50) // 100
        return f"The total comes to <answer>{total / 100:.2f}</answer>."


class ShoppingTaskset(vf.Taskset[ShoppingTask, ShoppingConfig]):
    @classmethod
    def toolsets(cls, config: ShoppingConfig) -> list[vf.Toolset]:
        return [CatalogToolset(config.tools)]

    def load(self) -> list[ShoppingTask]:
        rng = random.Random(self.config.seed)
        sections = list(SECTIONS)
        levels = list(LEVELS)
        seen: set[str] = set()
        tasks = []
        while len(tasks) < self.config.num_tasks:
            difficulty = levels[len(tasks) % len(levels)]
            section = sections[(len(tasks) // len(levels)) % len(sections)]
            low, high, with_coupon = LEVELS[difficulty]
            pool = [name for name in PRICES_CENTS if name.split(" ", 1)[1] in SECTIONS[section]]
            chosen = rng.sample(pool, rng.randint(low, high))
            items = [(name, rng.randint(1, 6)) for name in chosen]
            coupon = rng.choice(sorted(COUPONS)) if with_coupon else None
            prompt = "Shopping list:\n" + "\n".join(f"- {qty} x {name}" for name, qty in items)
            if coupon:
                prompt += f"\nCoupon code: {coupon}"
            prompt += "\nWhat is the order total?"
            if prompt in seen:
                continue
            seen.add(prompt)
            tasks.append(ShoppingTask(
                ShoppingData(prompt=prompt, system_prompt=SYSTEM, items=items, coupon=coupon,
                             answer=f"{total_cents(items, coupon) / 100:.2f}",
                             difficulty=difficulty, category=section),
                self.config.task,
            ))
        return tasks


def _last_reply(trace: vf.Trace) -> str:
    messages = trace.assistant_messages
    return (messages[-1].content or "") if messages else ""


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""
