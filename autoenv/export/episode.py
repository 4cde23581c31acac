"""One episode of an exported OpenEnv server played by the candidate's oracle (run as a child process).

`python -m autoenv.export.episode URL CANDIDATE_DIR KIND` prints {"reward", "steps"} as JSON.
KIND `wrapped`: reset(index=0), one reply. KIND `openenv`: the candidate's first task's
reset kwargs, then the oracle answers each observation as verifiers' openenv taskset shows it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import aiohttp

from autoenv.child.tasks import candidate_tasks
from autoenv.core.messages import Reply


def _text(reply: Any) -> str:
    return Reply.coerce(reply).content or ""


async def play(url: str, task: Any, kind: str) -> dict:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as http:
        async with http.get(f"{url}/schema") as response:
            action_schema = (await response.json())["action"]
        async with http.ws_connect(url.replace("http", "ws", 1) + "/ws") as ws:
            async def send(kind_: str, data: dict) -> dict:
                await ws.send_json({"type": kind_, "data": data})
                reply = await ws.receive_json()
                if reply.get("type") != "observation":
                    raise RuntimeError(f"{kind_} was answered with {reply}")
                return reply["data"]

            total, steps = 0.0, 0
            if kind == "wrapped":
                result = await send("reset", {"index": 0})
                obs = result["observation"]
                messages = ([{"role": "system", "content": obs["system_prompt"]}] if obs.get("system_prompt") else [])
                messages.append({"role": "user", "content": obs["prompt"]})
                result = await send("step", {"content": _text(task.oracle(messages))})
                return {"reward": float(result.get("reward") or 0.0), "steps": 1}
            from verifiers.v1.tasksets.openenv.taskset import parse_action  # deferred: verifiers only in this child

            result = await send("reset", dict(task.data.reset))
            data = task.data
            messages = ([{"role": "system", "content": data.system_prompt}] if data.system_prompt else [])
            messages.append({"role": "user", "content": data.prompt or json.dumps(
                {"observation": result["observation"], "action_schema": action_schema})})
            while not result.get("done") and steps < 50:
                reply = _text(task.oracle(messages))
                messages.append({"role": "assistant", "content": reply})
                result = await send("step", parse_action(reply, action_schema))
                steps += 1
                total += float(result.get("reward") or 0.0)
                messages.append({"role": "user", "content": json.dumps(
                    {"observation": result["observation"], "action_schema": action_schema}, ensure_ascii=False)})
            await ws.send_json({"type": "close"})
            return {"reward": total, "steps": steps}


def main(argv: list[str]) -> int:
    url, candidate, kind = argv
    task = candidate_tasks(candidate)[0]
    print(json.dumps(asyncio.run(play(url.rstrip("/"), task, kind))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
