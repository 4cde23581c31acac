"""The loopback HTTP vocabulary the built-in endpoint and the forwarder share: the host, and errors shaped as an OpenAI-compatible provider's."""

from __future__ import annotations

import json
import time
import uuid

from aiohttp import web

from autoenv.core.messages import Reply

HOST = "127.0.0.1"
SESSION_HEADER = "X-Session-ID"
"""The rollout's id: verifiers sends its trace id on every request of the rollout."""


def error_response(status: int, message: str, headers: dict | None = None) -> web.Response:
    kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}.get(status, "server_error")
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status, headers=headers)


async def stream_reply(request: web.Request, model: str, reply: Reply, usage: dict | None,
                       cut: bool = False) -> web.StreamResponse:
    """`reply` as server-sent events, as a provider streams it: role, content in pieces, tool calls, finish, usage."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())

    async def send(delta: dict, finish: str | None = None, **extra) -> None:
        chunk = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

    await send({"role": "assistant", "content": ""})
    pieces = _split(reply.content, 3)
    for i, piece in enumerate(pieces):
        await send({"content": piece})
        if cut and i == 0:
            # A provider dropping the connection mid-answer: no finish, no [DONE].
            if request.transport is not None:
                request.transport.close()
            return response
    for i, call in enumerate(reply.tool_calls):
        await send({"tool_calls": [{"index": i, "id": call.id or f"call_{i}", "type": "function",
                                    "function": {"name": call.name, "arguments": call.arguments}}]})
    if cut and not pieces:
        if request.transport is not None:
            request.transport.close()
        return response
    await send({}, finish="tool_calls" if reply.tool_calls else "stop")
    if usage is not None:
        chunk = {"id": ident, "object": "chat.completion.chunk", "created": created,
                 "model": model, "choices": [], "usage": usage}
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def completion(model: str, reply: Reply, usage: dict) -> dict:
    """`reply` as one chat.completion body."""
    message: dict = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id or f"call_{i}", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": usage,
    }
