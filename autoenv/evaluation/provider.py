"""Is each real model's endpoint up? Asked in preflight, before any gate runs.

An unreachable endpoint used to be found by the smoke rollout, after about 100 s of
gates, and recorded as a `crash` against a commit that had nothing to do with it. So
preflight asks every real endpoint first: `GET {base_url}/models`, and when a provider
does not serve that list (404/405), a 1-token chat completion. A list that does not name
the configured model is the user's to fix (exit 2, naming the models it lists); an
endpoint that lists none is not checked for the model. Each request has a
bounded timeout and a few bounded retries with backoff for the answers a busy provider
gives (429, 5xx, a dropped connection); the provider's own error text is shown.

Plain HTTP (httpx), never verifiers: the harness process does not import it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import httpx

REQUEST_SECONDS = 10.0
ATTEMPTS = 3
BACKOFF_SECONDS = 1.0  # doubled after each failed attempt
BUSY = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class Check:
    """What one endpoint answered: `ok`, or why not and whether it is the user's to fix."""

    ok: bool
    detail: str
    fixable: bool = False
    """True when the answer says the config or key is wrong (401, 403, 404 model), not that the provider is down."""
    attempts: int = 1


def check_endpoint(base_url: str, model: str, api_key: str | None, *, timeout: float = REQUEST_SECONDS,
                   attempts: int = ATTEMPTS, backoff: float = BACKOFF_SECONDS) -> Check:
    """Ask `base_url` whether it serves `model`, retrying busy answers `attempts` times in all."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    result = Check(ok=False, detail="not asked")
    with httpx.Client(base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout) as client:
        for attempt in range(1, attempts + 1):
            result = _ask(client, model)
            result = Check(ok=result.ok, detail=result.detail, fixable=result.fixable, attempts=attempt)
            if result.ok or result.fixable or attempt == attempts:
                return result
            time.sleep(backoff * 2 ** (attempt - 1))
    return result


def _ask(client: httpx.Client, model: str) -> Check:
    try:
        response = client.get("models")
        if response.status_code in (404, 405):  # no model list here: a 1-token completion instead
            response = client.post("chat/completions", json={
                "model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]})
            return _judge(response, "POST chat/completions (1 token)")
        check = _judge(response, "GET models")
        return check if not check.ok else _listed(response, model, check)
    except httpx.TimeoutException:
        return Check(ok=False, detail=f"no answer within {client.timeout.read:g} s")
    except httpx.HTTPError as e:
        return Check(ok=False, detail=f"cannot connect: {type(e).__name__}: {e}")


def listed_models(response: httpx.Response) -> list[str]:
    """The model ids an OpenAI-style `GET models` answer lists (`{"data": [{"id": ...}]}`); [] when none."""
    try:
        body = response.json()
    except ValueError:
        return []
    data = body.get("data") if isinstance(body, dict) else None
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")] if isinstance(data, list) else []


def _listed(response: httpx.Response, model: str, check: Check) -> Check:
    """`check`, or a fixable failure when the endpoint lists models and `model` is not one of them (a
    parameterised scripted policy, `noisy-oracle:0.3`, is listed by its name before the colon)."""
    models = listed_models(response)
    if not models or model in models or model.partition(":")[0] in models:
        return check if models else Check(ok=True, detail=f"{check.detail} (no model listed: not checked)")
    shown = ", ".join(models[:20]) + (f" and {len(models) - 20} more" if len(models) > 20 else "")
    return Check(ok=False, fixable=True, detail=f"GET models does not list the model {model!r}; it lists: {shown}")


def _judge(response: httpx.Response, asked: str) -> Check:
    status = response.status_code
    if status < 400:
        return Check(ok=True, detail=f"{asked}: HTTP {status}")
    detail = f"{asked}: HTTP {status}: {provider_message(response)}"
    return Check(ok=False, detail=detail, fixable=status not in BUSY)


def provider_message(response: httpx.Response) -> str:
    """The provider's own error text (OpenAI-style `{"error": {"message": ...}}`), else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:300]
    if isinstance(error, str):
        return error[:300]
    return str(body)[:300]


def api_key(var: str) -> str | None:
    return os.environ.get(var) if var else None
