"""Headless Chromium for the report tests, driven through the DevTools protocol.

Debian's `chromium` package is installed with apt-get when it is missing (root and a
reachable mirror needed); `chromium_or_reason()` says why not otherwise, for the skip.
`Browser` launches it with a private profile, opens one page, records every console
error and uncaught exception, evaluates scripts, clicks like a mouse, and screenshots.
The protocol goes over a websocket with aiohttp, already a dependency.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import aiohttp

_tried_install: list[str] = []


def chromium_or_reason() -> tuple[str | None, str]:
    """(the chromium binary, "") or (None, why it is not there and could not be installed)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found, ""
    if not _tried_install:
        _tried_install.append(_install())
    found = shutil.which("chromium")
    return (found, "") if found else (None, _tried_install[0] or "apt-get installed no chromium binary")


def _install() -> str:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "chromium is not installed and apt-get is not usable here (not root, or not Debian)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]):
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(command)}` took more than 15 minutes"
        if done.returncode != 0:
            return f"`{' '.join(command)}` failed: {(done.stderr or done.stdout).strip()[-300:]}"
    return ""


class Browser:
    """One headless Chromium with one page; use as `async with Browser(binary) as page:`."""

    def __init__(self, binary: str, width: int = 1280, height: int = 1600):
        self.binary, self.width, self.height = binary, width, height
        self.errors: list[str] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._events: dict[str, asyncio.Event] = {}

    async def __aenter__(self) -> Browser:
        self._profile = tempfile.mkdtemp(prefix="autoenv-chromium-")
        self._proc = await asyncio.create_subprocess_exec(
            self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--remote-debugging-port=0", f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}",
            "about:blank", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        port = await asyncio.wait_for(self._devtools_port(), timeout=60)
        self._http = aiohttp.ClientSession()
        async with self._http.get(f"http://127.0.0.1:{port}/json/list") as response:
            pages = [t for t in await response.json() if t.get("type") == "page"]
        self._ws = await self._http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        return self

    async def __aexit__(self, *exc) -> None:
        self._reader.cancel()
        await self._ws.close()
        await self._http.close()
        self._proc.kill()
        await self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    async def _devtools_port(self) -> int:
        assert self._proc.stderr is not None
        while True:
            line = (await self._proc.stderr.readline()).decode(errors="replace")
            if not line:
                raise RuntimeError("chromium exited before its DevTools endpoint was ready")
            if m := re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line):
                asyncio.get_running_loop().create_task(self._drain())
                return int(m.group(1))

    async def _drain(self) -> None:
        assert self._proc.stderr is not None
        while await self._proc.stderr.readline():
            pass

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future and not future.done():
                    future.set_result(data)
                continue
            method, params = data.get("method", ""), data.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                self.errors.append("console.error: " + " ".join(str(a.get("value", a.get("description")))
                                                                for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                self.errors.append("exception: " + str((details.get("exception") or {}).get("description")
                                                       or details.get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")
            self._events.setdefault(method, asyncio.Event()).set()

    async def send(self, method: str, **params) -> dict:
        number = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[number] = future
        await self._ws.send_str(json.dumps({"id": number, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, timeout=60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def open(self, path: Path) -> None:
        """Load the file and wait for its load event."""
        self._events["Page.loadEventFired"] = asyncio.Event()
        await self.send("Page.navigate", url=path.resolve().as_uri())
        await asyncio.wait_for(self._events["Page.loadEventFired"].wait(), timeout=60)

    async def evaluate(self, expression: str):
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the element."""
        box = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    async def screenshot(self, path: Path) -> Path:
        data = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        path.write_bytes(base64.b64decode(data["data"]))
        return path
