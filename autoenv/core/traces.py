"""Read verifiers' traces.jsonl as plain JSON and turn each rollout into one scored record.

No verifiers import here (it costs seconds and needs the candidate): the wire format is
read directly. verifiers does not serialise the total reward, so it is recomputed as
sum(score * weight). Every rollout gets one outcome, so errors are counted apart and
never averaged in as zeros:

- `ok`: scored normally;
- `provider_error`: the model endpoint failed (HTTP errors, unreachable, cut streams);
- `timeout`: the rollout hit the per-rollout timeout;
- `env_error`: the candidate failed (a reward raised, setup or a tool server crashed), or a
  reward came back missing or not a finite number.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import NonNegativeInt, TypeAdapter, ValidationError

from autoenv.core.childfiles import invalid, load_json
from autoenv.core.formats import excerpt

TRACES_FILE = "traces.jsonl"
RETRIES_FILE = "client_retries.json"
"""{role: retries the chat program's OpenAI client made}, written by the rollouts stage."""
_RETRIES = TypeAdapter(dict[str, NonNegativeInt])
PROVIDER_OUTCOMES = ("provider_error", "timeout")
"""Outcomes that say the provider failed or was too slow, not the candidate."""
PROVIDER_ERRORS = {"ProviderError", "InterceptionError", "ModelError", "APIConnectionError", "APIStatusError"}


@dataclass
class Rollout:
    trace_id: str
    task_key: str
    idx: int | None
    outcome: str
    reward: float | None
    components: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    difficulty: str | None = None
    category: str | None = None
    error: str | None = None
    turns: int = 0
    input_tokens: int = 0
    """Prompt tokens, cached ones included (per call: `auto`, see call_input_tokens)."""
    output_tokens: int = 0
    seconds: float = 0.0
    cached_input_tokens: int = 0
    """Of the prompt tokens, those the provider reports as served from its cache."""
    reported_prompt_tokens: int = 0
    """The sum of `usage.prompt_tokens` as reported (without cached ones where the provider counts them apart)."""


def read_rollouts(directory: Path) -> list[Rollout]:
    """Every trainable trace in `directory/traces.jsonl`, in file order."""
    return [to_rollout(trace, episode) if trace is not None else episode_failure(episode)
            for trace, episode in iter_traces(directory)]


def normalised(rollouts: list[Rollout], declared: list[float] | None) -> list[Rollout]:
    """`rollouts` with every component score mapped from the task's declared [low, high] range to [0, 1]
    and the reward recomputed (the bands and the solve threshold are shares of [0, 1])."""
    if not declared or declared[1] <= declared[0]:
        return rollouts
    low, high = declared
    out = []
    for r in rollouts:
        components = {k: (v - low) / (high - low) for k, v in r.components.items()}
        reward = None if r.reward is None else sum(v * r.weights.get(k, 1.0) for k, v in components.items())
        out.append(dataclasses.replace(r, components=components, reward=reward))
    return out


def iter_traces(directory: Path) -> Iterator[tuple[dict | None, dict]]:
    """(trace, episode) for every trainable trace in `directory/traces.jsonl`, in file order;
    (None, episode) for an episode that failed before any trace."""
    path = Path(directory) / TRACES_FILE
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                episode = json.loads(line)
            except json.JSONDecodeError:
                # A worker killed mid-write leaves at most its last line incomplete.
                continue
            traces = episode.get("traces") or []
            if not traces:
                yield None, episode
            for trace in traces:
                if (trace.get("agent") or {}).get("trainable", True):
                    yield trace, episode


def finished_episodes(directory: Path) -> Counter[str]:
    """Episodes stored in `directory/traces.jsonl`, by task key (what a resumed evaluation need not run again)."""
    path = Path(directory) / TRACES_FILE
    counts: Counter[str] = Counter()
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                counts[str((json.loads(line).get("task") or {}).get("key") or "")] += 1
            except (json.JSONDecodeError, AttributeError):
                continue  # the line a killed worker left incomplete
    return counts


def trim_partial_line(directory: Path) -> None:
    """Drop what follows the last newline of `directory/traces.jsonl` (a write cut by a kill), so
    episodes appended by a resumed evaluation start on a line of their own."""
    path = Path(directory) / TRACES_FILE
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            path.write_bytes(data[: data.rfind(b"\n") + 1])


def episode_failure(episode: dict) -> Rollout:
    task = episode.get("task") or {}
    errors = episode.get("errors") or []
    kind = "timeout" if episode.get("is_timeout") else _error_kind(errors)
    return Rollout(
        trace_id=episode.get("id", ""), task_key=task.get("key") or "", idx=(task.get("data") or {}).get("idx"),
        outcome=kind, reward=None, error=_error_text(errors),
        difficulty=_opt((task.get("data") or {}).get("difficulty")),
        category=_opt((task.get("data") or {}).get("category")),
    )


def to_rollout(trace: dict, episode: dict | None = None) -> Rollout:
    task = trace.get("task") or {}
    data = task.get("data") or {}
    errors = list(trace.get("errors") or []) + list((episode or {}).get("errors") or [])
    rewards = trace.get("rewards") or {}
    components: dict[str, float] = {}
    weights: dict[str, float] = {}
    total: float | None = 0.0
    bad = None
    for name, value in rewards.items():
        score = value.get("score") if isinstance(value, dict) else None
        if not isinstance(score, (int, float)) or not math.isfinite(score):  # bool, int, float: real numbers
            bad = f"reward {name!r} is {score!r}, not a finite number"
            total = None
            continue
        components[name] = float(score)
        weights[name] = float(value.get("weight", 1.0))
        if total is not None:
            total += float(score) * float(value.get("weight", 1.0))
    if trace.get("is_timeout") or (episode or {}).get("is_timeout"):
        outcome, total = "timeout", None
    elif errors:
        outcome, total = _error_kind(errors), None
    elif trace.get("stop_condition") == "provider_error":
        outcome, total = "provider_error", None
    elif bad is not None or not rewards:
        outcome, total = "env_error", None
        bad = bad or "the rollout finished without any reward"
    else:
        outcome = "ok"
    usage_in = usage_out = usage_cached = usage_reported = 0
    for call in trace.get("calls") or []:
        usage = call.get("usage") or {}
        usage_in += call_input_tokens(usage)
        usage_cached += cached_tokens(usage)
        usage_reported += reported_prompt_tokens(usage)
        usage_out += int(usage.get("completion_tokens") or 0)
    agent = (trace.get("timing") or {}).get("agent") or {}
    seconds = max(0.0, float(agent.get("end") or 0) - float(agent.get("start") or 0))
    turns = sum(1 for node in trace.get("nodes") or [] if (node.get("message") or {}).get("role") == "assistant")
    return Rollout(
        trace_id=trace.get("id", ""), task_key=task.get("key") or "", idx=data.get("idx"),
        outcome=outcome, reward=total, components=components, weights=weights,
        difficulty=_opt(data.get("difficulty")), category=_opt(data.get("category")),
        error=_error_text(errors) or bad, turns=turns,
        input_tokens=usage_in, output_tokens=usage_out, seconds=round(seconds, 3),
        cached_input_tokens=usage_cached, reported_prompt_tokens=usage_reported,
    )


def cached_tokens(usage: dict) -> int:
    """Prompt tokens served from the provider's cache: verifiers' `cached_input_tokens` in a trace, or the
    provider's own `prompt_tokens_details.cached_tokens` (0 when not reported)."""
    if usage.get("cached_input_tokens") is not None:
        return int(usage["cached_input_tokens"] or 0)
    details = usage.get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0


def reported_prompt_tokens(usage: dict) -> int:
    """`usage.prompt_tokens` as the provider reported it. verifiers' trace stores it less the cached
    tokens (its `Usage.from_openai`, which assumes they are included), so they are added back."""
    prompt = int(usage.get("prompt_tokens") or 0)
    return prompt + int(usage.get("cached_input_tokens") or 0)


def call_input_tokens(usage: dict, mode: str = "auto") -> int:
    """One call's prompt tokens, cached ones included: OpenAI counts them inside `prompt_tokens`
    (`included`), llama.cpp's llama-server apart from them (`separate`); `auto` takes them as apart
    when the cached count exceeds the prompt count (impossible were they included)."""
    prompt, cached = reported_prompt_tokens(usage), cached_tokens(usage)
    separate = mode == "separate" or (mode == "auto" and cached > prompt)
    return prompt + cached if separate else prompt


UNMATCHED = "no task of the candidate matches this conversation"
"""The embedded endpoint's 404 (autoenv.endpoint.policies.NO_MATCH): the environment opened a conversation
no task's prompt starts (a custom Env's own observation, say), so the scripted policy cannot play it.
The environment's side, never the provider's."""


OUTAGE = re.compile(r"\b(APIConnectionError|APITimeoutError|RateLimitError|InternalServerError|Connection error)\b")
"""A grader's client failing (openai's errors). Bare transport errors (httpx's ReadTimeout, ConnectError) are left
out: a candidate's own tool server timing out raises them too, and that is the candidate's fault."""


def grader_outage(error: str | None) -> bool:
    """Whether an error is a grader's transport failing (a model-graded reward's judge unreachable, timing out,
    rate-limited): infrastructure, not the candidate's code (autoenv.child.judge_routing)."""
    return bool(error) and OUTAGE.search(error or "") is not None


MISMATCH = re.compile(r"the offline grader could not tell what form to answer in|judge returned no (?:[\w/ -]+ )?verdict|"
                      r"judge returned no parseable structured output")
"""A grader and its reward disagreeing on the verdict's form: the built-in grader found no form in the request
(autoenv.core.messages.GRADER_UNSURE), or verifiers' judge could not parse the grader's answer (`judge_verdict`)."""


def grader_mismatch(error: str | None) -> bool:
    """Whether an error is a grader/format mismatch: the harness's limit offline, never the candidate's error
    (verifiers raises it so that a judge failure is not scored against the model)."""
    return bool(error) and MISMATCH.search(error or "") is not None


def _error_kind(errors: list[dict]) -> str:
    types = {e.get("type", "") for e in errors}
    if any(UNMATCHED in str(e.get("message", "")) for e in errors):
        return "env_error"
    if any(grader_outage(f"{e.get('type', '')}: {e.get('message', '')}") for e in errors):
        return "provider_error"  # a model-graded reward's grader unreachable: infrastructure
    if any(grader_mismatch(str(e.get("message", ""))) for e in errors):
        return "provider_error"  # the grader's verdict in a form the reward could not read: not the env's error
    return "provider_error" if types & PROVIDER_ERRORS else "env_error"


def _error_text(errors: list[dict]) -> str | None:
    if not errors:
        return None
    first = errors[0]
    return excerpt(said(first.get("type", "Error"), first.get("message", ""), first.get("traceback")), 500)


def said(kind: str, message: str | None, traceback: str | None = None) -> str:
    """`Type: message`; an exception raised with no message (a bare `TimeoutError()`) says where it was raised."""
    if (message or "").strip():
        return f"{kind}: {message}"
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', traceback or "")
    where = f" at {Path(frames[-1][0]).name}:{frames[-1][1]} in {frames[-1][2]}" if frames else ""
    hint = " (a call that ran past its own deadline)" if "Timeout" in kind else ""
    return f"{kind} raised with no message{where}{hint}"


def _opt(value) -> str | None:
    return None if value is None else str(value)


def read_retries(path: Path) -> dict[str, int]:
    """The rollouts stage's client_retries.json, validated ({} when it wrote none): the child writes it next to the
    candidate's code, so anything but {role: a count} is an AutoEnvError, never a number in the record."""
    if not path.is_file():
        return {}
    try:
        return _RETRIES.validate_python(load_json(path, "client retries ({role: a count})", "rollouts", "outputs"))
    except ValidationError as e:
        raise invalid(e, "client retries ({role: a count})", "rollouts", "outputs", str(path)) from None
