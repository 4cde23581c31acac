"""Concurrency per model: a fast model never waits behind a slow one, and the total cap still holds."""

from __future__ import annotations

import asyncio

from conftest import PROJECT, small_config

from autoenv.child.permits import role_permits
from autoenv.core.config import load_config


async def play(limits: dict[str, int], total: int, slow_blocks: asyncio.Event) -> tuple[int, dict[str, int]]:
    """8 slow target rollouts that hold their permits until `slow_blocks` is set, and 8 strong ones that
    finish at once; returns the strong ones done while every target rollout still held its permit."""
    permits = role_permits(limits, total)
    peak = {"target": 0, "strong": 0, "all": 0}
    live = {"target": 0, "strong": 0}
    done = {"strong": 0}

    async def rollout(role: str) -> None:
        async with permits[role]:
            live[role] += 1
            peak[role] = max(peak[role], live[role])
            peak["all"] = max(peak["all"], sum(live.values()))
            if role == "target":
                await slow_blocks.wait()
            else:
                await asyncio.sleep(0)
                done["strong"] += 1
            live[role] -= 1

    tasks = [asyncio.create_task(rollout(role)) for role in ("target", "strong") for _ in range(8)]  # slow first
    for _ in range(100):  # event-loop turns, not time: the loop settles (nothing left to run but the blocked)
        await asyncio.sleep(0)
    finished_before = done["strong"]
    slow_blocks.set()
    await asyncio.gather(*tasks)
    return finished_before, peak


def test_a_fast_model_finishes_while_a_slow_one_holds_its_seats():
    finished, peak = asyncio.run(play({"target": 4, "strong": 4}, 8, asyncio.Event()))
    assert finished == 8  # every strong rollout ran while the slow target held all its 4 seats
    assert peak["target"] == 4 and peak["strong"] <= 4 and peak["all"] <= 8


def test_one_shared_seat_pool_would_have_queued_it():
    finished, peak = asyncio.run(play({"target": 4, "strong": 4}, 4, asyncio.Event()))
    assert finished == 0 and peak["all"] <= 4  # a total cap of 4 = the old single semaphore: strong waits


def test_the_config_gives_each_model_its_limit_and_a_total(tmp_path):
    config = load_config(PROJECT / "config.toml")
    assert config.concurrency() == ({"target": 8, "strong": 8}, 16)
    text = small_config().replace('api_key_var = "OPENAI_API_KEY"    #', 'max_concurrent = 2\napi_key_var = "OPENAI_API_KEY"    #', 1)
    text = text.replace("max_concurrent_total = 0", "max_concurrent_total = 5")
    (tmp_path / "config.toml").write_text(text)
    config = load_config(tmp_path / "config.toml")
    assert config.concurrency() == ({"target": 2, "strong": config.budget.max_concurrent}, 5)
