"""The driver's budgets (evaluations, wall hours, USD) and what has been spent against them.

Spend is summed by code from records, never from what the agent says: the agent's
`total_cost_usd` per launch (autoenv.driver.transcript), and from every ledger entry of the
run written since the driver started, the evaluated models' `cost_usd` (priced with
[target.price] / [strong.price]; the forwarder's count of the provider's tokens where it is
larger) and the judge's (a cached entry counts as an evaluation but spent nothing: its costs
are the reused evaluation's). An `autoenv eval --env` entry evaluated another environment: its
cost counts against max_usd, but it is not one of the run's evaluations (max_evals, the
evaluation count) and never the run's last verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autoenv.core.errors import AutoEnvError
from autoenv.core.record import Entry


@dataclass(frozen=True)
class Limits:
    evals: int
    hours: float
    usd: float

    @classmethod
    def choose(cls, defaults: Limits, evals: int | None, hours: float | None, usd: float | None) -> Limits:
        """The flags where given, else the config's [agent] budgets; a flag of zero or below is bad input."""
        for flag, value in (("--max-evals", evals), ("--max-hours", hours), ("--max-usd", usd)):
            if value is not None and value <= 0:
                raise AutoEnvError(f"{flag} {value} is not a budget: it must be above zero", where=flag,
                                   fix=f"pass a positive number, or leave {flag} out to use [agent] in config.toml")
        return cls(evals=evals if evals is not None else defaults.evals,
                   hours=hours if hours is not None else defaults.hours,
                   usd=usd if usd is not None else defaults.usd)


@dataclass
class Spend:
    evals: int = 0
    """The run's evaluations (its candidate's): what max_evals counts."""
    seconds: float = 0.0
    agent_usd: float = 0.0
    models_usd: float = 0.0
    judge_usd: float = 0.0
    env_evals: int = 0
    """`autoenv eval --env` evaluations (another environment, recorded apart): their cost counts, they do not."""

    @property
    def usd(self) -> float:
        return self.agent_usd + self.models_usd + self.judge_usd

    def add_entries(self, entries: list[Entry]) -> None:
        """Count these new ledger entries: one evaluation each (of the run, or of an `--env` environment), with
        their model and judge cost."""
        for entry in entries:
            if entry.environment is None:
                self.evals += 1
            else:
                self.env_evals += 1
            if entry.cached_from:  # a cache hit copies the costs of the evaluation it reuses: nothing was spent
                continue
            self.models_usd += models_usd(entry)
            self.judge_usd += (entry.judge.cost_usd or 0.0) if entry.judge else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "usd": self.usd}


def models_usd(entry: Entry) -> float:
    """The evaluated models' cost: per model the larger of what its traces' tokens and what the forwarder's
    count of the provider's tokens cost (a candidate's own calls through the forwarder show only there)."""
    traced: dict[str, float] = {role: s.cost_usd or 0.0 for role, s in entry.stats.items()}
    forwarded = {role: r.cost_usd or 0.0 for role, r in entry.forwarded.routes.items()} if entry.forwarded else {}
    return sum(max(traced.get(role, 0.0), forwarded.get(role, 0.0)) for role in {*traced, *forwarded})


def exhausted(limits: Limits, spend: Spend) -> str | None:
    """Which budget is spent, in words, or None."""
    if spend.evals >= limits.evals:
        return f"max_evals: {spend.evals} of {limits.evals} evaluations done"
    if spend.seconds >= limits.hours * 3600:
        return f"max_hours: {spend.seconds / 3600:.2f} of {limits.hours:g} hours gone"
    if spend.usd >= limits.usd:
        return (f"max_usd: ${spend.usd:.4f} of ${limits.usd:g} spent (agent ${spend.agent_usd:.4f}, "
                f"models ${spend.models_usd:.4f}, judge ${spend.judge_usd:.4f})")
    return None
