"""config.toml: every knob of an evaluation, loaded into typed, validated objects.

A typo in a config file must never fall back to a default silently: unknown keys are
rejected with a suggestion, wrong types name the key, the line and the expected type,
and TOML syntax errors keep tomllib's line and column.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core.errors import AutoEnvError
from autoenv.core.job import TASKSET_ID, module_of
from autoenv.core.runtimes import HARNESSES, RUNTIME_TYPES, readiness_problem, settings_problems

# The judge backends by name, in the order `auto` tries them (the first available one judges):
# a new backend is one module in autoenv/judge/ plus one line here (autoenv.judge.registry loads them).
JUDGE_BACKENDS = {
    "claude": "autoenv.judge.claude",
    "anthropic": "autoenv.judge.anthropic",
    "offline": "autoenv.judge.offline",
}
JUDGE_CHOICES = ("auto", *JUDGE_BACKENDS)

CONFIG_NAME = "config.toml"
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Shapes of real secrets people paste where a variable *name* belongs.
SECRET_SHAPES = re.compile(r"^(sk-|sk_|pk-|ghp_|xox|AKIA|eyJ)|^(?![A-Z][A-Z0-9_]*$)[A-Za-z0-9_\-]{32,}$")


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters sent with every model request."""

    temperature: float = 0.7
    """Sampling temperature, 0 to 2."""
    max_tokens: int = 1024
    """The most tokens one reply may have (the forwarder clamps a request to it)."""
    top_p: float | None = None
    """Nucleus sampling, in (0, 1] (unset: the provider's default)."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if not 0 <= self.temperature <= 2:
            out.append(("temperature", "must be between 0 and 2"))
        if self.max_tokens < 1:
            out.append(("max_tokens", "must be at least 1"))
        if self.top_p is not None and not 0 < self.top_p <= 1:
            out.append(("top_p", "must be in (0, 1]"))
        return out


@dataclass(frozen=True)
class Price:
    """USD per million tokens, for the cost line of the statistics (0 = not priced)."""

    input: float = 0.0
    """USD per million prompt tokens."""
    output: float = 0.0
    """USD per million completion tokens."""
    cached_input: float | None = None
    """Prompt tokens the provider served from its cache (None: priced as `input`)."""

    def problems(self) -> list[tuple[str, str]]:
        return [(name, "must be >= 0") for name in ("input", "output", "cached_input")
                if (getattr(self, name) or 0) < 0]


CACHED_TOKENS = ("auto", "included", "separate")


@dataclass(frozen=True)
class ModelConfig:
    """One model behind an OpenAI-compatible endpoint."""

    model: str
    """The model name the endpoint knows (vLLM: its --served-model-name)."""
    base_url: str
    """The endpoint's OpenAI-compatible base URL (http:// or https://)."""
    api_key_var: str = ""
    """Name of the environment variable holding the key ("" for endpoints with no key)."""
    sampling: Sampling = field(default_factory=Sampling)
    """Sent with every request to this model."""
    price: Price = field(default_factory=Price)
    """What this model's tokens cost."""
    max_concurrent: int = 0
    """This model's rollouts in flight at once (0: budget.max_concurrent)."""
    cached_tokens: str = "auto"
    """How the endpoint counts `usage.prompt_tokens_details.cached_tokens`: included in prompt_tokens (OpenAI),
    separate from them (llama.cpp's llama-server), or auto (separate on a call whose cached count exceeds
    its prompt count, else included)."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if self.max_concurrent < 0:
            out.append(("max_concurrent", "must be >= 0 (0: budget.max_concurrent)"))
        if self.cached_tokens not in CACHED_TOKENS:
            out.append(("cached_tokens", f"must be one of {', '.join(CACHED_TOKENS)}"))
        if not self.model.strip():
            out.append(("model", "must name a model"))
        if not re.match(r"^https?://", self.base_url):
            out.append(("base_url", "must start with http:// or https://"))
        if self.api_key_var:
            if SECRET_SHAPES.search(self.api_key_var):
                out.append(
                    (
                        "api_key_var",
                        "looks like a secret key, not the NAME of an environment variable; "
                        "remove it from the file, put the key in a variable "
                        "(export OPENAI_API_KEY=...) and write that variable's name here",
                    )
                )
            elif not ENV_VAR_NAME.match(self.api_key_var):
                out.append(("api_key_var", "must be an environment variable name"))
        return out


@dataclass(frozen=True)
class Budget:
    """How much one evaluation spends."""

    examples: int = 40
    """Tasks per evaluation, drawn by the harness with `seed` (stratified by difficulty)."""
    rollouts_per_example: int = 4
    """Rollouts per task (the GRPO group size): at least 2, to see disagreement."""
    max_concurrent: int = 8
    """Rollouts in flight at once per model, so a fast model never waits behind a slow one (a model's own
    [target]/[strong] max_concurrent overrides it)."""
    rollout_timeout: float = 300.0
    """Seconds; a rollout past this is recorded as a timeout."""
    max_turns: int = 10
    """Assistant turns per rollout."""
    max_concurrent_total: int = 0
    """Rollouts in flight at once across both models (0: the sum of the two models' limits)."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        for name in ("examples", "max_concurrent", "max_turns"):
            if getattr(self, name) < 1:
                out.append((name, "must be at least 1"))
        if self.max_concurrent_total < 0:
            out.append(("max_concurrent_total", "must be >= 0 (0: the sum of the two models' limits)"))
        if self.rollouts_per_example < 2:
            out.append(("rollouts_per_example", "must be at least 2: GRPO learns only from tasks "
                        "whose rollouts disagree, and one rollout per task cannot show that"))
        if self.rollout_timeout <= 0:
            out.append(("rollout_timeout", "must be a positive number of seconds"))
        return out


@dataclass(frozen=True)
class Bands:
    """The wanted state: where the target and strong models' mean rewards should sit."""

    target_min: float = 0.2
    """The target model's mean reward should be at least this ..."""
    target_max: float = 0.7
    """... and at most this."""
    strong_min: float = 0.7
    """The strong model's mean reward should be at least this (the tasks are solvable)."""
    solve_threshold: float = 1.0
    """A rollout whose reward reaches this counts as solved."""
    learnable_min: float = 0.2
    """Share of tasks whose rollouts disagree, below which the target is not RL-ready."""
    max_env_error_rate: float = 0.05
    """More environment errors than this share of rollouts: discard (the candidate is broken)."""
    max_provider_error_rate: float = 0.2
    """More provider errors and timeouts than this share: inconclusive."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        for name in ("learnable_min", "max_env_error_rate", "max_provider_error_rate"):
            if not 0 <= getattr(self, name) <= 1:
                out.append((name, "must be between 0 and 1"))
        if not 0 <= self.target_min < self.target_max:
            out.append(("target_min", "must be >= 0 and below target_max"))
        if self.strong_min < 0:
            out.append(("strong_min", "must be >= 0"))
        return out


@dataclass(frozen=True)
class Stats:
    """When the statistics may speak: too few tasks make an interval noise."""

    min_tasks: int = 10
    """Fewer shared tasks than this: `compare` shows no interval and the verdict compares unpaired (the tasks
    changed); fewer scored tasks than this: the verdict does not compare at all."""

    def problems(self) -> list[tuple[str, str]]:
        return [] if self.min_tasks >= 2 else [("min_tasks", "must be at least 2")]


@dataclass(frozen=True)
class Verdict:
    """How sure the verdict must be before it says keep or discard."""

    confidence: float = 0.97
    """Keep or discard only when this interval of the change excludes 0."""

    def problems(self) -> list[tuple[str, str]]:
        return [] if 0.5 <= self.confidence < 1 else [("confidence", "must be in [0.5, 1)")]


@dataclass(frozen=True)
class Checks:
    """Model-free checks of the candidate and its dataset (autoenv check)."""

    dataset_size: int = 1000
    """The default dataset must hold at least this many tasks."""
    max_duplicate_share: float = 0.01
    """Largest share of tasks whose prompt repeats another's exactly."""
    near_duplicate_similarity: float = 0.9
    """Word-shingle Jaccard similarity at which two prompts count as near-duplicates."""
    max_near_duplicate_share: float = 0.05
    """Largest share of tasks whose prompt is a near-duplicate of another's."""
    max_answer_share: float = 0.25
    """Largest share of tasks allowed to have the same reference answer."""
    max_load_seconds: float = 60.0
    """A limit: load() running longer is stopped and fails the gates (an environment error)."""
    max_reward_seconds: float = 30.0
    """A limit on one reward or metric call (and one oracle hook call)."""
    max_tool_seconds: float = 60.0
    """A limit on one tool call."""
    infinite_take: int = 1000
    """Tasks taken from an infinite taskset (its first N): what the checks measure and the sample draws from."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        for name in ("max_duplicate_share", "near_duplicate_similarity", "max_near_duplicate_share", "max_answer_share"):
            if not 0 <= getattr(self, name) <= 1:
                out.append((name, "must be between 0 and 1"))
        for name in ("dataset_size", "infinite_take"):
            if getattr(self, name) < 1:
                out.append((name, "must be at least 1"))
        for name in ("max_load_seconds", "max_reward_seconds", "max_tool_seconds"):
            if getattr(self, name) <= 0:
                out.append((name, "must be a positive number of seconds"))
        return out


@dataclass(frozen=True)
class Probes:
    """Scripted policies that must (oracle) or must not (exploits) earn reward."""

    sample: int = 30
    """Tasks per probe when replies are scored in-process (single-turn candidates)."""
    rollout_sample: int = 6
    """Tasks per probe when probes need real rollouts (tools, custom Env)."""
    oracle_min: float = 0.95
    """The oracle must reach this share of the maximum reward (sum of positive weights)."""
    exploit_max: float = 0.1
    """An exploit may reach at most this share of the oracle's mean reward."""
    free_max: float = 0.2
    """A content-free probe (empty, refusal, abstain, stub, ...) may reach at most this share of the reward's
    range above its floor (the range declared, else the highest total observed on any probe)."""
    continue_on_failure: bool = False
    """Run the model evaluation even when a check or probe failed."""
    canaries: float = 0.1
    """Canary rollouts, as a share of each model's rollouts, played on top of them in the rollouts stage: a
    content-free reply (empty, a refusal, an abstention) served as the model's own on rollouts picked at random
    as they start, by the built-in endpoint offline or the forwarder online (no provider call). Judged like the
    content-free probes; statistics and the verdict never see them. 0 turns them off; at most 0.5."""

    def problems(self) -> list[tuple[str, str]]:
        out = [(n, "must be at least 1") for n in ("sample", "rollout_sample") if getattr(self, n) < 1]
        out += [(n, "must be between 0 and 1") for n in ("oracle_min", "exploit_max", "free_max") if not 0 <= getattr(self, n) <= 1]
        out += [("canaries", "must be between 0 and 0.5")] if not 0 <= self.canaries <= 0.5 else []
        return out


@dataclass(frozen=True)
class Judge:
    """The isolated reader of the rollouts that writes the qualitative feedback."""

    backend: str = "auto"
    """auto | claude | anthropic | offline (auto: claude CLI with a key, else SDK with a key, else offline)."""
    model: str = "claude-sonnet-4-6"
    """The judge's model (claude and anthropic backends)."""
    max_turns: int = 30
    """The most turns one judgement may take."""
    max_budget_usd: float = 1.0
    """USD per judgement; over it the judge stops and the offline review is used."""
    timeout: float = 600.0
    """Seconds one judgement may take."""
    claude_bin: str = "claude"
    """The Claude Code CLI the claude backend runs."""
    input_price: float = 3.0
    """USD per million input tokens, to enforce max_budget_usd with the anthropic backend."""
    output_price: float = 15.0
    """USD per million output tokens."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if self.backend not in JUDGE_CHOICES:
            out.append(("backend", f"must be one of {', '.join(JUDGE_CHOICES)}"))
        if self.max_turns < 1:
            out.append(("max_turns", "must be at least 1"))
        for name in ("max_budget_usd", "timeout"):
            if getattr(self, name) <= 0:
                out.append((name, "must be positive"))
        return out


@dataclass(frozen=True)
class Runtime:
    """Where each rollout's chat program runs, and which harness drives the chat."""

    type: str = "subprocess"
    """subprocess (this machine) | docker | podman | modal | prime | e2b (verifiers' own runtimes)."""
    harness: str = "inprocess"
    """inprocess (verifiers' chat program run inside the worker; subprocess runtime only) | stock."""
    docker: dict = field(default_factory=dict)
    """Settings passed to verifiers' runtime of that type, checked against its config model."""
    podman: dict = field(default_factory=dict)
    """The same, for podman."""
    modal: dict = field(default_factory=dict)
    """The same, for modal."""
    prime: dict = field(default_factory=dict)
    """The same, for prime."""
    e2b: dict = field(default_factory=dict)
    """The same, for e2b."""
    warm_seconds: int = 600
    """How long the warm child (verifiers imported once, a child forked per evaluation) waits for the next
    evaluation before it exits; 0: a fresh interpreter for every evaluation."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if self.warm_seconds < 0:
            out.append(("warm_seconds", "must be 0 (off) or a number of seconds"))
        if self.type not in RUNTIME_TYPES:
            out.append(("type", f"must be one of {', '.join(RUNTIME_TYPES)}"))
        elif self.type != "subprocess":
            out += [(f"{self.type}.{key}", message) for key, message in settings_problems(self.type, getattr(self, self.type))]
        if self.harness not in HARNESSES:
            out.append(("harness", f"must be one of {', '.join(HARNESSES)}"))
        return out

    def job(self) -> dict:
        """The worker job's `runtime` field."""
        settings = getattr(self, self.type) if self.type != "subprocess" else {}
        return {"type": self.type, "harness": self.harness, "settings": dict(settings),
                "warm_seconds": self.warm_seconds}


@dataclass(frozen=True)
class Offline:
    """Scripted policies that stand in for the two models under --offline."""

    target: str = "noisy-oracle:0.45"
    """The scripted policy that stands in for the target model (docs/endpoint.md names them)."""
    strong: str = "oracle"
    """The scripted policy that stands in for the strong model."""
    latency: float = 0.0
    """Seconds the built-in endpoint waits before each reply (a slow provider, for benchmarks)."""

    def problems(self) -> list[tuple[str, str]]:
        return [] if self.latency >= 0 else [("latency", "must be >= 0 seconds")]


@dataclass(frozen=True)
class Run:
    """What a run does when the agent changed its rules (see autoenv.run.runbase)."""

    on_tamper: str = "record"
    """record: the evaluation is recorded with the verdict `tampered`, no model called | refuse: exit 2."""

    def problems(self) -> list[tuple[str, str]]:
        return [] if self.on_tamper in ("record", "refuse") else [("on_tamper", 'must be "record" or "refuse"')]


AGENT_KINDS = ("claude", "codex", "command")
_CLAUDE = ("--output-format stream-json --verbose --permission-mode dontAsk --tools Read,Write,Edit,Bash,Glob,Grep "
           "--settings {settings}")
CLAUDE_START = "claude -p {prompt} --session-id {session_id} " + _CLAUDE
CLAUDE_RESUME = "claude -p {prompt} --resume {session_id} " + _CLAUDE
CODEX_START = "codex exec --json --sandbox workspace-write {prompt}"
CODEX_RESUME = "codex exec --json --sandbox workspace-write resume {session_id} {prompt}"


@dataclass(frozen=True)
class Agent:
    """How `autoenv run` launches the coding agent and what it may spend (autoenv.driver)."""

    kind: str = "claude"
    """claude | codex | command: the default of `autoenv run --agent`."""
    claude_start: str = CLAUDE_START
    """Launch templates (shell words; {prompt}, {session_id}, {settings}, {root} are filled in)."""
    claude_resume: str = CLAUDE_RESUME
    """The relaunch of a claude session (the first launch uses claude_start)."""
    codex_start: str = CODEX_START
    """The first launch of `--agent codex`."""
    codex_resume: str = CODEX_RESUME
    """A relaunch of the codex session."""
    command_start: str = ""
    """The `command` agent: any program; it gets the prompt as {prompt} and on stdin ("": `autoenv run --command`)."""
    command_resume: str = ""
    """"" = command_start again."""
    stall_minutes: float = 20.0
    """No commit, no evaluation and none running for this long: the launch is ended and resumed with a nudge."""
    max_evals: int = 100
    """Default budgets of `autoenv run` (its --max-evals, --max-hours, --max-usd override them)."""
    max_hours: float = 12.0
    """Wall hours of one `autoenv run`."""
    max_usd: float = 50.0
    """USD of one `autoenv run`: agent, evaluated models ([target.price], [strong.price]) and judge."""
    input_price: float = 3.0
    """USD per million tokens, to price a launch that was ended before it reported its cost."""
    output_price: float = 15.0
    """USD per million output tokens, likewise."""

    def problems(self) -> list[tuple[str, str]]:
        out = [] if self.kind in AGENT_KINDS else [("kind", f"must be one of {', '.join(AGENT_KINDS)}")]
        out += [(n, "must be positive") for n in ("stall_minutes", "max_evals", "max_hours", "max_usd")
                if getattr(self, n) <= 0]
        out += [(n, "must be >= 0") for n in ("input_price", "output_price") if getattr(self, n) < 0]
        return out

PLUGIN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/@]*$")


@dataclass(frozen=True)
class Candidate:
    """The environment under evaluation: the agent's workspace by default, or one that exists already."""

    taskset: str = TASKSET_ID
    """verifiers taskset id (module: the id with `-` as `_`)."""
    env: str = ""
    """verifiers env id when the vf.Env lives in another package ("" = the taskset package's own, if any)."""
    package: str = ""
    """Directory of the package to install (editable); "" = paths.candidate."""
    install: bool = True
    """false: the environment is installed in the venv already; it is only imported."""
    modules: list[str] = field(default_factory=list)
    """Packages whose every module is import-checked; [] = the taskset's (and the env's) package."""
    workspace: bool = True
    """true: the agent's workspace (program.md's contract: the name candidate-env, the dataset-size minimum
    an error); false: an environment evaluated as it is (its own name, the size minimum a warning)."""

    def problems(self) -> list[tuple[str, str]]:
        out = []
        for name in ("taskset", "env"):
            value = getattr(self, name)
            if (value or name == "taskset") and not PLUGIN_ID.match(value):
                out.append((name, "must be a verifiers id such as `my-env` or `owner/my-env`"))
        out += [("modules", f"{m!r} is not a module name") for m in self.modules
                if not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", m)]
        return out

    @property
    def module(self) -> str:
        return module_of(self.taskset)

    def checked_modules(self) -> list[str]:
        """The packages whose every module the audit imports."""
        if self.modules:
            return list(self.modules)
        return [self.module] + ([module_of(self.env)] if self.env and module_of(self.env) != self.module else [])


@dataclass(frozen=True)
class Paths:
    """Where things live, relative to the repository root."""

    candidate: str = "candidate"
    """The agent's workspace: the candidate package."""
    outputs: str = "outputs"
    """Traces, gates, logs and plots, per commit (git-ignored)."""
    feedback: str = "feedback"
    """The feedback files, `feedback/<commit>.md` (git-ignored)."""
    log_file: str = "feedback_log.jsonl"
    """The hash-chained ledger (git-ignored)."""


@dataclass(frozen=True)
class Limits:
    """What the candidate's child process and the programs it starts may use; a breach is the candidate's crash,
    with the limit named. 0 turns a limit off."""

    memory_mb: int = 4096
    """Private memory of each process (RLIMIT_DATA: what it allocates, not what it maps from files), in MB."""
    processes: int = 128
    """Processes in the child's sandbox at once, the child itself included."""
    file_mb: int = 1024
    """The largest file a process may write (RLIMIT_FSIZE), in MB; stdout and stderr are kept up to a few MB."""

    def problems(self) -> list[tuple[str, str]]:
        floors = {"memory_mb": 512, "processes": 4, "file_mb": 16}  # below these no child starts
        return [(name, f"must be 0 (no limit) or at least {floor}") for name, floor in floors.items()
                if getattr(self, name) != 0 and not getattr(self, name) >= floor]

    def job(self, confined: bool = False) -> dict:
        """The worker job's `resources` field."""
        return {"memory_mb": self.memory_mb or None, "processes": self.processes or None,
                "file_mb": self.file_mb or None, "confined": confined}


@dataclass(frozen=True)
class Config:
    """The whole of config.toml: the two models, then one table per concern."""

    target: ModelConfig
    """The model to be trained with RL: its mean reward should sit in the band."""
    strong: ModelConfig
    """A strong model that proves the tasks are solvable."""
    seed: int = 0
    """Fixes the sampled tasks (same seed, same tasks every iteration)."""
    paths: Paths = field(default_factory=Paths)
    budget: Budget = field(default_factory=Budget)
    bands: Bands = field(default_factory=Bands)
    verdict: Verdict = field(default_factory=Verdict)
    stats: Stats = field(default_factory=Stats)
    checks: Checks = field(default_factory=Checks)
    probes: Probes = field(default_factory=Probes)
    judge: Judge = field(default_factory=Judge)
    offline: Offline = field(default_factory=Offline)
    runtime: Runtime = field(default_factory=Runtime)
    run: Run = field(default_factory=Run)
    agent: Agent = field(default_factory=Agent)
    candidate: Candidate = field(default_factory=Candidate)
    limits: Limits = field(default_factory=Limits)
    root: Path = field(default=Path("."), compare=False)
    """Directory holding config.toml; every relative path is resolved against it."""

    def path(self, name: str) -> Path:
        if name == "candidate" and self.candidate.package:
            return self.root / self.candidate.package
        return self.root / getattr(self.paths, name)

    def models(self) -> dict[str, ModelConfig]:
        return {"target": self.target, "strong": self.strong}

    def concurrency(self) -> tuple[dict[str, int], int]:
        """Each model's rollouts in flight at once, and the cap across both."""
        per_model = {role: m.max_concurrent or self.budget.max_concurrent for role, m in self.models().items()}
        return per_model, self.budget.max_concurrent_total or sum(per_model.values())


PERSONS = "config.toml is the person's: the coding agent never edits it"
"""Said in every fix of config.toml: the agent reads these errors too (program.md: edit only candidate/)."""


def load_config(path: Path, text: str | None = None) -> Config:
    """Read and validate `path` (or `text`, read from it at another commit); raise AutoEnvError naming
    the line and key on any fault."""
    path = Path(path)
    if text is None and not path.is_file():
        raise AutoEnvError(
            f"no config file at {path}",
            where=str(path),
            fix="run from the repository root, or pass --config PATH "
            "(a fresh clone has config.toml at its top level)",
        )
    if text is None:
        text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise AutoEnvError(
            f"{path.name} is not valid TOML: {e}",
            where=f"{path}{_line_suffix(str(e))}",
            fix=f"the person fixes the syntax at that line ({PERSONS}; strings need quotes, tables need "
            "[brackets])",
        ) from None
    reader = _Reader(path, text)
    config = reader.build(Config, data, prefix="")
    return dataclasses.replace(config, root=path.parent.resolve())


def with_env(config: Config, env: str, env_id: str = "") -> Config:
    """`config` evaluating the existing environment `env` as it is (`autoenv eval/check --env`).

    `env` is a package directory (its pyproject's name is the taskset id; it is installed
    editable) or the id of an environment installed in the venv already. Either way it is
    not the agent's workspace: its own name, the dataset-size minimum a warning.
    """
    directory = Path(env).expanduser()
    if not directory.is_absolute():
        directory = Path.cwd() / directory
    if directory.is_dir():
        pyproject = directory / "pyproject.toml"
        try:
            name = tomllib.loads(pyproject.read_text()).get("project", {}).get("name")
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise AutoEnvError(f"--env {env}: {pyproject} cannot be read ({e})", where=str(pyproject),
                               fix="point --env at a package directory with a pyproject.toml, or pass an installed "
                               "environment's id") from None
        if not isinstance(name, str) or not name:
            raise AutoEnvError(f"--env {env}: {pyproject} has no [project] name", where=str(pyproject),
                               fix="add `name = \"my-env\"` under [project]: it is the taskset id")
        candidate = Candidate(taskset=name, env=env_id, package=str(directory.resolve()), install=True, workspace=False)
    elif PLUGIN_ID.match(env) and not env.startswith((".", "/", "~")):
        candidate = Candidate(taskset=env, env=env_id, install=False, workspace=False)
    else:
        raise AutoEnvError(f"--env {env}: no such directory, and not an environment id", where="--env",
                           fix="pass a package directory (with pyproject.toml) or an installed environment's id")
    for key, message in candidate.problems():
        raise AutoEnvError(f"--env {env}: candidate.{key} {message}", where="--env", fix="check the id")
    return dataclasses.replace(config, candidate=candidate)


def _line_suffix(message: str) -> str:
    m = re.search(r"line (\d+)", message)
    return f":{m.group(1)}" if m else ""


class _Reader:
    """Builds dataclasses from TOML tables, checking keys and types against the hints."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.lines = text.splitlines()

    def build(self, cls: type, data: dict, prefix: str):
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "root"}
        for key in data:
            if key not in fields:
                self._unknown(prefix, key, sorted(fields))
        values = {}
        for name, f in fields.items():
            dotted = f"{prefix}{name}"
            if name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise AutoEnvError(
                        f"{self.path.name} is missing the required key `{dotted}`",
                        where=f"{self.path}, table [{prefix.rstrip('.') or 'top level'}]",
                        fix=f"the person adds `{name} = ...` ({PERSONS}; see the comments in the shipped "
                        "config.toml)",
                    )
                continue
            values[name] = self._value(hints[name], data[name], dotted)
        obj = cls(**values)
        for name, message in getattr(obj, "problems", lambda: [])():
            self._fail(f"{prefix}{name}", f"`{prefix}{name}` {message}")
        return obj

    def _value(self, hint, value, dotted: str):
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                self._fail(dotted, f"`{dotted}` must be a table ([{dotted}])")
            return self.build(hint, value, prefix=f"{dotted}.")  # type: ignore[arg-type]  # a dataclass type here
        if hint is dict:  # a pass-through sub-table, checked by its owner's problems()
            if not isinstance(value, dict):
                self._fail(dotted, f"`{dotted}` must be a table ([{dotted}])")
            return value
        if typing.get_origin(hint) is list:
            (item,) = typing.get_args(hint)
            if not isinstance(value, list) or not all(isinstance(v, item) for v in value):
                self._fail(dotted, f"`{dotted}` must be an array of {item.__name__} values, got {value!r}")
            return list(value)
        allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        for kind in allowed:
            if kind is type(None):
                continue
            if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if kind is int and isinstance(value, int) and not isinstance(value, bool):
                return value
            if kind in (str, bool) and isinstance(value, kind):
                return value
        expected = " or ".join(_type_name(k) for k in allowed if k is not type(None))
        self._fail(
            dotted,
            f"`{dotted}` must be {expected}, got {_type_name(type(value))} {value!r}",
        )

    def _unknown(self, prefix: str, key: str, known: list[str]):
        dotted = f"{prefix}{key}"
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean `{prefix}{close[0]}`? " if close else ""
        raise AutoEnvError(
            f"{self.path.name} has an unknown key `{dotted}`",
            where=self._where(dotted),
            fix=f"{hint}known keys here: {', '.join(known)}",
        )

    def _fail(self, dotted: str, message: str):
        raise AutoEnvError(
            f"{self.path.name}: {message}",
            where=self._where(dotted),
            fix=f"the person edits that line ({PERSONS}); the shipped config.toml documents every key",
        )

    def _where(self, dotted: str) -> str:
        line = locate_key(self.lines, dotted)
        return f"{self.path}:{line}" if line else f"{self.path} (key {dotted})"


def locate_key(lines: list[str], dotted: str) -> int | None:
    """1-based line of `dotted` (a.b.c) in TOML source: the key line, or the table header."""
    *table, key = dotted.split(".")
    current: list[str] = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        header = re.match(r"^\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$", line)
        if header:
            current = [part.strip().strip('"') for part in header.group(1).split(".")]
            if current == table + [key]:
                return number
            continue
        m = re.match(r"^([A-Za-z0-9_\-\.\"]+)\s*=", line)
        if m:
            parts = [p.strip('"') for p in m.group(1).split(".")]
            if current + parts == table + [key]:
                return number
    return None


def _type_name(kind) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            dict: "a table", list: "an array"}.get(kind, getattr(kind, "__name__", str(kind)))


def check_runtime_ready(kind: str, config_path: Path) -> None:
    """Raise AutoEnvError (naming config.toml's `runtime.type` line) when `kind` cannot start here."""
    problem = readiness_problem(kind)
    if problem is None:
        return
    lines = config_path.read_text().splitlines() if config_path.is_file() else []
    line = locate_key(lines, "runtime.type")
    raise AutoEnvError(problem[0], where=f"{config_path}:{line} (runtime.type)" if line else
                       f"{config_path} (runtime.type)", fix=f"the person's ({PERSONS}): {problem[1]}")
