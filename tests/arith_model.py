"""A stand-in model for the arithmetic example whose skill depends on what the tasks say.

The real local model (SmolLM2, tests/local_model.py) runs here, but its score on arithmetic is
near zero whatever the tasks look like, so it cannot show a change of tasks moving the numbers.
This one can: it reads the expression after the last `:` of the last user message and answers
`<answer>VALUE</answer>`, exact for expressions whose parentheses nest at most one deep, and off
by one (well formed, wrong) for deeper nesting: a model that loses track inside nested brackets.
`exact` always answers the exact value (the strong model).

It is served by the harness's own endpoint (autoenv.endpoint.server: real HTTP on 127.0.0.1,
streamed or not), as two more scripted policies beside the built-in ones.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from autoenv.core.messages import ChatRequest, Reply, message_text
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint

EXPRESSION = re.compile(r":\s*([-+*()\d\s]+?)\s*$")


def depth(expression: str) -> int:
    deepest = level = 0
    for char in expression:
        level += (char == "(") - (char == ")")
        deepest = max(deepest, level)
    return deepest


def value(request: ChatRequest) -> int:
    users = [m for m in request.messages if m.get("role") == "user"]
    text = message_text(users[-1].get("content")) if users else ""
    match = EXPRESSION.search(text)
    if match is None:
        raise ValueError(f"no expression in {text[-200:]!r}")
    return int(eval(match.group(1), {"__builtins__": {}}))  # digits, + - * and parentheses only (the regex)


def shallow(request: ChatRequest, param: str | None) -> Reply:
    users = [m for m in request.messages if m.get("role") == "user"]
    expression = EXPRESSION.search(message_text(users[-1].get("content")))
    nested = expression is not None and depth(expression.group(1)) >= 2
    return Reply(content=f"<answer>{value(request) + (1 if nested else 0)}</answer>")


def exact(request: ChatRequest, param: str | None) -> Reply:
    return Reply(content=f"<answer>{value(request)}</answer>")


@contextmanager
def serving() -> Iterator[Endpoint]:
    """The endpoint with `shallow` and `exact`, served from a thread of its own."""
    policies = Policies(None)
    policies.serve("shallow", shallow, "exact up to one level of parentheses, off by one deeper")
    policies.serve("exact", exact, "always the exact value")
    endpoint = Endpoint(policies)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(endpoint.start(), loop).result(timeout=30)
    try:
        yield endpoint
    finally:
        asyncio.run_coroutine_threadsafe(endpoint.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
