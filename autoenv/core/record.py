"""The evaluation record: one typed ledger entry and its parts, with its schema and its history.

Every command reads this record (`autoenv log`, `show`, the verdict's baseline, the
judge, the feedback file), so it is a typed artifact with a schema rather than a dict
that each reader digs into: the stages produce these objects, `ledger` alone turns them
into JSON lines, and `read_entries()` hands them back typed. `schema/entry.schema.json`
is generated from these models (`python -m autoenv.core.record`) so tools outside Python can
read the ledger; a test keeps it current.

History: version 1 (the first landed harness) stored per-task rows as positional
`[sum, n, disagree]` lists, an empty `rl_readiness` on failures, and `passed`/`failed`
beside the gate findings. Version 2 had no `baseline` verdict (a first evaluation was
`keep`). Version 3 had no run base (`run_base`, `rules`, `tampered`), no `tampered`
verdict, no `ledger_check` and no eval cache (`cache_key`, `cached_from`) and no resume (`reused_rollouts`).
Version 4 recorded a cache hit as a copy of the evaluation it reused (its stats and its verdict, so a
second `baseline` or `keep`); version 5 records it as a pointer: verdict `cached`, no stats of its own,
`cached_from` naming the source, which every reader follows (autoenv.run.cache.resolve). Version 5 also
adds `environment` (an `--env` evaluation, recorded apart from the run), the cached prompt tokens and the
per-model concurrency. `Entry.from_json` upgrades older entries on read (a version-4 cache hit reads as
a `cached` pointer); the line on disk is never rewritten (the hash chain covers it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, model_validator

SCHEMA_VERSION = 5
SCHEMA_FILE = Path(__file__).parent / "schema" / "entry.schema.json"

Role = Literal["target", "strong"]
ROLES: tuple[Role, Role] = ("target", "strong")
VerdictKind = Literal["baseline", "keep", "discard", "inconclusive", "crash", "tampered", "cached"]
KEPT: tuple[VerdictKind, ...] = ("baseline", "keep")
"""Verdicts that make an entry a reference later evaluations of its run are compared with."""
Outcome = Literal["ok", "provider_error", "timeout", "env_error"]
GateStatus = Literal["pass", "warn", "fail", "skip"]


class Part(BaseModel):
    """Base of every record part: immutable, and unknown keys are an error, never ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class TaskRow(Part):
    """One task's scored rollouts, enough to compare evaluations without their traces."""

    sum: float = Field(description="Sum of the task's scored rewards.")
    n: int = Field(description="Number of scored rollouts of the task.")
    disagree: bool = Field(description="At least two scored rollouts whose rewards differ.")


class Group(Part):
    """Scored rollouts of one difficulty or category."""

    n: int = Field(description="Scored rollouts in the group.")
    mean: float | None = Field(description="Their mean reward.")


class ErrorCounts(Part):
    """Rollouts that were not scored, by cause; never averaged in as zeros."""

    provider_error: int = Field(0, description="The model endpoint failed (HTTP errors, unreachable, cut stream).")
    timeout: int = Field(0, description="The rollout hit budget.rollout_timeout.")
    env_error: int = Field(0, description="The candidate failed: a reward raised or returned a non-number, a tool died.")

    @property
    def total(self) -> int:
        return self.provider_error + self.timeout + self.env_error

    def rate(self, kind: Outcome, rollouts: int) -> float:
        """Share of `rollouts` that ended with `kind`."""
        return getattr(self, kind) / rollouts if rollouts else 0.0


class ModelStats(Part):
    """One model's results over the evaluation's sampled tasks."""

    model: str = Field(description="Model name as sent to the endpoint (a policy name offline).")
    rollouts: int = Field(description="Rollouts run, errored ones included.")
    scored: int = Field(description="Rollouts that ended ok with a reward.")
    mean: float | None = Field(description="Mean reward of the scored rollouts.")
    ci: tuple[float, float] | None = Field(description="95% interval of the mean from a cluster bootstrap over tasks.")
    std: float | None = Field(description="Standard deviation of the scored rewards.")
    solve_rate: float | None = Field(description="Share of scored rollouts reaching bands.solve_threshold.")
    max_reward: float | None = Field(description="Sum of the positive reward weights, when every score lies in [0, 1].")
    normalized_mean: float | None = Field(description="mean / max_reward.")
    tasks: int = Field(description="Distinct tasks rolled out.")
    disagree_share: float | None = Field(
        description="Share of tasks with >= 2 scored rollouts whose rewards differ (what GRPO learns from).")
    errors: ErrorCounts = Field(default_factory=ErrorCounts, description="Unscored rollouts by cause.")
    components: dict[str, float | None] = Field(default_factory=dict,
                                                description="Mean score of each reward function (unweighted).")
    by_difficulty: dict[str, Group] = Field(default_factory=dict, description="Scored rollouts by task difficulty.")
    by_category: dict[str, Group] = Field(default_factory=dict, description="Scored rollouts by task category.")
    input_tokens: int = Field(0, description="Prompt tokens over all rollouts, the provider's cached ones included.")
    cached_input_tokens: int = Field(0, description="Of `input_tokens`, those the provider served from its prompt "
                                     "cache (`usage.prompt_tokens_details.cached_tokens`); priced at "
                                     "[role.price] cached_input when set.")
    output_tokens: int = Field(0, description="Completion tokens over all rollouts.")
    cost_usd: float | None = Field(None, description="Priced with [role.price]; None when unpriced or offline.")
    client_retries: int | None = Field(
        None, description="Requests the chat program's OpenAI client sent again (429, 5xx, dropped connection), "
        "smoke attempts included; None when not observed (verifiers' stock harness runs the client in its own process).")
    mean_seconds: float | None = Field(None, description="Mean rollout wall time.")
    p90_seconds: float | None = Field(None, description="90th percentile rollout wall time.")
    per_task: dict[str, TaskRow] | None = Field(
        default_factory=dict,
        description="Per-task rows keyed by a short task id; None in entries from before per-task tables.")

    def error_rate(self, kind: Outcome) -> float:
        return self.errors.rate(kind, self.rollouts)


class Readiness(Part):
    """Where the evaluation stands against the wanted state."""

    target_in_band: bool = Field(description="Target mean inside [bands.target_min, bands.target_max].")
    strong_above_floor: bool = Field(description="Strong mean at or above bands.strong_min.")
    target_std: float | None = Field(description="Spread of the target's rewards.")
    learnable_share: float | None = Field(description="The target's disagree_share.")
    distance: float | None = Field(description="Target outside its band plus strong below its floor (0 = wanted).")
    ready: bool = Field(description="In band, above the floor, and learnable_share >= bands.learnable_min.")


class Verdict(Part):
    """The decision against the run's last kept entry (or the run's baseline) and why."""

    verdict: VerdictKind = Field(
        description="baseline (the run's first evaluation: its reference), keep, discard, inconclusive, crash, "
                    "tampered (protected files differ from the run base; never kept, no model called), or cached "
                    "(a pointer to the evaluation of the same candidate named by `cached_from`; never kept).")
    reason: str = Field(description="One paragraph a person can read, with the intervals behind the decision.")
    compared_to: str | None = Field(None, description="Commit of the kept entry of the same run this one was compared with.")


class StrongModel(Part):
    """The seed's summary of the strong model."""

    model: str | None = Field(None, description="The strong model's name.")
    mean: float | None = Field(None, description="Its mean reward.")
    solvable: bool | None = Field(None, description="Strong mean at or above its floor.")


class Budget(Part):
    """What the evaluation was allowed to spend ([budget] and the seed)."""

    examples: int = Field(description="Tasks sampled per model.")
    rollouts_per_example: int = Field(description="Rollouts per task and model.")
    max_concurrent: int = Field(description="Rollouts in flight at once per model (before schema 5: across both).")
    max_concurrent_total: int | None = Field(None, description="Rollouts in flight at once across both models "
                                             "(None: entries from before this field).")
    role_concurrent: dict[str, int] = Field(default_factory=dict, description="Each model's own limit, per role.")
    rollout_timeout: float = Field(description="Seconds before a rollout is stopped.")
    max_turns: int = Field(description="Model turns per rollout.")
    seed: int = Field(description="Seeds the task sample and the scripted policies.")
    examples_run: int | None = Field(None, description="Tasks the rollouts sampled: fewer than `examples` when the "
                                     "taskset holds fewer (None: no rollouts, or an entry from before this field).")


class Environment(Part):
    """An environment evaluated with `autoenv eval --env`: not the run's candidate, recorded apart."""

    id: str = Field(description="Its taskset id (the package's [project] name, or the installed id).")
    content_hash: str = Field(description="SHA-256 of the package's files (an installed id: of its id and version).")
    source: str = Field(description="The directory or id given to --env.")

    @property
    def key(self) -> str:
        """`<id>@<first 12 of the hash>`: how log, report and the outputs folder name it."""
        return f"{self.id}@{self.content_hash[:12]}"


class ForwardedRoute(Part):
    """What one model route of the harness's forwarder passed to the provider (autoenv.sandbox.forwarder)."""

    model: str = Field(description="The seat's model: every forwarded request named it.")
    requests: int = Field(0, description="Requests forwarded to the provider with the key.")
    answered: int = Field(0, description="Of those, answered with a 2xx.")
    prompt_tokens: int = Field(0, description="Prompt tokens the provider reported in `usage`.")
    cached_tokens: int = Field(0, description="Prompt tokens it reported served from its cache.")
    completion_tokens: int = Field(0, description="Completion tokens it reported.")
    unmetered: int = Field(0, description="Answers (2xx) whose usage the forwarder could not read.")
    local: int = Field(0, description="Requests answered by the forwarder itself (GET models), never forwarded.")
    canaries: int = Field(0, description="Of `requests`, canary rollouts' requests the forwarder answered itself with "
                          "a content-free reply (autoenv.endpoint.canaries), never forwarded.")
    limit: int | None = Field(None, description="Requests the plan allows this route (beyond: refused).")
    max_tokens: int | None = Field(None, description="The seat's max_tokens every request was clamped to.")
    cost_usd: float | None = Field(None, description="The tokens priced with the model's price (None: unpriced).")


class ForwardedRequest(Part):
    """A request the forwarder refused or rewrote: something the harness's own rollouts never send."""

    action: Literal["refused", "clamped", "capped"] = Field(
        description="refused (never sent: not a rollout's), clamped (sent with the seat's max_tokens), or capped "
                    "(never sent: the run's max_usd was spent; not the candidate's doing).")
    method: str = Field(description="The HTTP method.")
    path: str = Field(description="The path asked for (the token, were it in it, masked).")
    route: str = Field("", description="The model route (role) the path named.")
    model: str | None = Field(None, description="The model the body named.")
    reason: str = Field(description="Why, as the 403 (or the clamp) said it.")


class Forwarded(Part):
    """The forwarder's account of one evaluation: per route what reached the provider, and what it refused."""

    routes: dict[str, ForwardedRoute] = Field(default_factory=dict, description="Per real model route (role).")
    requests: list[ForwardedRequest] = Field(default_factory=list,
                                             description="Refused or clamped requests (the first 100).")
    refused: int = Field(0, description="Requests refused (with the token: the candidate's).")
    clamped: int = Field(0, description="Requests whose max_tokens was clamped to the seat's.")
    capped: int = Field(0, description="Requests refused because the run's max_usd was spent (autoenv run).")
    unauthorized: int = Field(0, description="Requests without the evaluation's token (refused, anyone's).")

    @property
    def misused(self) -> bool:
        """The evaluation's token was used for something other than the seat's rollouts."""
        return bool(self.refused or self.clamped)

    def summary(self) -> str:
        """`2 refused, 1 clamped: GET /target/files (not a rollout route); ...` (the first three)."""
        misuse = [r for r in self.requests if r.action != "capped"]
        shown = "; ".join(f"{r.method} {r.path} ({r.action}: {r.reason})" for r in misuse[:3])
        more = f"; and {len(misuse) - 3} more" if len(misuse) > 3 else ""
        return f"{self.refused} refused, {self.clamped} clamped: {shown}{more}"


class RescoredTask(Part):
    """One task of one role in a rescored evaluation: its mean reward under the source's rewards and under this
    commit's, over the same stored replies."""

    role: str = Field(description="target or strong.")
    key: str = Field(description="The task's key, as its traces record it.")
    idx: int | None = Field(None, description="The task's index in the taskset.")
    old: float | None = Field(None, description="Mean reward of the task's scored rollouts in the source evaluation.")
    new: float | None = Field(None, description="Mean reward of the same rollouts under this commit's rewards.")


class CandidateInfo(Part):
    """What the install stage and the worker saw of the candidate."""

    taskset: str | None = Field(None, description="The exported vf.Taskset class.")
    env: str | None = Field(None, description="The exported vf.Env class, if any.")
    task: str | None = Field(None, description="The taskset's task class.")
    oracle_hook: bool | None = Field(None, description="The task defines `oracle(self, messages)`.")
    import_seconds: float | None = Field(None, description="Import time in a fresh process.")
    tasks: int | None = Field(None, description="Tasks the taskset loaded.")
    load_seconds: float | None = Field(None, description="Time to load them.")
    taskset_id: str | None = Field(None, description="The verifiers taskset id evaluated ([candidate] taskset).")
    env_id: str | None = Field(None, description="The verifiers env id, when the vf.Env lives in another package.")
    reward_range: list[float] | None = Field(None, description="The [low, high] range of every reward score the task "
                                             "declares (`reward_range`); statistics and probes normalise scores to "
                                             "[0, 1] by it. None: the documented [0, 1].")


class GateFinding(Part):
    """One check or probe judged against config.toml."""

    name: str = Field(description="The check, or `probe <name>`.")
    status: GateStatus = Field(description="pass, warn, fail, or skip (not applicable).")
    message: str = Field(description="What was measured against which threshold.")
    data: dict[str, Any] = Field(default_factory=dict, description="Measurements behind the message.")


class BestReply(Part):
    """A probe reply that scored, for the feedback's evidence."""

    idx: int | None = Field(description="The task's index in the taskset.")
    key: str = Field(description="The task's key.")
    reward: float = Field(description="What the reply earned.")
    reply: str = Field(description="The reply, cut to 200 characters.")


class ProbeSummary(Part):
    """What one scripted policy earned."""

    description: str = Field(description="What the policy replies.")
    mean: float | None = Field(description="Mean reward of its scored replies.")
    tasks: int = Field(description="Tasks it was played on.")
    scored: int = Field(description="Replies that were scored.")
    skipped: int = Field(description="Tasks where it does not apply (e.g. no answer to swap).")
    errors: int = Field(description="Replies that hit an environment or provider error.")
    harvested: dict[str, str] = Field(default_factory=dict, description="Reward components the probe earned.")
    best: list[BestReply] = Field(default_factory=list, description="Its best-scoring replies (evidence).")
    of_oracle: float | None = Field(None, description="mean / the oracle's mean.")


class Harvest(Part):
    """A reward component an exploit probe earned above its share, with the evidence."""

    component: str = Field(description="The `@vf.reward` component.")
    probe: str = Field(description="The probe that harvested it (`derived <name>` for probes derived from rollouts).")
    score: float = Field(description="The component's mean score on the probe's replies.")
    idx: int | None = Field(None, description="The task of the best-scoring reply.")
    reply: str = Field("", description="That reply, cut to 200 characters.")


class ExploitMatrix(Part):
    """For each reward component, the mean score each probe harvested from it."""

    weights: dict[str, float] = Field(default_factory=dict, description="Each component's weight.")
    scores: dict[str, dict[str, float]] = Field(default_factory=dict, description="probe -> component -> mean score.")
    harvests: list[Harvest] = Field(default_factory=list, description="Components harvested above their share.")
    limit: float = Field(0.1, description="probes.exploit_max when it was built: the share of the reference's score a "
                         "probe may harvest from a component.")


class GateReport(Part):
    """The model-free gates: checks of the package and dataset, then the probes."""

    findings: list[GateFinding] = Field(default_factory=list, description="Every check and probe, in order.")
    probes: dict[str, ProbeSummary] = Field(default_factory=dict, description="What each scripted policy earned.")
    mode: Literal["in-process", "rollouts"] | None = Field(None, description="How the probes were scored.")
    seconds: float | None = Field(None, description="Wall time of the gates.")
    matrix: ExploitMatrix | None = Field(None, description="The exploit matrix per reward component (autoenv.gates.matrix).")

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in ("passed", "failed")}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed(self) -> list[str]:
        """`name: message` of every failed finding."""
        return [f"{f.name}: {f.message}" for f in self.findings if f.status == "fail"]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """No finding failed."""
        return not self.failed

    @property
    def untested(self) -> list[str]:
        """`name: message` of the findings that say too few probes could be played (autoenv.gates.coverage)."""
        return [f"{f.name}: {f.message}" for f in self.findings if f.data.get("coverage") == "untested"]


class Hack(Part):
    """A way to score without doing the task."""

    description: str = Field(description="What earns reward undeservedly, and how.")
    evidence: list[str] = Field(description="Rollout ids or probe/task references.")


class Priority(Part):
    """One thing to fix, most important first."""

    issue: str = Field(description="What is wrong.")
    fix: str = Field(description="A concrete change that fixes it.")


class SpecFidelity(Part):
    """How far the environment does what spec.md asks."""

    score: int | None = Field(ge=0, le=10, description="0-10; None when not assessed.")
    gaps: list[str] = Field(description="What the spec asks for that the environment does not do.")


class RewardFaithfulness(Part):
    """Whether high rewards were deserved."""

    suspected_hacks: list[Hack] = Field(description="Ways to score without doing the task.")


class RlAssessment(Part):
    """Whether the target model can learn from the environment."""

    assessment: str = Field(description="One-line judgement.")
    concerns: list[str] = Field(description="What stands in the way.")


class DatasetQuality(Part):
    """Diversity, difficulty mix and ambiguity of the tasks."""

    assessment: str = Field(description="One-line judgement.")
    issues: list[str] = Field(description="Problems found in the tasks.")


class Findings(Part):
    """The judge's structured findings (the JSON schema the judge must answer in)."""

    summary: str = Field(description="A short paragraph for the agent.")
    spec_fidelity: SpecFidelity = Field(description="How far the environment does what the spec asks.")
    reward_faithfulness: RewardFaithfulness = Field(description="Undeserved rewards and missed correct answers.")
    rl_readiness: RlAssessment = Field(description="Can the target model learn from it.")
    dataset_quality: DatasetQuality = Field(description="Diversity, difficulty mix, ambiguity.")
    priorities: list[Priority] = Field(description="What to fix, most important first.")


class JudgeResult(Part):
    """What the judge returned and what it cost; a failed judge keeps the offline findings."""

    backend: str = Field(description="claude, anthropic or offline.")
    findings: Findings = Field(description="The findings rendered into the feedback (offline ones when it failed).")
    ok: bool = Field(True, description="The configured judge delivered.")
    error: str | None = Field(None, description="Why the configured judge failed.")
    model: str | None = Field(None, description="The judge's model.")
    turns: int | None = Field(None, description="Model turns used.")
    input_tokens: int | None = Field(None, description="Prompt tokens used.")
    output_tokens: int | None = Field(None, description="Completion tokens used.")
    cost_usd: float | None = Field(None, description="What the judge spent, also when it failed.")
    seconds: float | None = Field(None, description="Wall time of the judge.")
    permission_denials: list[Any] = Field(default_factory=list,
                                          description="Tool uses the Claude Code CLI refused (reads outside the workspace).")


class Entry(Part):
    """One evaluation of one commit: the line `feedback_log.jsonl` holds for it."""

    schema_version: int = Field(SCHEMA_VERSION, description="Version the entry was written with.")
    commit: str = Field(description="Full SHA of the evaluated commit.")
    timestamp: str = Field(description="When it was recorded, ISO 8601 UTC.")
    description: str = Field("", description="The agent's claim about the change (unverified).")
    eval_success: bool = Field(description="False when the evaluation crashed.")
    stats: dict[Role, ModelStats] = Field(default_factory=dict, description="Per role; empty when no model ran.")
    rl_readiness: Readiness | None = Field(None, description="Where it stands against the wanted state; None for crashes.")
    strong_model: StrongModel = Field(default_factory=StrongModel, description="The seed's strong-model summary.")
    verdict: Verdict = Field(description="baseline / keep / discard / inconclusive / crash / tampered, and why.")
    run_id: str = Field("", description="Time-based id of this evaluation run.")
    branch: str | None = Field(None, description="Branch checked out at evaluation (autoenv/<tag>).")
    offline: bool = Field(False, description="Scripted policies stood in for the models.")
    budget: Budget | None = Field(None, description="What the evaluation was allowed to spend.")
    candidate: CandidateInfo = Field(default_factory=CandidateInfo, description="What was evaluated.")
    timings: dict[str, float] = Field(default_factory=dict, description="Seconds per stage.")
    gates: GateReport | None = Field(None, description="The model-free gates; None when they did not run.")
    outputs: str = Field("", description="Where traces and logs are, relative to the repository when inside it.")
    failed_stage: str | None = Field(None, description="Stage that failed, for crashes.")
    sandbox: str | None = Field(None, description="Where the candidate ran: bwrap (read-only repository, "
                                "$HOME hidden) or none (unconfined); None when it never ran.")
    forwarded: Forwarded | None = Field(None, description="What the harness's forwarder passed to the real models "
                                        "and what it refused (autoenv.sandbox.forwarder); None: no real model.")
    error: str | None = Field(None, description="The failure, for crashes.")
    warnings: list[str] = Field(default_factory=list,
                                description="What was wrong around the candidate, shown in the feedback "
                                            "(spec.md missing or empty).")
    run_base: str | None = Field(None, description="Commit that wrote the run base the rules were checked against "
                                                   "(refs/autoenv/runs/<tag>); None: no run base.")
    rules: str = Field("", description="What the tamper check found, in words (\"no run base: rules not checked\").")
    tampered: list[str] = Field(default_factory=list,
                                description="Protected files that differ from the run base, `path (how)`.")
    ledger_check: str = Field("", description="What `autoenv verify` found before this evaluation (chain and notes).")
    cache_key: str | None = Field(None, description="SHA-256 of the candidate's git tree, spec.md, the effective "
                                                    "config and the models (autoenv.run.cache).")
    reused_rollouts: int = Field(0, description="Rollouts kept from an interrupted evaluation of this commit "
                                               "(resumed, not run again).")
    cached_from: str | None = Field(None, description="Commit whose evaluation this entry reuses (same cache key); "
                                                      "no model was called.")
    environment: Environment | None = Field(None, description="Set for `autoenv eval --env`: the environment "
                                            "evaluated instead of the run's candidate; such entries are compared "
                                            "only with evaluations of the same environment content.")
    rescored_from: str | None = Field(None, description="Commit whose stored rollouts this evaluation scored again "
                                      "with its own rewards (autoenv.evaluation.rescore); no model was called.")
    rescored: list[RescoredTask] = Field(default_factory=list, description="Per task and role, old and new mean "
                                         "reward of a rescored evaluation.")
    rescore_refused: str | None = Field(None, description="Why the rollouts were run in full although an evaluation "
                                        "of the run could have been rescored (None: rescored, or nothing to rescore).")
    judge: JudgeResult | None = Field(None, description="The judge's findings and spend; None for crashes.")
    agent_cost_usd: float | None = Field(None, description="USD the coding agent had spent in this `autoenv run` "
                                         "when the entry was recorded (autoenv.driver); None without a driver.")
    prev_hash: str = Field("", description="SHA-256 of the previous ledger line (hash chain).")

    @property
    def kept(self) -> bool:
        """A reference for later evaluations of its run: kept, or the run's baseline (never a cache
        hit, which points at its source, nor an evaluation of another environment)."""
        return self.verdict.verdict in KEPT and self.cached_from is None and self.environment is None

    @property
    def feedback_name(self) -> str:
        """Its feedback file, under the feedback folder: `<commit>.md`, or for an `--env` evaluation
        `env/<id>@<hash>/<run_id>.md`: one file per evaluation, so two evaluations of the same environment at
        one commit never share one, and none is ever a run commit's file."""
        if self.environment is None:
            return f"{self.commit}.md"
        return f"env/{self.environment.key}/{self.run_id or self.timestamp.replace(':', '')}.md"

    def to_json(self) -> str:
        """One ledger line (no newline)."""
        return json.dumps(self.model_dump(mode="json"), allow_nan=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        """An entry from its JSON object, upgrading older schema versions."""
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise RecordError(f"schema_version {version!r} is newer than this harness reads ({SCHEMA_VERSION})")
        if version == 1:
            data = upgrade_v1(data)
        if version < 5:
            data = upgrade_v4(data)
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise RecordError(f"{where}: {first['msg']}") from None


class RecordError(ValueError):
    """A ledger line that is not a valid entry; the ledger adds the file and line."""


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 entry in the version-2 shape (the schema changed its form, not its facts)."""
    out = dict(data)
    stats = {}
    for role, raw in (out.get("stats") or {}).items():
        s = dict(raw)
        if "per_task" in s:
            s["per_task"] = {k: {"sum": v[0], "n": v[1], "disagree": bool(v[2]) if len(v) > 2 else False}
                             for k, v in s["per_task"].items()}
        else:
            s["per_task"] = None  # evaluated before per-task tables: never a verdict's baseline
        stats[role] = s
    out["stats"] = stats
    if not out.get("rl_readiness"):
        out["rl_readiness"] = None
    if out.get("gates") == {}:
        out["gates"] = None
    for key in ("verdict",):
        if isinstance(out.get(key), dict) and out[key].get("compared_to") is None:
            out[key] = {k: v for k, v in out[key].items() if k != "compared_to"}
    return out


def upgrade_v4(data: dict[str, Any]) -> dict[str, Any]:
    """A cache hit written as a copy (version <= 4) read as the pointer it is: verdict `cached`.

    Its copied stats stay (they equal the source's), but readers take the source's."""
    if not data.get("cached_from") or not isinstance(data.get("verdict"), dict):
        return data
    return {**data, "verdict": {**data["verdict"], "verdict": "cached"}}


def clean_float(value: float | None) -> float | None:
    """None for NaN/inf: JSON has no such numbers, and the ledger refuses them."""
    return None if value is None or not math.isfinite(value) else value


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a ledger entry, as committed under autoenv/core/schema/."""
    schema = Entry.model_json_schema(mode="serialization")
    schema["title"] = f"AutoEnv ledger entry (schema_version {SCHEMA_VERSION})"
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(schema_text())
    print(f"wrote {SCHEMA_FILE}")
