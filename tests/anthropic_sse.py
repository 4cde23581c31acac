"""A scripted Anthropic Messages endpoint that streams (SSE), so the real Claude Code CLI can run offline.

Claude Code streams every model call. This plays a script of tool calls to the CLI's main
loop (the requests that offer the Write tool), one per request, then a final text reply;
any other request (side calls the CLI makes) gets a short text reply. Every main-loop
request body is kept, so a test can read the tool results the CLI sent back. Standard
library only, on 127.0.0.1 in a background thread:

    with ScriptedAnthropic([("Write", {"file_path": ..., "content": ...})]) as api:
        env = {"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "test"}
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedAnthropic:
    def __init__(self, calls: list[tuple[str, dict]], final: str = "done"):
        self.calls = list(calls)
        self.final = final
        self.requests: list[dict] = []
        self._next = 0
        self._lock = threading.Lock()

    def __enter__(self) -> "ScriptedAnthropic":
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if "count_tokens" in self.path:
                    return self._json({"input_tokens": 100})
                blocks, stop = api.reply(body)
                if body.get("stream"):
                    return self._stream(body, blocks, stop)
                self._json({"id": "msg_stub", "type": "message", "role": "assistant", "model": body.get("model", "x"),
                            "content": blocks, "stop_reason": stop, "stop_sequence": None,
                            "usage": {"input_tokens": 100, "output_tokens": 20}})

            def _json(self, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, body: dict, blocks: list[dict], stop: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

                def send(kind: str, data: dict) -> None:
                    self.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())

                send("message_start", {"message": {"id": "msg_stub", "type": "message", "role": "assistant",
                                                   "model": body.get("model", "x"), "content": [], "stop_reason": None,
                                                   "stop_sequence": None,
                                                   "usage": {"input_tokens": 100, "output_tokens": 1}}})
                for i, block in enumerate(blocks):
                    if block["type"] == "text":
                        send("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}})
                        send("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": block["text"]}})
                    else:
                        send("content_block_start", {"index": i, "content_block": {**block, "input": {}}})
                        send("content_block_delta", {"index": i, "delta": {
                            "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
                    send("content_block_stop", {"index": i})
                send("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                       "usage": {"output_tokens": 20}})
                send("message_stop", {})
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reply(self, body: dict) -> tuple[list[dict], str]:
        """The next scripted tool call for a main-loop request, else a text reply."""
        main = any(isinstance(t, dict) and t.get("name") == "Write" for t in body.get("tools") or [])
        if not main:
            return [{"type": "text", "text": "ok"}], "end_turn"
        with self._lock:
            self.requests.append(body)
            n = self._next
            self._next += 1
        if n < len(self.calls):
            name, arguments = self.calls[n]
            return [{"type": "tool_use", "id": f"toolu_stub_{n}", "name": name, "input": arguments}], "tool_use"
        return [{"type": "text", "text": self.final}], "end_turn"

    def tool_results(self) -> list[dict]:
        """The tool_result blocks the CLI sent back, in order."""
        out = []
        for body in self.requests:
            last = (body.get("messages") or [{}])[-1]
            content = last.get("content") if isinstance(last.get("content"), list) else []
            out += [c for c in content if isinstance(c, dict) and c.get("type") == "tool_result"]
        seen, unique = set(), []
        for c in out:
            if c["tool_use_id"] not in seen:
                seen.add(c["tool_use_id"])
                unique.append(c)
        return unique
