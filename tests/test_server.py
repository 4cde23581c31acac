"""autoenv/server.py + policies.py + oracle.py: a real Endpoint on 127.0.0.1, real HTTP clients.

The oracle is an OracleBook over small stand-in task objects: OracleBook only reads
`.data.prompt`, `.data.system_prompt`, `.key` and calls `.oracle(messages)`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI

from autoenv.core.messages import ChatRequest
from autoenv.endpoint.policies import Policies, PolicyError
from autoenv.endpoint.server import Endpoint, Faults
from autoenv.gates.oracle import OracleBook
from autoenv.gates.probes import EXPLOITS

pytestmark = pytest.mark.timeout(60)


# --- stand-in tasks -------------------------------------------------------------------


class Data:
    def __init__(self, prompt, system_prompt=None):
        self.prompt = prompt
        self.system_prompt = system_prompt


class FakeTask:
    """A task whose oracle returns `answer` (or calls it with the messages when callable)."""

    def __init__(self, key, prompt, answer, system_prompt=None):
        self.key = key
        self.data = Data(prompt, system_prompt)
        self._answer = answer
        self.seen: list[list[dict]] = []

    def oracle(self, messages):
        self.seen.append(messages)
        return self._answer(messages) if callable(self._answer) else self._answer


class HooklessTask:
    def __init__(self, key, prompt):
        self.key = key
        self.data = Data(prompt)


class AsyncHookTask(FakeTask):
    async def oracle(self, messages):  # not allowed: hooks must be plain methods
        return "never"


ANSWER = "The answer is 4, because two plus two makes four."
ADD_PROMPT = "What is 2+2?"
TOOL_PROMPT = "How much does item x cost?"
TOOL_REPLY = {"content": "Let me check.", "tool_calls": [{"name": "price", "arguments": {"item": "x"}}]}
BOOM_PROMPT = "Please explode."


def boom(messages):
    raise RuntimeError("kaboom in the hook")


def tool_then_answer(messages):
    if any(m.get("role") == "tool" for m in messages):
        return "It costs 3 dollars."
    return TOOL_REPLY


def make_tasks():
    return [
        FakeTask("add", ADD_PROMPT, ANSWER),
        FakeTask("tool", TOOL_PROMPT, tool_then_answer),
        FakeTask("boom", BOOM_PROMPT, boom),
        FakeTask("shared-a", "Shared question", "answer A", system_prompt="You are agent A."),
        FakeTask("shared-b", "Shared question", "answer B", system_prompt="You are agent B."),
        FakeTask("parts", [{"role": "system", "content": "sys"}, {"role": "user", "content": "Listed  prompt\n"}],
                 "parts answer"),
        HooklessTask("hookless", "No hook here"),
        AsyncHookTask("async", "Async hook", "x"),
    ] + [FakeTask(f"n{i}", f"Noisy task number {i}", f"noisy answer {i}") for i in range(50)]


def user(text: str, system: str | None = None) -> list[dict]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]


PRICE_TOOLS = [
    {"type": "function", "function": {"name": "catalog_price", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "catalog_stock", "parameters": {"type": "object", "properties": {}}}},
]


# --- harness --------------------------------------------------------------------------


def serve(body, policies: Policies | None = None, faults: Faults = Faults()):
    """Run `await body(ep)` against a freshly started Endpoint, in a new event loop."""
    if policies is None:
        policies = Policies(OracleBook(make_tasks()), seed=3)

    async def main():
        async with Endpoint(policies, faults) as ep:
            assert ep.port != 0
            return await body(ep)

    return asyncio.run(main())


def client(ep: Endpoint, **kw) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=ep.base_url, api_key="x", max_retries=0, **kw)


async def post(ep: Endpoint, body, headers: dict | None = None, raw: bytes | None = None):
    async with aiohttp.ClientSession() as s:
        kwargs = {"data": raw} if raw is not None else {"json": body}
        async with s.post(f"{ep.base_url}/chat/completions", headers=headers or {}, **kwargs) as r:
            return r.status, r.headers.copy(), await r.text()


def tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


# --- models and plain completions -----------------------------------------------------


def test_base_url_and_models_listing():
    async def body(ep):
        assert ep.base_url == f"http://127.0.0.1:{ep.port}/v1"
        async with client(ep) as c:
            models = await c.models.list()
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{ep.port}/health") as r:
            health = await r.json()
        return [m.id for m in models.data], health

    ids, health = serve(body)
    assert set(ids) == {"oracle", "noisy-oracle", "gullible-grader", "choice"} | set(EXPLOITS)
    assert health == {"ok": True}


def test_non_streaming_completion_returns_oracle_text_and_usage():
    async def body(ep):
        async with client(ep) as c:
            return await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))

    r = serve(body)
    assert r.object == "chat.completion"
    assert r.model == "oracle"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == ANSWER
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens == tokens(ADD_PROMPT)
    assert r.usage.completion_tokens == tokens(ANSWER)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_oracle_sees_the_conversation_and_prompt_matching_is_whitespace_insensitive():
    tasks = make_tasks()
    conversation = [
        {"role": "system", "content": "be helpful"},
        {"role": "user", "content": [{"type": "text", "text": "What  is\n2+2?"}]},  # parts, odd spacing
    ]

    async def body(ep):
        async with client(ep) as c:
            return await c.chat.completions.create(model="oracle", messages=conversation)

    r = serve(body, Policies(OracleBook(tasks)))
    assert r.choices[0].message.content == ANSWER
    assert tasks[0].seen == [conversation]


def test_tasks_sharing_a_prompt_are_told_apart_by_system_prompt():
    async def body(ep):
        async with client(ep) as c:
            a = await c.chat.completions.create(model="oracle", messages=user("Shared question", "You are agent A."))
            b = await c.chat.completions.create(model="oracle", messages=user("Shared question", "You are agent B."))
            listed = await c.chat.completions.create(model="oracle", messages=user("Listed prompt"))
        return a.choices[0].message.content, b.choices[0].message.content, listed.choices[0].message.content

    assert serve(body) == ("answer A", "answer B", "parts answer")


def test_task_without_hook_gives_empty_message_and_empty_policy():
    async def body(ep):
        async with client(ep) as c:
            hookless = await c.chat.completions.create(model="oracle", messages=user("No hook here"))
            empty = await c.chat.completions.create(model="empty", messages=user("anything at all"))
        return hookless, empty

    hookless, empty = serve(body)
    assert hookless.choices[0].message.content == ""
    assert empty.choices[0].message.content == ""
    assert empty.choices[0].finish_reason == "stop"
    assert empty.usage.completion_tokens == 0


# --- streaming ------------------------------------------------------------------------


def test_streaming_deltas_concatenate_to_the_oracle_text_with_final_usage():
    async def body(ep):
        async with client(ep) as c:
            stream = await c.chat.completions.create(
                model="oracle", messages=user(ADD_PROMPT), stream=True, stream_options={"include_usage": True}
            )
            return [chunk async for chunk in stream]

    chunks = serve(body)
    with_choices = [c for c in chunks if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    assert text == ANSWER
    assert sum(1 for c in with_choices if c.choices[0].delta.content) > 1  # really streamed in pieces
    assert with_choices[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in with_choices if c.choices[0].finish_reason]
    assert finishes == ["stop"]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage.prompt_tokens == tokens(ADD_PROMPT)
    assert last.usage.completion_tokens == tokens(ANSWER)
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_streaming_wire_format_is_sse_ending_with_done():
    async def body(ep):
        return await post(ep, {"model": "oracle", "messages": user(ADD_PROMPT), "stream": True})

    status, headers, text = serve(body)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert text.endswith("\n\n")
    events = [block for block in text.split("\n\n") if block]
    assert all(block.startswith("data: ") for block in events)
    payloads = [block[len("data: "):] for block in events]
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == ANSWER
    # Without stream_options.include_usage there is no usage chunk.
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


# --- tool calls -----------------------------------------------------------------------


def test_tool_call_non_streaming_maps_bare_name_to_advertised():
    async def body(ep):
        async with client(ep) as c:
            advertised = await c.chat.completions.create(model="oracle", messages=user(TOOL_PROMPT), tools=PRICE_TOOLS)
            bare = await c.chat.completions.create(model="oracle", messages=user(TOOL_PROMPT))
        return advertised, bare

    advertised, bare = serve(body)
    msg = advertised.choices[0].message
    assert advertised.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Let me check."
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.type == "function"
    assert call.function.name == "catalog_price"
    assert json.loads(call.function.arguments) == {"item": "x"}
    assert call.id
    # Without advertised tools the oracle's own name is kept.
    assert bare.choices[0].message.tool_calls[0].function.name == "price"
    assert advertised.usage.completion_tokens == tokens("Let me check.") + tokens(call.function.arguments)


def test_tool_call_streaming():
    async def body(ep):
        async with client(ep) as c:
            stream = await c.chat.completions.create(
                model="oracle", messages=user(TOOL_PROMPT), tools=PRICE_TOOLS, stream=True,
                stream_options={"include_usage": True},
            )
            return [chunk async for chunk in stream]

    chunks = serve(body)
    with_choices = [c for c in chunks if c.choices]
    calls = [tc for c in with_choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1
    assert calls[0].index == 0
    assert calls[0].function.name == "catalog_price"
    assert json.loads(calls[0].function.arguments) == {"item": "x"}
    assert "".join(c.choices[0].delta.content or "" for c in with_choices) == "Let me check."
    assert [c.choices[0].finish_reason for c in with_choices if c.choices[0].finish_reason] == ["tool_calls"]
    assert chunks[-1].usage is not None


def test_tool_round_trip_reaches_the_final_answer():
    async def body(ep):
        async with client(ep) as c:
            messages = user(TOOL_PROMPT)
            first = await c.chat.completions.create(model="oracle", messages=messages, tools=PRICE_TOOLS)
            call = first.choices[0].message.tool_calls[0]
            messages += [
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "3"},
            ]
            second = await c.chat.completions.create(model="oracle", messages=messages, tools=PRICE_TOOLS)
        return second

    second = serve(body)
    assert second.choices[0].message.content == "It costs 3 dollars."
    assert second.choices[0].finish_reason == "stop"


# --- errors ---------------------------------------------------------------------------


def test_unknown_model_is_404_listing_served_policies():
    async def body(ep):
        async with client(ep) as c:
            with pytest.raises(openai.NotFoundError) as info:
                await c.chat.completions.create(model="gpt-4.1", messages=user(ADD_PROMPT))
        return info.value

    e = serve(body)
    assert e.status_code == 404
    message = e.body["message"]
    assert "gpt-4.1" in message
    for name in ("oracle", "noisy-oracle", "empty"):
        assert name in message


def test_oracle_without_candidate_is_400_with_clear_message():
    async def body(ep):
        async with client(ep) as c:
            with pytest.raises(openai.BadRequestError) as info:
                await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
        return info.value

    e = serve(body, Policies(None))
    assert e.status_code == 400
    assert "need a candidate" in e.body["message"]
    assert "--candidate" in e.body["message"]


def test_conversation_matching_no_task_is_404():
    async def body(ep):
        async with client(ep) as c:
            with pytest.raises(openai.NotFoundError) as info:
                await c.chat.completions.create(model="oracle", messages=user("A question nobody asked"))
        return info.value

    e = serve(body)
    assert "no task" in e.body["message"]


def test_raising_hook_is_500_and_the_server_keeps_serving():
    async def body(ep):
        async with client(ep) as c:
            with pytest.raises(openai.InternalServerError) as info:
                await c.chat.completions.create(model="oracle", messages=user(BOOM_PROMPT))
            after = await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
        return info.value, after

    e, after = serve(body)
    assert e.status_code == 500
    assert "RuntimeError" in e.body["message"] and "kaboom in the hook" in e.body["message"]
    assert after.choices[0].message.content == ANSWER


def test_async_hook_is_a_500_naming_the_rule():
    async def body(ep):
        return await post(ep, {"model": "oracle", "messages": user("Async hook")})

    status, _, text = serve(body)
    assert status == 500
    assert "non-async" in json.loads(text)["error"]["message"]


def test_bad_request_bodies_are_400():
    async def body(ep):
        not_json = await post(ep, None, raw=b"{not json", headers={"Content-Type": "application/json"})
        no_messages = await post(ep, {"model": "oracle"})
        messages_not_list = await post(ep, {"model": "oracle", "messages": "hi"})
        return not_json, no_messages, messages_not_list, dict(ep.counts)

    not_json, no_messages, messages_not_list, counts = serve(body)
    assert not_json[0] == 400 and "not JSON" in not_json[2]
    assert no_messages[0] == 400 and "messages" in no_messages[2]
    assert messages_not_list[0] == 400
    assert json.loads(no_messages[2])["error"]["type"] == "invalid_request_error"
    assert counts.get("requests", 0) == 0  # malformed requests never reach a policy


# --- noisy oracle ---------------------------------------------------------------------

GIVE_UP = "I am not sure how to solve this."


async def noisy_outcomes(ep, model: str, sessions: list[str], prompt_of=lambda i: f"Noisy task number {i % 50}"):
    """For each session, True when the reply was the oracle's answer."""
    async with aiohttp.ClientSession() as s:
        async def one(i, session):
            prompt = prompt_of(i)
            async with s.post(f"{ep.base_url}/chat/completions", headers={"X-Session-ID": session},
                              json={"model": model, "messages": user(prompt)}) as r:
                assert r.status == 200, await r.text()
                content = (await r.json())["choices"][0]["message"]["content"]
            assert content in (GIVE_UP, f"noisy answer {i % 50}")
            return content != GIVE_UP

        return await asyncio.gather(*(one(i, session) for i, session in enumerate(sessions)))


def test_noisy_oracle_same_session_same_outcome():
    sessions = [f"rollout-{i}" for i in range(40)]

    async def body(ep):
        first = await noisy_outcomes(ep, "noisy-oracle:0.5", sessions)
        again = await noisy_outcomes(ep, "noisy-oracle:0.5", sessions)
        return first, again

    first, again = serve(body)
    assert first == again
    assert 0 < sum(first) < len(first)  # both outcomes occur


def test_noisy_oracle_is_replayable_across_endpoints_with_the_same_seed():
    sessions = [f"rollout-{i}" for i in range(40)]

    async def body(ep):
        return await noisy_outcomes(ep, "noisy-oracle:0.5", sessions)

    assert serve(body) == serve(body)


@pytest.mark.parametrize("p, low, high", [(0.5, 0.35, 0.65), (0.2, 0.08, 0.32), (0.8, 0.68, 0.92)])
def test_noisy_oracle_success_share_is_near_p(p, low, high):
    sessions = [f"session-{i}" for i in range(200)]

    async def body(ep):
        return await noisy_outcomes(ep, f"noisy-oracle:{p}", sessions)

    share = sum(serve(body)) / len(sessions)
    assert low <= share <= high


@pytest.mark.parametrize("p, expected", [("0", False), ("0.0", False), ("1", True), ("1.0", True)])
def test_noisy_oracle_extremes(p, expected):
    sessions = [f"s{i}" for i in range(60)]

    async def body(ep):
        return await noisy_outcomes(ep, f"noisy-oracle:{p}", sessions)

    assert set(serve(body)) == {expected}


def test_noisy_oracle_default_probability_is_a_half():
    sessions = [f"session-{i}" for i in range(200)]

    async def body(ep):
        return await noisy_outcomes(ep, "noisy-oracle", sessions)

    assert 0.35 <= sum(serve(body)) / len(sessions) <= 0.65


@pytest.mark.parametrize("param", ["abc", "1.5", "-0.2", "nan"])
def test_noisy_oracle_invalid_param_is_400(param):
    async def body(ep):
        async with client(ep) as c:
            with pytest.raises(openai.BadRequestError) as info:
                await c.chat.completions.create(model=f"noisy-oracle:{param}", messages=user(ADD_PROMPT))
        return info.value

    e = serve(body)
    assert "noisy-oracle" in e.body["message"] or "probability" in e.body["message"]


def test_noisy_oracle_rates_vary_per_task():
    # Each task draws its own success rate around p, so per-task shares spread more than
    # sampling noise alone would (binomial variance p(1-p)/n = 0.025 for n=10).
    book = OracleBook(make_tasks())
    policies = Policies(book, seed=11)
    shares = []
    for t in range(50):
        wins = 0
        for s in range(10):
            req = ChatRequest(model="noisy-oracle:0.5", messages=user(f"Noisy task number {t}"),
                              tools=[], session=f"task{t}-rollout{s}")
            wins += policies.reply(req).content != GIVE_UP
        shares.append(wins / 10)
    mean = sum(shares) / len(shares)
    variance = sum((x - mean) ** 2 for x in shares) / len(shares)
    assert variance > 0.035


def test_noisy_oracle_without_candidate_always_fails_clearly():
    sessions = [f"s{i}" for i in range(20)]

    async def body(ep):
        statuses = []
        for session in sessions:
            status, _, _ = await post(ep, {"model": "noisy-oracle:0.5", "messages": user(ADD_PROMPT)},
                                      headers={"X-Session-ID": session})
            statuses.append(status)
        return statuses

    assert set(serve(body, Policies(None))) == {400}


def test_noisy_oracle_zero_needs_no_candidate():
    # p = 0 never consults the oracle, so it works even without one.
    async def body(ep):
        return await post(ep, {"model": "noisy-oracle:0", "messages": user(ADD_PROMPT)})

    status, _, text = serve(body, Policies(None))
    assert status == 200
    assert json.loads(text)["choices"][0]["message"]["content"] == GIVE_UP


# --- faults ---------------------------------------------------------------------------


def test_fault_429():
    async def body(ep):
        async with client(ep) as c:
            with pytest.raises(openai.RateLimitError) as info:
                await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
        return info.value, dict(ep.counts)

    e, counts = serve(body, faults=Faults(rate_429=1))
    assert e.status_code == 429
    assert e.response.headers["Retry-After"] == "0"
    assert counts["fault:429"] == 1 and counts["requests"] == 1


def test_fault_500():
    async def body(ep):
        async with client(ep) as c:
            for _ in range(3):
                with pytest.raises(openai.InternalServerError):
                    await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
        return dict(ep.counts)

    counts = serve(body, faults=Faults(rate_500=1))
    assert counts["fault:500"] == 3
    assert counts["requests"] == 3
    assert counts["model:oracle"] == 3


def test_fault_burst_then_answers():
    async def body(ep):
        statuses = []
        async with client(ep) as c:
            for _ in range(3):
                try:
                    await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
                    statuses.append(200)
                except openai.APIStatusError as e:
                    statuses.append(e.status_code)
        return statuses, dict(ep.counts)

    statuses, counts = serve(body, faults=Faults(burst="500", burst_count=2))
    assert statuses == [500, 500, 200]
    assert counts["fault:500"] == 2 and counts["requests"] == 3


def test_fault_burst_kind_is_checked():
    with pytest.raises(ValueError, match="burst"):
        Faults(burst="418", burst_count=1)


def test_fault_cut_stream_has_no_finish():
    async def body(ep):
        chunks, error = [], None
        async with client(ep) as c:
            try:
                stream = await c.chat.completions.create(
                    model="oracle", messages=user(ADD_PROMPT), stream=True, stream_options={"include_usage": True}
                )
                async for chunk in stream:
                    chunks.append(chunk)
            except Exception as e:  # httpx / openai transport errors both count
                error = e
        raw_error = None
        async with aiohttp.ClientSession() as s:
            try:
                async with s.post(f"{ep.base_url}/chat/completions",
                                  json={"model": "oracle", "messages": user(ADD_PROMPT), "stream": True}) as r:
                    raw = await r.text()
            except aiohttp.ClientError as e:
                raw, raw_error = None, e
        return chunks, error, raw, raw_error, dict(ep.counts)

    chunks, error, raw, raw_error, counts = serve(body, faults=Faults(rate_cut=1))
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert error is not None or not finishes
    assert not finishes
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text != ANSWER and ANSWER.startswith(text)
    assert all(c.usage is None for c in chunks)
    # On the wire: the body is cut (a client error) or at least never reaches [DONE].
    assert raw_error is not None or "[DONE]" not in raw
    assert counts["fault:cut"] == 2


@pytest.mark.slow
def test_fault_hang_times_out_client_and_stop_does_not_hang():
    started = time.monotonic()

    async def body(ep):
        async with client(ep, timeout=1.0) as c:
            t0 = time.monotonic()
            with pytest.raises(openai.APITimeoutError):
                await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
            waited = time.monotonic() - t0
        return waited, dict(ep.counts)

    waited, counts = serve(body, faults=Faults(rate_hang=1, hang_seconds=30))
    total = time.monotonic() - started
    assert 0.9 <= waited < 5
    assert counts["fault:hang"] == 1
    assert total < 8  # endpoint stop cancels the hanging handler instead of waiting 30 s


def test_latency_is_added():
    async def body(ep):
        async with client(ep) as c:
            t0 = time.monotonic()
            r = await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
            return time.monotonic() - t0, r

    elapsed, r = serve(body, faults=Faults(latency=0.3))
    assert elapsed >= 0.3
    assert r.choices[0].message.content == ANSWER


def test_fault_rates_are_drawn_at_seeded_rates():
    async def body(ep):
        statuses = Counter()
        for _ in range(100):
            status, _, _ = await post(ep, {"model": "oracle", "messages": user(ADD_PROMPT)})
            statuses[status] += 1
        return statuses, dict(ep.counts)

    faults = Faults(rate_429=0.3, rate_500=0.2, seed=5)
    statuses, counts = serve(body, faults=faults)
    assert counts["requests"] == 100
    assert statuses[429] == counts.get("fault:429", 0)
    assert statuses[500] == counts.get("fault:500", 0)
    assert statuses[200] == 100 - statuses[429] - statuses[500]
    assert 15 <= statuses[429] <= 45 and 8 <= statuses[500] <= 35
    # The same seed replays the same fault sequence.
    assert serve(body, faults=faults)[0] == statuses


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate_429": 0.6, "rate_500": 0.6},
        {"rate_hang": 0.5, "rate_cut": 0.3, "rate_429": 0.3},
        {"rate_429": -0.1},
        {"rate_cut": 1.5},
    ],
)
def test_faults_validation(kwargs):
    with pytest.raises(ValueError, match="fault rates"):
        Faults(**kwargs)


def test_faults_summing_to_exactly_one_are_allowed():
    Faults(rate_429=0.25, rate_500=0.25, rate_hang=0.25, rate_cut=0.25)


def test_counts_record_requests_per_model():
    async def body(ep):
        async with client(ep) as c:
            await c.chat.completions.create(model="oracle", messages=user(ADD_PROMPT))
            await c.chat.completions.create(model="empty", messages=user(ADD_PROMPT))
            await c.chat.completions.create(model="empty", messages=user(ADD_PROMPT))
            with pytest.raises(openai.NotFoundError):
                await c.chat.completions.create(model="nope", messages=user(ADD_PROMPT))
        return dict(ep.counts)

    counts = serve(body)
    assert counts["requests"] == 4
    assert counts["model:oracle"] == 1
    assert counts["model:empty"] == 2
    assert counts["model:nope"] == 1
    assert not any(k.startswith("fault:") for k in counts)


def test_policy_error_status_defaults():
    assert PolicyError("x").status == 400
    assert PolicyError("x", status=404).status == 404


# --- which task a rollout plays -------------------------------------------------------

SQUARES = [{"role": "system", "content": "Colours are letters."},
           {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                        {"type": "text", "text": "Here are 2 squares."}]}]


def shared_prompt_tasks() -> list:
    """color_codeword's shape: one sentence and one system prompt for every task, the task in its image parts."""
    return [FakeTask(f"sq-{c}", [dict(m) for m in SQUARES], f"answer {c.upper()}", system_prompt="Colours are letters.")
            for c in "abc"]


def test_a_rollout_plays_the_task_the_harness_assigned_and_shared_text_alone_is_never_guessed():
    from autoenv.core.messages import ambiguity

    async def body(ep):
        ep.assign("rollout-1", "sq-b")  # as the child does from verifiers' on_trace, before the first request
        async with client(ep) as c:
            assigned = await c.chat.completions.create(model="oracle", messages=SQUARES,
                                                       extra_headers={"X-Session-ID": "rollout-1"})
            noisy = await c.chat.completions.create(model="noisy-oracle:1", messages=SQUARES,
                                                    extra_headers={"X-Session-ID": "rollout-1"})
            header = await c.chat.completions.create(model="oracle", messages=SQUARES,
                                                     extra_headers={"X-AutoEnv-Task": "sq-c"})
            empty = await c.chat.completions.create(model="empty", messages=SQUARES)  # needs no task
            unknown = []
            for model in ("oracle", "noisy-oracle:1", "wrong-answer", "padding"):
                with pytest.raises(openai.ConflictError) as e:
                    await c.chat.completions.create(model=model, messages=SQUARES)
                unknown.append(str(e.value))
        return assigned, noisy, header, empty, unknown

    assigned, noisy, header, empty, unknown = serve(body, Policies(OracleBook(shared_prompt_tasks())))
    assert assigned.choices[0].message.content == noisy.choices[0].message.content == "answer B"
    assert header.choices[0].message.content == "answer C"
    assert empty.choices[0].message.content == ""
    for text in unknown:  # the answer-needing policies say why, in the words the probes record as untested
        assert ambiguity(text) == "3 tasks share this first user message: the scripted model cannot tell which task it plays"
        assert "X-AutoEnv-Task" in text


def test_a_key_no_task_has_falls_back_to_the_text_and_a_system_prompt_still_tells_tasks_apart():
    async def body(ep):
        ep.assign("r", "a-variant-the-env-made")
        async with client(ep) as c:
            a = await c.chat.completions.create(model="oracle", messages=user("Shared question", "You are agent A."),
                                                extra_headers={"X-Session-ID": "r"})
        return a.choices[0].message.content

    assert serve(body) == "answer A"
