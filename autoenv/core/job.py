"""The worker job: what the harness asks a child process to do with the candidate, as one typed object.

The harness writes it to `outputs/<commit>/job.json` and the evaluation's child process
(autoenv.child.main: the install check, the audit of autoenv.child.audit, the rollouts of
autoenv.child.worker) reads it back; recompute reads it again later to know which models ran. Building it in one place keeps the taskset id, the seat settings
and the budget the same for every child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TASKSET_ID = "candidate-env"
CANDIDATE_MODULE = "candidate_env"


def module_of(plugin_id: str) -> str:
    """The module verifiers imports for a taskset or env id (`owner/name@version` -> `name`, `-` -> `_`)."""
    return plugin_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RuntimeSpec(_Part):
    """Where each rollout's chat program runs, and which harness drives the chat ([runtime])."""

    type: str = Field("subprocess", description="verifiers' runtime: subprocess, docker, podman, modal, prime or e2b.")
    harness: str = Field("inprocess", description="inprocess (the chat program in the worker's loop) or stock.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Passed to verifiers' runtime config.")
    warm_seconds: int = Field(0, description="How long the warm child's server waits for the next evaluation "
                              "(autoenv.sandbox.warmchild); 0: a cold child for every evaluation.")


class SamplingSpec(_Part):
    """Sampling parameters sent with every model request (None = the endpoint's default)."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None


class Seat(_Part):
    """One model to roll out: a real endpoint, or a scripted policy on the embedded endpoint."""

    model: str = Field(description="Model name, or the policy name when embedded.")
    base_url: str = Field("", description="OpenAI-compatible base URL; ignored when embedded.")
    api_key_var: str = Field("", description="Environment variable holding the key; '' for none.")
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    embedded: bool = Field(False, description="Served by the built-in endpoint inside the worker.")
    max_concurrent: int | None = Field(None, description="This model's rollouts in flight at once "
                                       "(None: the job's max_concurrent).")


class RolloutPlan(_Part):
    """The evaluation proper: sampled tasks x rollouts for each role."""

    examples: int = Field(description="Tasks to sample (seeded, stratified by difficulty).")
    rollouts: int = Field(description="Rollouts per task and role.")
    roles: dict[str, Seat]
    smoke: bool = Field(True, description="One target rollout first; a failed smoke stops the worker.")
    reuse: bool = Field(False, description="Resume: keep the episodes already in out_dir and run only the missing "
                                           "rollouts of each task and role (a stored smoke rollout is not rerun).")
    smoke_attempts: int = Field(3, description="Tries of the smoke rollout while it fails at the provider.")
    canaries: dict[str, int] = Field(default_factory=dict, description="Canary rollouts per role, played on top of "
                                     "the role's rollouts (autoenv.endpoint.canaries): that many tasks, drawn with the "
                                     "seed, get one more rollout; which rollouts are canaries is picked as they start, "
                                     "by whoever answers the seat.")


class AuditPlan(_Part):
    """The model-free gates: dataset measurements and, when `probes`, the scripted probes."""

    probes: bool = True
    probe_sample: int = Field(description="Tasks probed when scored in-process.")
    rollout_sample: int = Field(description="Tasks probed when probes run as real rollouts.")
    near_threshold: float = Field(description="MinHash similarity counted as a near-duplicate.")
    exploits: int = Field(description="How many exploit probes exist (for the deadline).")


class CallLimits(_Part):
    """Seconds one call into the candidate may take ([checks]); a breach is an environment error."""

    load_seconds: float = Field(60.0, description="The taskset's load(), each time it is loaded.")
    reward_seconds: float = Field(30.0, description="One reward or metric call (and one oracle hook call).")
    tool_seconds: float = Field(60.0, description="One tool call (verifiers' harness tool_timeout).")


class ResourceLimits(_Part):
    """What the child and every process it starts may use ([limits]); None: no limit. A breach is the candidate's."""

    memory_mb: int | None = Field(4096, description="Private memory (RLIMIT_DATA) of each process, in MB.")
    processes: int | None = Field(128, description="Processes in the child's sandbox at once, the child included.")
    file_mb: int | None = Field(1024, description="Largest file a process may write (RLIMIT_FSIZE), in MB.")
    confined: bool = Field(False, description="The child runs in a sandbox of its own (set by the harness): the "
                           "kernel's per-user process limit then counts the sandbox's processes alone.")


class Job(_Part):
    """Everything a worker process needs; nothing it needs comes from the environment."""

    candidate_dir: str
    out_dir: str
    taskset_id: str = TASKSET_ID
    env_id: str = Field("", description="verifiers env id when the Env lives in another package.")
    infinite_take: int = Field(1000, description="Tasks taken from an infinite taskset (its first N).")
    check_modules: list[str] = Field(default_factory=list, description="Packages whose every module the audit "
                                     "imports ([] = the taskset's).")
    seed: int = Field(0, description="Seeds the task sample and the scripted policies.")
    max_concurrent: int = Field(8, description="Rollouts in flight at once per model (and for the probes).")
    max_concurrent_total: int | None = Field(None, description="Rollouts in flight at once across the models "
                                             "(None: the sum of their limits).")
    rollout_timeout: float = Field(300.0, description="Seconds before a rollout is stopped.")
    max_turns: int = 10
    log_name: str = Field("worker.log", description="verifiers' log, under out_dir.")
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    embedded_latency: float = Field(0.0, description="Seconds the embedded endpoint waits before each reply.")
    forward_socket: str = Field("", description="Unix socket of the harness's forwarder, for a child without network.")
    engine_socket: str = Field("", description="Unix socket of the harness's engine guard (autoenv.containers.guard), "
                               "the container engine's API for a sandboxed child.")
    share_dir: str = Field("", description="The child's temp folder under a container runtime: the same path on the "
                           "host and in the sandbox, so the engine sees what verifiers binds from it.")
    limits: CallLimits = Field(default_factory=CallLimits)
    resources: ResourceLimits = Field(default_factory=ResourceLimits)
    rollouts: RolloutPlan | None = None
    audit: AuditPlan | None = None
    rescore_from: str | None = Field(None, description="An earlier evaluation's outputs folder whose rollouts the "
                                     "rescore stage scores again with this commit's rewards (autoenv.evaluation.rescore).")
    reference_dir: str | None = Field(None, description="Where the derive stage reads the models' rollouts "
                                      "(default out_dir; `autoenv probe --from` points it at a finished evaluation).")

    @property
    def out(self) -> Path:
        return Path(self.out_dir)

    @property
    def module(self) -> str:
        """The taskset's module, as verifiers imports it."""
        return module_of(self.taskset_id)

    @property
    def env_module(self) -> str | None:
        return module_of(self.env_id) if self.env_id else None

    @property
    def audit_dir(self) -> Path:
        """Where the audit writes audit.json and its probe traces."""
        return self.out / "gates"

    def expected_rollouts(self, stage: str | None = None) -> int:
        """An upper bound on the rollouts of `stage` ("audit" or "rollouts"; None: both), for its deadline."""
        total = 0
        if self.rollouts is not None and stage in (None, "rollouts"):
            total += len(self.rollouts.roles) * self.rollouts.examples * self.rollouts.rollouts
            total += sum(self.rollouts.canaries.values())
        if self.audit is not None and self.audit.probes and stage in (None, "audit"):
            total += self.audit.rollout_sample * (self.audit.exploits + 1)
        return max(total, 1)

    def serial_rollouts(self, stage: str | None = None) -> int:
        """Rollouts of `stage` that run one at a time before the others (the smoke's attempts), for its deadline."""
        if self.rollouts is None or not self.rollouts.smoke or stage not in (None, "rollouts"):
            return 0
        return self.rollouts.smoke_attempts

    def write(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=1))

    @classmethod
    def read(cls, path: Path) -> Job:
        return cls.model_validate_json(path.read_text())
