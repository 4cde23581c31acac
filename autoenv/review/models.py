"""`autoenv compare --models A B`: two models on one evaluated commit, on the same tasks.

A side named `target` or `strong` is that model's rollouts from the evaluation itself.
Any other name is a model the harness runs now, through the same worker as an
evaluation, with the evaluation's seed and budget, so it draws the same sample of tasks
(checked against the evaluation's tasks.json afterwards): a base model against its
RL-trained version, or one model at two providers. `NAME@BASE_URL` picks the endpoint
(default: the target's, with its key variable unless `--api-key-var` names another);
with `--offline`, NAME is a scripted policy on the built-in endpoint.

The candidate must be the one that was evaluated: the working tree's candidate/ has to
match the commit. The rollouts go under outputs/<commit>/models/<name>/ and are reused
when the same model was already run there with the same job.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from autoenv.containers.access import engine_access
from autoenv.core import display
from autoenv.core.config import CONFIG_NAME
from autoenv.core.errors import AutoEnvError
from autoenv.core.job import Job, RolloutPlan, SamplingSpec, Seat
from autoenv.core.record import ROLES, Entry
from autoenv.core.traces import read_rollouts
from autoenv.endpoint.policies import Policies
from autoenv.review.compare import Side, evaluation_side
from autoenv.review.rows import Row
from autoenv.review.run import Project
from autoenv.run.archive import archive_previous
from autoenv.sandbox.install import install_candidate
from autoenv.sandbox.confine import choose
from autoenv.sandbox.rollouts import run_worker

SEAT = "target"  # the worker's smoke rollout runs on the seat named target


@dataclass(frozen=True)
class ModelSpec:
    name: str
    base_url: str | None = None

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        name, _, url = text.partition("@")
        if not name.strip():
            raise AutoEnvError(f"{text!r} names no model", where="--models",
                               fix="write MODEL or MODEL@BASE_URL, e.g. gpt-4.1-mini@https://api.openai.com/v1")
        if url and not re.match(r"^https?://", url):
            raise AutoEnvError(f"{url!r} is not an http(s) URL", where=f"--models {text}",
                               fix="write MODEL@https://host/v1")
        return cls(name=name.strip(), base_url=url or None)

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name + (f"@{self.base_url}" if self.base_url else ""))[:100]


def model_side(project: Project, row: Row, text: str, *, offline: bool, api_key_var: str | None) -> Side:
    """One side of a model comparison on the evaluation `row`."""
    threshold = project.config.bands.solve_threshold
    if text in ROLES:
        return evaluation_side(project, row, text)
    spec = ModelSpec.parse(text)
    traces = run_model(project, _entry(row), spec, offline=offline, api_key_var=api_key_var)
    label = f"{row.short} {spec.name}" + (f" at {spec.base_url}" if spec.base_url else "")
    return Side.from_rollouts(label, spec.name, read_rollouts(traces), threshold)


def _entry(row: Row) -> Entry:
    if row.entry is None:
        raise AutoEnvError(f"evaluation {row.short} is known only from its git note", where="feedback_log.jsonl",
                           fix="running another model needs the ledger entry (its budget and seed): the person restores "
                           "the ledger")
    return row.entry


def run_model(project: Project, entry: Entry, spec: ModelSpec, *, offline: bool, api_key_var: str | None) -> Path:
    """Run `spec` on the tasks `entry` was evaluated on; returns the folder of its traces."""
    seat = _seat(project, spec, offline, api_key_var)
    outputs = project.outputs(entry)
    if outputs is None or not (outputs / "tasks.json").is_file():
        raise AutoEnvError(f"evaluation {entry.commit[:12]} kept no task sample (tasks.json)",
                           where=str(project.config.path("outputs") / entry.commit),
                           fix="compare models on an evaluation that ran its rollouts (autoenv log shows the scores)")
    _same_candidate(project, entry)
    job = _job(project, entry, seat, outputs / "models" / spec.slug)
    traces = job.out / SEAT
    if _reusable(job):
        display.note(f"reusing {spec.name}'s rollouts in {project.shown(job.out)} (same job)")
        return traces
    archive_previous(job.out)
    with display.stage("install", "candidate into the venv"):
        install_candidate(project.config.path("candidate"))
    plan = job.rollouts
    assert plan is not None
    with display.stage("rollouts", f"{spec.name}: {plan.examples} tasks x {plan.rollouts} rollouts, seed {job.seed}"):
        sandbox = choose()
        with engine_access(job, sandbox.kind) as (job, env, _):
            result = run_worker(job, env, sandbox)
    if result.smoke and result.smoke["outcome"] != "ok":
        raise AutoEnvError(f"the smoke rollout of {spec.name} failed ({result.smoke['outcome']}): "
                           f"{result.smoke.get('error')}", where=str(job.out / "smoke" / "traces.jsonl"),
                           fix="a provider_error means the model name, endpoint or key is wrong")
    if _task_keys(job.out) != _task_keys(outputs):
        raise AutoEnvError(f"{spec.name} was given other tasks than evaluation {entry.commit[:12]}",
                           where=str(job.out / "tasks.json"),
                           fix="the candidate's dataset changed since; check out the evaluated commit and run again")
    return traces


def _same_candidate(project: Project, entry: Entry) -> None:
    candidate = project.config.path("candidate")
    relative = candidate.relative_to(project.repo.root) if candidate.is_relative_to(project.repo.root) else candidate
    dirty = [p for p in project.repo.dirty_paths() if Path(p).is_relative_to(relative)]
    if dirty or not project.repo.same_tree(entry.commit, "HEAD", relative):
        raise AutoEnvError(
            f"{relative}/ in the working tree is not the candidate evaluated at {entry.commit[:12]}",
            where=str(candidate),
            fix=f"the person checks it out (git checkout {entry.commit[:12]}, after committing or stashing edits), "
            "runs the comparison, then checks the branch out again",
        )


def _seat(project: Project, spec: ModelSpec, offline: bool, api_key_var: str | None) -> Seat:
    target = project.config.target
    sampling = SamplingSpec(temperature=target.sampling.temperature, max_tokens=target.sampling.max_tokens,
                            top_p=target.sampling.top_p)
    if offline:
        names = Policies().names()
        if spec.name.split(":", 1)[0] not in names or spec.base_url:
            raise AutoEnvError(f"{spec.name!r} is not a scripted policy of the built-in endpoint", where="--models",
                               fix=f"with --offline use one of: {', '.join(names)} (e.g. noisy-oracle:0.8)")
        return Seat(model=spec.name, embedded=True, sampling=sampling)
    key_var = target.api_key_var if api_key_var is None else api_key_var
    if key_var and not os.environ.get(key_var):
        raise AutoEnvError(f"{spec.name} needs an API key in ${key_var}, which is not set",
                           where=f"{project.config.root / CONFIG_NAME} [target] api_key_var, or --api-key-var",
                           fix=f"the person exports {key_var}=...; or --api-key-var '' for an endpoint without a "
                           "key, or --offline for scripted policies")
    return Seat(model=spec.name, base_url=spec.base_url or target.base_url, api_key_var=key_var, sampling=sampling)


def _job(project: Project, entry: Entry, seat: Seat, out: Path) -> Job:
    config, budget = project.config, entry.budget
    examples = budget.examples if budget else config.budget.examples
    rollouts = budget.rollouts_per_example if budget else config.budget.rollouts_per_example
    return Job(candidate_dir=str(config.path("candidate")), out_dir=str(out),
               seed=budget.seed if budget else config.seed, max_concurrent=config.budget.max_concurrent,
               rollout_timeout=budget.rollout_timeout if budget else config.budget.rollout_timeout,
               max_turns=budget.max_turns if budget else config.budget.max_turns, runtime=config.runtime.job(),
               embedded_latency=config.offline.latency,
               rollouts=RolloutPlan(examples=examples, rollouts=rollouts, roles={SEAT: seat}, smoke=True))


def _reusable(job: Job) -> bool:
    """The same model already ran this job here to the end."""
    try:
        done = Job.read(job.out / "job.json")
    except (OSError, ValueError):
        return False
    plan = job.rollouts
    assert plan is not None
    finished = len(read_rollouts(job.out / SEAT)) == plan.examples * plan.rollouts
    # the Worker marks the job it writes as confined (a sandbox of its own): not a difference of the job asked for
    confined = done.resources.model_copy(update={"confined": job.resources.confined})
    return done.model_copy(update={"resources": confined}) == job and finished


def _task_keys(out: Path) -> list[str]:
    return [row["key"] for row in json.loads((out / "tasks.json").read_text())]
