"""Preflight's endpoint check against the project's own server on 127.0.0.1: up, busy, refusing, gone."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint, Faults
from autoenv.evaluation.provider import check_endpoint


@contextmanager
def running(endpoint: Endpoint) -> Iterator[Endpoint]:
    """`endpoint` served from a thread of its own, so the synchronous check can call it."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(endpoint.start(), loop).result(timeout=10)
    try:
        yield endpoint
    finally:
        asyncio.run_coroutine_threadsafe(endpoint.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_serving_endpoint_answers():
    with running(Endpoint(Policies())) as ep:
        check = check_endpoint(ep.base_url, "oracle", None, backoff=0)
    assert check.ok and "GET models: HTTP 200" in check.detail and check.attempts == 1


def test_an_unreachable_endpoint_is_retried_then_not_fixable():
    started = time.time()
    check = check_endpoint(f"http://127.0.0.1:{free_port()}/v1", "m", None, attempts=2, backoff=0.1)
    assert not check.ok and not check.fixable and check.attempts == 2
    assert "cannot connect" in check.detail
    assert time.time() - started < 5


def test_a_silent_endpoint_is_bounded_by_the_timeout():
    started = time.time()
    with socket.socket() as server:  # accepts the connection, never answers
        server.bind(("127.0.0.1", 0))
        server.listen()
        check = check_endpoint(f"http://127.0.0.1:{server.getsockname()[1]}/v1", "m", None,
                               timeout=0.5, attempts=1)
    assert not check.ok and not check.fixable and "no answer within 0.5 s" in check.detail
    assert time.time() - started < 5


class NoModelList(Endpoint):
    """A provider that serves chat completions but no model list."""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        return app


def test_without_a_model_list_a_one_token_completion_is_asked_and_busy_answers_retried():
    with running(NoModelList(Policies(), Faults(burst="429", burst_count=1))) as ep:
        check = check_endpoint(ep.base_url, "refusal", None, backoff=0.05)
    assert check.ok and check.attempts == 2
    assert "POST chat/completions (1 token): HTTP 200" in check.detail


def test_a_provider_that_stays_down_shows_its_error_and_is_not_the_users_to_fix():
    with running(NoModelList(Policies(), Faults(burst="500", burst_count=10))) as ep:
        check = check_endpoint(ep.base_url, "oracle", None, attempts=2, backoff=0.05)
    assert not check.ok and not check.fixable and check.attempts == 2
    assert "HTTP 500: injected server error" in check.detail


def test_an_unknown_model_is_the_users_to_fix_with_the_providers_words():
    with running(NoModelList(Policies())) as ep:
        check = check_endpoint(ep.base_url, "no-such-model", None, backoff=0.05)
    assert not check.ok and check.fixable and check.attempts == 1
    assert "HTTP 404" in check.detail and "no-such-model" in check.detail
