"""Rollouts in flight: each model has its own limit, and both share a total cap.

One semaphore across both models let a fast model queue behind a slow one (a scripted
strong model took 11:37 for its 16 rollouts behind a slow real target). A rollout now
takes a permit from its own model's semaphore first and then one from the total, so it
waits only for its own model's seats or for the cap, never for the other model's.
"""

from __future__ import annotations

import asyncio
from typing import Self


class Permits:
    """`async with` it around a rollout: a permit of its model, then one of the total."""

    def __init__(self, own: asyncio.Semaphore, total: asyncio.Semaphore):
        self.own = own
        self.total = total

    async def __aenter__(self) -> Self:
        await self.own.acquire()
        try:
            await self.total.acquire()
        except BaseException:
            self.own.release()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.total.release()
        self.own.release()


def role_permits(limits: dict[str, int], total: int) -> dict[str, Permits]:
    """One `Permits` per role with `limits[role]` seats of its own, all sharing `total` seats."""
    shared = asyncio.Semaphore(max(1, total))
    return {role: Permits(asyncio.Semaphore(max(1, limit)), shared) for role, limit in limits.items()}
