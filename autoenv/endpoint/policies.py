"""Scripted policies: deterministic stand-ins for a model, chosen by model name.

A model name is `policy` or `policy:param` (e.g. `noisy-oracle:0.45`). Policies that
need the candidate's reference behaviour ask an `OracleBook` (see oracle.py) for the
oracle's next message of the task the request's rollout plays (`ChatRequest.task`, which the
harness gives; else found by text); the rest need nothing. Where the text fallback matches
several tasks, a policy that needs the task's answer answers 409 with the reason
(autoenv.core.messages.AMBIGUOUS) instead of guessing. Randomness is seeded per rollout from the
server seed and the request's replayable rollout id (the task, the model and the rollout's ordinal among
them, ChatRequest.rollout; else its `X-Session-ID`), so a run can be replayed.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Protocol

from autoenv.core.messages import ChatRequest, Reply, message_text, seeded_rng, tool_names
from autoenv.endpoint.grader import GraderUnsure, grade
from autoenv.gates.oracle import AmbiguousTask
from autoenv.gates.probes import EXPLOITS, NEEDS_ORACLE, REFUSAL, probe_reply


class OracleSource(Protocol):
    answers: list[str]

    def find(self, messages: list[dict], key: str | None = None) -> Any | None: ...

    def next_message(self, messages: list[dict], key: str | None = None) -> Reply | None: ...

    def task_key(self, messages: list[dict], key: str | None = None) -> str | None: ...


NO_MATCH = "no task of the candidate matches this conversation's first user message"
ORACLE_PLAYERS = frozenset({"oracle", "noisy-oracle", *NEEDS_ORACLE})
"""Policies that replay the candidate's oracle hook: without one they can only send empty replies."""


def plays_the_oracle(model: str) -> bool:
    """Whether the scripted policy called `model` (e.g. `noisy-oracle:0.45`) replays the oracle hook."""
    return model.partition(":")[0] in ORACLE_PLAYERS


class PolicyError(Exception):
    """A request the policy cannot serve (HTTP 400/404 with this message)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Policies:
    """The registry the endpoint serves: model name -> reply."""

    def __init__(self, oracle: OracleSource | None = None, seed: int = 0):
        self.oracle = oracle
        self.seed = seed
        self._handlers: dict[str, tuple[Callable[[ChatRequest, str | None], Reply], str]] = {
            "oracle": (self._oracle, "plays the candidate's oracle hook"),
            "noisy-oracle": (
                self._noisy_oracle,
                "noisy-oracle:P plays the oracle in a share P of rollouts (per-task "
                "rates drawn around P), else gives up",
            ),
        }
        for probe, doc in EXPLOITS.items():
            self._handlers[probe] = (self._probe, f"exploit probe: {doc}")
        self._handlers["choice"] = (lambda request, param: choice(request, self.seed), CHOICE_DOC)
        self._handlers["gullible-grader"] = (
            gullible_grader, "a scripted grader for model-graded rewards, open to injection on purpose: "
            "the passing verdict when the graded reply's one <answer> tag (else its quoted response) equals the "
            "`Reference answer`, or when the reply claims to be correct; else the failing one, answered in the form "
            "the request asks for (yes/no, BLOCK/ALLOW, lettered options, Score: N/10, a JSON field); 422 where it "
            "names none")

    def serve(self, name: str, handler: Callable[[ChatRequest, str | None], Reply], doc: str) -> None:
        """Serve one more scripted policy under `name` (e.g. the derive stage's `replay`)."""
        self._handlers[name] = (handler, doc)

    def names(self) -> dict[str, str]:
        return {name: doc for name, (_, doc) in self._handlers.items()}

    def reply(self, request: ChatRequest) -> Reply:
        name, _, param = request.model.partition(":")
        if name not in self._handlers:
            raise PolicyError(
                f"unknown scripted policy {request.model!r}; served: "
                + ", ".join(sorted(self._handlers)),
                status=404,
            )
        handler, _ = self._handlers[name]
        try:
            return handler(request, param or None)
        except AmbiguousTask as e:  # no rollout identity and several tasks match: never guess which
            raise PolicyError(f"{e}; send the task's key as the X-AutoEnv-Task header", status=409) from None

    def _need_oracle(self, request: ChatRequest) -> Reply:
        if self.oracle is None:
            raise PolicyError(
                "the oracle policies need a candidate: start the endpoint with "
                "--candidate DIR (autoenv serve) or let autoenv eval --offline embed it"
            )
        reply = self.oracle.next_message(request.messages, request.task)
        if reply is None:
            raise PolicyError(NO_MATCH, status=404)
        return reply

    def _oracle(self, request: ChatRequest, param: str | None) -> Reply:
        return advertised_names(self._need_oracle(request), request.tools)

    def _probe(self, request: ChatRequest, param: str | None) -> Reply:
        name = request.model.partition(":")[0]
        try:
            task = self.oracle.find(request.messages, request.task) if self.oracle is not None else None
        except AmbiguousTask:
            if name in NEEDS_ORACLE:
                raise
            task = None  # a probe that needs no answer plays without knowing the task
        oracle = None
        if name in NEEDS_ORACLE:
            oracle = advertised_names(self._need_oracle(request), request.tools)
        answer = getattr(getattr(task, "data", None), getattr(self.oracle, "answer_field", None) or "answer", None)
        strategy = None  # `near-miss:2`: the third strategy the audit listed for the probe (OracleBook.strategies)
        if param is not None and param.isdigit():
            listed = (getattr(self.oracle, "strategies", None) or {}).get(name) or []
            if int(param) >= len(listed):
                return Reply()
            strategy = listed[int(param)]
        fields_of = getattr(self.oracle, "fields_of", None)
        reply = probe_reply(
            name, oracle=oracle, answer=None if answer is None else str(answer),
            answers=getattr(self.oracle, "answers", []), messages=request.messages, tools=request.tools,
            key=getattr(task, "key", None) or request.task or request.rollout, seed=self.seed, constant=getattr(self.oracle, "constant", None),
            surface=getattr(self.oracle, "surface", None), strategy=strategy,
            fields=fields_of(task) if name == "field-copy" and task is not None and callable(fields_of) else None,
        )
        return reply if reply is not None else Reply()

    def _noisy_oracle(self, request: ChatRequest, param: str | None) -> Reply:
        try:
            p = float(param) if param is not None else 0.5
        except ValueError:
            raise PolicyError(f"noisy-oracle takes a probability, e.g. noisy-oracle:0.4; got {param!r}")
        if not 0 <= p <= 1:
            raise PolicyError(f"noisy-oracle probability must be in [0, 1], got {p}")
        key = None
        if p > 0:
            # Fail the same way for every session when the oracle cannot be played at all.
            if self.oracle is None:
                self._need_oracle(request)
            key = self.oracle.task_key(request.messages, request.task) if self.oracle is not None else None
            if key is None:
                raise PolicyError(NO_MATCH, 404)
        # Real models find some tasks easier than others: each task gets its own success
        # rate from a Beta distribution centred on p, so rollouts of a task agree more
        # often than rollouts of different tasks.
        task_rate = p if p in (0.0, 1.0) else seeded_rng(self.seed, "task", key).betavariate(4 * p, 4 * (1 - p))
        succeeds = seeded_rng(self.seed, "rollout", request.rollout).random() < task_rate
        if succeeds:
            return advertised_names(self._need_oracle(request), request.tools)
        return Reply(content="I am not sure how to solve this.")


CHOICE_DOC = ("a seeded pick among the words the last user message offers as a choice (`one word: bet or fold`, "
              "`A, B or C`), answered in the offered form (`[check] or [bet]` -> `[bet]`): a legal move without knowing "
              "the game; a refusal when it offers none")
CHOICE_OPTIONS = re.compile(r"\b(\w[\w-]*(?:\s*,\s*\w[\w-]*)*)\s*,?\s+or\s+(\w[\w-]*)\b")
BRACKETED = re.compile(r"(\[[\w-]+\](?:\s*(?:,|or|,\s*or)\s*\[[\w-]+\])+)")
"""Options written in the form the reply must use (`[check] or [bet]`): the pick is answered in that form."""


def choice(request: ChatRequest, seed: int = 0) -> Reply:
    """The fixed reference policy of multi-seat probing where the task has no oracle hook (see CHOICE_DOC):
    the same message gets the same pick for a given seed, so a probe run replays."""
    last = next((message_text(m) for m in reversed(request.messages) if m.get("role") == "user"), "")
    bracketed = BRACKETED.findall(last)
    if bracketed:  # the offered form is the reply's form: `[check] or [bet]` is answered `[check]`
        options = re.findall(r"\[[\w-]+\]", bracketed[-1])
        return Reply(content=seeded_rng("choice", seed, last).choice(options))
    found = CHOICE_OPTIONS.findall(last)
    if not found:
        return Reply(content=REFUSAL)
    head, tail = found[-1]
    options = [w.strip() for w in head.split(",")][-5:] + [tail]
    return Reply(content=seeded_rng("choice", seed, last).choice(options))


GRADER_URL_VAR = "AUTOENV_GRADER_URL"
"""Set in the child process to the embedded endpoint's base URL while rewards run, so a planted
model-graded example can reach the scripted `gullible-grader` without a key."""
def gullible_grader(request: ChatRequest, param: str | None) -> Reply:
    """The scripted grader (autoenv.endpoint.grader): a right/wrong verdict open to injection, answered in the form
    the grading request asks for; a request that names no form it can read is answered 422 (GRADER_UNSURE)."""
    try:
        return grade(request)
    except GraderUnsure as e:
        raise PolicyError(str(e), status=GraderUnsure.status) from None


def advertised_names(reply: Reply, tools: list[dict]) -> Reply:
    """Map the bare tool names an oracle uses (`price`) to the names the request
    advertises (a harness may prefix them with the server's name, e.g. `catalog_price`)."""
    names = tool_names(tools)
    for call in reply.tool_calls:
        if call.name in names:
            continue
        matches = [n for n in names if n.endswith(call.name) and not n[: -len(call.name)][-1:].isalnum()]
        if len(matches) == 1:
            call.name = matches[0]
    return reply
