"""The loopback HTTP vocabulary the built-in endpoint and the forwarder share: the host, and errors shaped as an OpenAI-compatible provider's."""

from __future__ import annotations

from aiohttp import web

HOST = "127.0.0.1"


def error_response(status: int, message: str, headers: dict | None = None) -> web.Response:
    kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}.get(status, "server_error")
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status, headers=headers)
