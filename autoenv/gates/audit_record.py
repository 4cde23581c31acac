"""The audit record: what the audit stage measured, as typed models, written by the child and read by the gates.

The audit stage (autoenv.child.audit) runs inside the evaluation's child process, next to
the candidate's code; it writes `gates/audit.json` and the parent's gate rules
(autoenv.gates.rules) judge it. Like the evaluation record (autoenv.core.record) the measurement
is a typed artifact: the child builds an `AuditRecord` and writes it, the parent parses it
once with `read_audit`, and every rule reads fields (`audit.dataset.size`, `record.skipped`)
instead of digging through `.get(...)` chains. The parent never trusts the file: the child
runs candidate code, which could overwrite it or crash halfway, so a file that is not an
audit record (a missing key where one is required, a wrong type, an unknown key) is an
AutoEnvError naming the key, never a crash in a rule or a silent pass.

A field the stage did not reach is left out of the JSON (`exclude_unset`), as before the
record was typed: `probes` is absent when no probes were played (`autoenv check`), and only
`time_limits` is there when load() never returned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from autoenv.core.childfiles import load_json, validated
from autoenv.core.record import Outcome

AUDIT_FILE = "audit.json"

Score = bool | int | float | str | None
"""A reward component's score as the candidate returned it: a finite number is the contract, and anything
else is kept as it was (not coerced) so the rules can name it as the environment error it is."""


class AuditPart(BaseModel):
    """Base of every audit record part: immutable, and unknown keys are an error, never ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> str:
        """As the child writes it: only the fields it set; NaN scores kept as NaN (the rules name them)."""
        return json.dumps(self.model_dump(exclude_unset=True), indent=1)


class ModuleImport(AuditPart):
    """One module of the candidate package, imported (or recognised as a script) by the audit stage."""

    module: str = Field(description="The dotted module name.")
    ok: bool = Field(description="It imported (a script counts as ok: it is not imported).")
    error: str | None = Field(None, description="`Type: message` of the import failure.")
    traceback: str | None = Field(None, description="The tail of the import failure's traceback.")
    tool_server: bool | None = Field(None, description="The module starts a tool server (`.run()` in its source).")
    script: str | None = Field(None, description="The kind of script it is (autoenv.sandbox.scripts), not imported.")


class DatasetMeasure(AuditPart):
    """The dataset's measurements (autoenv.gates.dataset.measure); every field defaults to 'nothing found'."""

    size: int = Field(0, description="Tasks loaded (for an infinite taskset: the tasks taken).")
    distinguished_by: str = Field("prompt", description="What tells tasks apart: `prompt` (what the model sees "
                                  "of it: text, system prompt, media), `prompt and data fields`, `data fields`, or "
                                  "`prompt (N tasks without one: data fields)`.")
    data_reach: str | None = Field(None, description="How the tasks' own data fields reach the model beyond the "
                                   "prompt (a custom Env, a toolset given the task); None: only through the prompt.")
    id_fields: list[str] = Field(default_factory=list, description="Data fields taken for per-row ids (dotted "
                                 "paths), which never make a task unique.")
    duplicate_keys: int = Field(0, description="Tasks sharing a key with another.")
    duplicate_key_examples: list[str] = Field(default_factory=list, description="Some repeated keys.")
    exact_duplicates: int = Field(0, description="Tasks repeating another task exactly.")
    exact_duplicate_share: float = Field(0.0, description="exact_duplicates over size.")
    duplicate_examples: list[list[int | None]] = Field(default_factory=list, description="Groups of duplicate task idx.")
    conflicting_labels: int = Field(0, description="Prompts given to several tasks whose answers differ.")
    conflict_examples: list[list[int | str | None]] = Field(
        default_factory=list, description="`[idx, answer, idx, answer]` of some conflicting prompts.")
    near_duplicate_pairs: int = Field(0, description="Pairs of tasks at or above the similarity threshold.")
    near_duplicate_share: float = Field(0.0, description="Share of tasks in a near-duplicate pair.")
    near_duplicate_examples: list[list[int | float | None]] = Field(
        default_factory=list, description="`[idx, idx, similarity]` of some near-duplicate pairs.")
    with_answer: int = Field(0, description="Tasks with an `answer` field.")
    distinct_answers: int | None = Field(None, description="Distinct answers among them.")
    top_answer: str | None = Field(None, description="The most common answer.")
    top_answer_share: float | None = Field(None, description="Its share of the tasks with an answer; None without answers.")
    difficulty: dict[str, int] = Field(default_factory=dict, description="Tasks per `difficulty` value.")
    category: dict[str, int] = Field(default_factory=dict, description="Tasks per `category` value.")


class InfiniteTake(AuditPart):
    """An unbounded taskset: how many of its tasks were taken and measured."""

    taken: int = Field(description="Tasks taken.")
    bound: int = Field(description="checks.infinite_take.")


class GoldCheck(AuditPart):
    """verifiers' gold check (`Task.validate`) over the sampled tasks (autoenv.gates.gold)."""

    checked: int = Field(0, description="Tasks given a verdict.")
    valid: int = Field(0, description="Tasks whose reference answer validated.")
    invalid: list[int | None] = Field(default_factory=list, description="Idx of the tasks that did not validate.")
    unchecked: list[int | None] = Field(default_factory=list, description="Idx of the tasks with no verdict (None).")
    errors: list[str] = Field(default_factory=list, description="Setup or validate calls that raised.")


class SeatReference(AuditPart):
    """Who plays the seats a per-seat probe does not (autoenv.gates.seats.seat_reference)."""

    policy: str = Field(description="`oracle` or the fixed policy's name.")
    why: str = Field("", description="The reason, for people.")


class OtherSeat(AuditPart):
    """A reference seat's result in a per-seat probe's episode."""

    seat: str | None = Field(None, description="The seat's name.")
    policy: str | None = Field(None, description="The reference policy that played it.")
    reward: float | None = Field(None, description="Its total reward; None when unscored.")
    outcome: Outcome = Field("ok", description="How its rollout ended.")
    reply: str = Field("", description="The start of its last reply.")
    turns: int = Field(0, description="Turns it played.")
    failed: bool = Field(False, description="It did not play (forfeited, refused or ended first).")


class ProbeRecord(AuditPart):
    """One probe reply on one task (or its reason for being skipped), scored by the candidate's reward."""

    probe: str = Field(description="`oracle` or an exploit probe's name (autoenv.gates.probes.EXPLOITS).")
    key: str = Field(description="The task's key.")
    idx: int | None = Field(description="The task's idx (verifiers' TaskData.idx, None when unset).")
    components: dict[str, Score] = Field(default_factory=dict, description="Each reward component's score.")
    weights: dict[str, float] = Field(default_factory=dict, description="Each reward component's weight.")
    error: str | None = Field(None, description="Why scoring or the rollout failed.")
    reply: str = Field("", description="The start of the probe's reply.")
    reply_chars: int | None = Field(None, description="The reply's full length.")
    skipped: bool = Field(False, description="The probe was not played on this task (see `reason`).")
    reason: str | None = Field(None, description="Why it was skipped.")
    outcome: Outcome | None = Field(None, description="How the rollout ended (rollouts mode; absent in-process "
                                    "unless the grader was unreachable).")
    seat: str | None = Field(None, description="The seat whose trace this is (rollouts mode).")
    episode: str | None = Field(None, description="The episode's id (rollouts mode).")
    tool_calls: int | None = Field(None, description="Tool calls in the trace (rollouts mode).")
    rejected: str | None = Field(None, description="The env refused the reply by raising (autoenv.gates.rejections).")
    probed_seat: str | None = Field(None, description="The seat the probe played (per-seat probing).")
    reference: str | None = Field(None, description="The policy the other seats played (per-seat probing).")
    others: list[OtherSeat] = Field(default_factory=list, description="The reference seats' results (per-seat).")
    other_failed: bool = Field(False, description="A reference seat did not play (per-seat probing).")
    answer_is_constant: bool | None = Field(None, description="The constant probe's reply is this task's answer.")
    strategy: str | None = Field(None, description="The best strategy of a many-strategy probe.")
    strategies: int | None = Field(None, description="How many strategies it tried.")
    choices: int | None = Field(None, description="Bare option positions among them.")
    copied: str | None = Field(None, description="What prompt-copy copied on this task.")
    answer_is_copy: bool | None = Field(None, description="What it copied is this task's answer.")
    constant_in_data: bool | None = Field(None, description="The surface or search probe's constant is one of this "
                                          "task's own data values (right by the data, not judged).")
    received: bool | None = Field(None, description="Plain channel: the seat's messages held another seat's reply.")
    rule: str | None = Field(None, description="Plain channel: the words of the seat's own messages that tell it to "
                             "hide something (autoenv.gates.plain_channel.hiding_rule).")


class SearchFinalist(AuditPart):
    """A template the reward search replayed on its held-out tasks."""

    template: str = Field(description="The template in words (format, content, repeats).")
    train: float = Field(description="Its mean total reward on the training tasks.")
    held_out: float = Field(description="Its mean total reward on the held-out tasks.")
    components: dict[str, float] = Field(default_factory=dict, description="Its mean per component, held out.")
    chosen: bool = Field(False, description="The one whose held-out replies are the probe's records.")


class SearchStep(AuditPart):
    """An improvement of the search's best total on the training tasks."""

    calls: int = Field(description="Reward calls spent when it was found.")
    mean: float = Field(description="Its mean total on the training tasks.")
    template: str = Field(description="The template in words.")


class LearntFromSource(AuditPart):
    """What the gates read in the reward's source (autoenv.gates.source_reading), never ran."""

    formats: list[str] = Field(default_factory=list, description="Reply templates the rewards parse.")
    keys: list[str] = Field(default_factory=list, description="JSON keys the rewards read.")
    strings: list[str] = Field(default_factory=list, description="Comparison targets and literals (the first 20).")
    numbers: list[float] = Field(default_factory=list, description="Numbers compared with (the first 10).")


class SearchTrace(AuditPart):
    """The reward-search probe's trace (autoenv.gates.search): its material, budget and what it found."""

    material: dict[str, int] = Field(default_factory=dict, description="Dictionary entries per source.")
    formats: list[str] = Field(default_factory=list, description="The formats it searched, the learnt ones first.")
    objectives: list[str] = Field(default_factory=list, description="`total`, then the focused components.")
    focus: list[str] = Field(default_factory=list, description="Components the reference never earns in full.")
    reference_components: dict[str, float] = Field(default_factory=dict, description="The reference's mean per "
                                                   "component on the training tasks.")
    train_tasks: int = Field(0, description="Training tasks.")
    held_out_tasks: int = Field(0, description="Held-out tasks the finalists were replayed on.")
    calls: int = Field(0, description="Reward calls spent on the training tasks.")
    generations: int = Field(0, description="Generations bred.")
    templates: int = Field(0, description="Distinct templates scored.")
    seconds: float = Field(0.0, description="Wall time of the search and its replay.")
    stopped: str = Field("calls", description="What ended it: `calls`, `seconds`, `ceiling`, `exhausted` or "
                         "`nothing paid` (action plans: no plan of the first generation earned anything).")
    budget: dict[str, float] = Field(default_factory=dict, description="Its budget: reward calls and seconds.")
    steps: list[SearchStep] = Field(default_factory=list, description="Each improvement (the last 20).")
    finalists: list[SearchFinalist] = Field(default_factory=list, description="The templates replayed held out.")
    learnt: LearntFromSource | None = Field(None, description="What the reward's source gave.")


class ChannelProbe(AuditPart):
    """The plain-channel probe of a multi-seat env (autoenv.gates.plain_channel): every seat played at once."""

    strategy: str | None = Field(None, description="The strategy whose records are kept (the best on the trial).")
    tried: dict[str, float] = Field(default_factory=dict, description="Each strategy's mean on the trial tasks.")
    records: list[ProbeRecord] = Field(default_factory=list, description="Every seat's record in each episode.")


class AuditRecord(AuditPart):
    """Everything the audit stage measured; `gates/audit.json` is this model as JSON."""

    load_seconds: float | None = Field(None, description="How long load() took; absent when it never returned.")
    time_limits: list[str] = Field(default_factory=list, description="Calls into the candidate that ran past "
                                   "their limit (autoenv.child.limits), and tools that hung.")
    deterministic_load: bool | None = Field(None, description="Two loads gave the same tasks in the same order.")
    load_difference: int | None = Field(None, description="The first position where the two loads differ.")
    dataset: DatasetMeasure = Field(default_factory=DatasetMeasure, description="The dataset's measurements.")
    infinite: InfiniteTake | None = Field(None, description="Present for an unbounded taskset.")
    modules: list[ModuleImport] = Field(default_factory=list, description="The candidate package's modules.")
    reward_range: tuple[float, float] | None = Field(None, description="The env's declared `reward_range`.")
    seats: list[str] = Field(default_factory=list, description="The env's seats (one for a single-agent env).")
    mode: Literal["in-process", "rollouts"] | None = Field(None, description="How probe replies were scored.")
    has_tools: bool = Field(False, description="The task or taskset defines toolsets.")
    custom_env: bool = Field(False, description="The env is not verifiers' SingleAgentEnv.")
    runtime_rewards: list[str] = Field(default_factory=list, description="Rewards that need a rollout's runtime.")
    response_hooks: list[str] = Field(default_factory=list, description="@vf.intercept/@vf.stop hooks on the reply.")
    has_oracle: bool = Field(False, description="The task defines an oracle hook.")
    oracle_format: str | None = Field(None, description="The answer-field oracle's inferred format, if any.")
    oracle_formats_tried: dict[str, float] = Field(default_factory=dict, description="Each format's mean reward "
                                                   "(`field: format` for a field other than `answer`).")
    oracle_field: str | None = Field(None, description="The data field the answer-field oracle reads: `answer`, "
                                     "or the field whose value, so formatted, earned the reward.")
    learnt: LearntFromSource | None = Field(None, description="What the reward's source gave the gates.")
    search: SearchTrace | None = Field(None, description="The reward-search probe's trace, when it ran.")
    gold: GoldCheck | None = Field(None, description="verifiers' gold check, when the task defines one.")
    seat_reference: SeatReference | None = Field(None, description="Who played the unprobed seats (multi-seat).")
    channel: ChannelProbe | None = Field(None, description="The plain-channel probe (multi-seat envs).")
    deterministic_scoring: bool | None = Field(None, description="Scoring the same transcript twice agreed; "
                                               "absent when no reference reply was scored.")
    probes: list[ProbeRecord] | None = Field(None, description="The probe records; absent when none were played.")
    probe_seconds: float | None = Field(None, description="How long the probes took.")
    probe_tasks: int | None = Field(None, description="Tasks in the probe sample.")
    probe_names: list[str] = Field(default_factory=list, description="The probes planned, the oracle first.")
    oracle_source: str | None = Field(None, description="`hook`, `inferred:<format>` or None (no oracle).")
    unprepared_scripts: list[str] = Field(default_factory=list, description="Shipped scripts whose dependencies "
                                          "could not be resolved before the sandbox (autoenv.sandbox.confine).")
    reached_hosts: list[str] = Field(default_factory=list, description="Hosts outside loopback the candidate's code "
                                     "tried to reach during the audit, first first (autoenv.child.netwatch).")


def parse_audit(data: object, where: str = AUDIT_FILE) -> AuditRecord:
    """`data` (audit.json's parsed JSON) as an AuditRecord, or an AutoEnvError naming the bad key."""
    return validated(AuditRecord, data, "audit record", "audit", "gates/", where)


def read_audit(path: Path) -> AuditRecord:
    """Parse the audit stage's `audit.json` once, validated: the parent never trusts what the child wrote."""
    return parse_audit(load_json(path, "audit record", "audit", "gates/"), str(path))
