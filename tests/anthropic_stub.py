"""A scripted Anthropic-compatible endpoint (POST /v1/messages, non-streaming) on 127.0.0.1.

It plays a script of turns (one reply per request; past the end the last turn repeats)
and records every request body, raw and parsed, and every tool_result it receives, so a
test can check what the judge's tools answered and that a secret never left the machine.
It runs an aiohttp app in a background thread with its own event loop:

    with AnthropicStub(escape_script(secret_path)) as stub:
        env = {"ANTHROPIC_BASE_URL": stub.base_url, "ANTHROPIC_API_KEY": "test"}
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Callable

from aiohttp import web

Turn = Callable[["AnthropicStub"], tuple[list[dict], dict]]


def tool_use(name: str, arguments: dict) -> Turn:
    def turn(stub: "AnthropicStub"):
        return [{"type": "text", "text": f"calling {name}"},
                {"type": "tool_use", "id": stub.next_id(), "name": name, "input": arguments}], {}
    return turn


def submit(findings: dict | Callable[["AnthropicStub"], dict]) -> Turn:
    def turn(stub: "AnthropicStub"):
        body = findings(stub) if callable(findings) else findings
        return [{"type": "tool_use", "id": stub.next_id(), "name": "submit_findings", "input": body}], {}
    return turn


def with_usage(turn: Turn, input_tokens: int, output_tokens: int) -> Turn:
    def wrapped(stub: "AnthropicStub"):
        content, _ = turn(stub)
        return content, {"input_tokens": input_tokens, "output_tokens": output_tokens}
    return wrapped


def findings_citing_listed_rollout(stub: "AnthropicStub") -> dict:
    """Valid findings that cite a rollout id seen in the last list_files result."""
    listed = stub.tool_results[-1]["content"] if stub.tool_results else ""
    stems = re.findall(r"rollouts/([\w-]+)\.md", listed)
    stub.cited = stems[0] if stems else "no-rollout-listed"
    return {
        "summary": "STUB-JUDGE-SUMMARY: the reward looks faithful",
        "spec_fidelity": {"score": 8, "gaps": ["STUB-GAP: no word problems"]},
        "reward_faithfulness": {"suspected_hacks": [
            {"description": "STUB-HACK: answer accepted anywhere", "evidence": [stub.cited]}]},
        "rl_readiness": {"assessment": "STUB-RL: close", "concerns": []},
        "dataset_quality": {"assessment": "STUB-DATA: fine", "issues": []},
        "priorities": [{"issue": "STUB-PRIORITY", "fix": "anchor the answer tag"}],
    }


def escape_script(secret_path: str) -> list[Turn]:
    """Three escape attempts, a grep for the secret, a listing, then valid findings."""
    return [
        tool_use("read_file", {"path": "../secret.txt"}),
        tool_use("read_file", {"path": secret_path}),
        tool_use("read_file", {"path": "candidate/link"}),
        tool_use("grep", {"pattern": "SECRET", "path": "."}),
        tool_use("list_files", {}),
        submit(findings_citing_listed_rollout),
    ]


def never_submits() -> list[Turn]:
    return [tool_use("list_files", {})]


def expensive() -> list[Turn]:
    return [with_usage(tool_use("list_files", {}), 5_000_000, 100_000)]


class AnthropicStub:
    def __init__(self, script: list[Turn], usage: dict | None = None):
        self.script = script
        self.usage = usage or {"input_tokens": 1000, "output_tokens": 100}
        self.requests: list[dict] = []
        self.raw: list[bytes] = []
        self.headers: list[dict] = []
        self.tool_results: list[dict] = []
        self.replies: list[dict] = []
        self.cited: str | None = None
        self._ids = 0
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def next_id(self) -> str:
        self._ids += 1
        return f"toolu_stub_{self._ids:03d}"

    def received_text(self) -> str:
        return "\n".join(body.decode(errors="replace") for body in self.raw)

    async def messages(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self.raw.append(raw)
        self.headers.append(dict(request.headers))
        body = json.loads(raw)
        self.requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "user" and isinstance(last["content"], list):
            for block in last["content"]:
                if block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):
                        content = "\n".join(part.get("text", "") for part in content)
                    self.tool_results.append({"tool_use_id": block.get("tool_use_id"), "content": content})
        turn = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        content, usage = turn(self)
        reply = {
            "id": f"msg_stub_{len(self.requests):03d}", "type": "message", "role": "assistant",
            "model": body.get("model", "stub"), "content": content,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
            "stop_sequence": None, "usage": usage or self.usage,
        }
        self.replies.append(reply)
        return web.json_response(reply)

    def tool_name(self, tool_use_id: str) -> tuple[str, dict] | None:
        for reply in self.replies:
            for block in reply["content"]:
                if block.get("id") == tool_use_id:
                    return block["name"], block["input"]
        return None

    # lifecycle -----------------------------------------------------------------------

    def _serve(self, ready: threading.Event) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            app = web.Application()
            app.router.add_post("/v1/messages", self.messages)
            self._runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = self._runner.addresses[0][1]
        except BaseException as e:  # surfaced by __enter__
            self._error = e
            ready.set()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

    def __enter__(self) -> "AnthropicStub":
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True, name="anthropic-stub")
        self._thread.start()
        if not ready.wait(10) or self._error is not None:
            raise RuntimeError(f"the anthropic stub did not start: {self._error!r}")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        assert not self._thread.is_alive(), "the anthropic stub did not stop"
