"""A model-graded reward inside the candidate (a `vf.Judge`, a judge client on verifiers' default endpoint)
routed to the built-in endpoint's grader when no real model is in play, and a grader outage told apart from
the candidate's own errors.

verifiers' judges default to Prime Inference: `JudgeConfig` reads `PRIME_INFERENCE_URL` (and its key from
`PRIME_API_KEY`) when it is built, often at the candidate's import. Offline (the audit, an evaluation whose
models are all scripted) the child sets both, before the candidate is imported, to a grader served in the
child itself: the scripted `gullible-grader` answers every request, whatever model the judge names. Online
nothing is set: the judge talks to the endpoint it is configured with. A judge call that fails at the
transport (a connection refused, a timeout, a 5xx, a rate limit) is infrastructure: the rollout is a
provider error, not an environment error.
"""

from __future__ import annotations

import os

from autoenv.core.messages import ChatRequest, Reply
from autoenv.core.traces import grader_outage
from autoenv.endpoint.policies import Policies, gullible_grader

__all__ = ["GraderPolicies", "grader_outage", "route_judges"]

JUDGE_URL_VAR = "PRIME_INFERENCE_URL"
JUDGE_KEY_VAR = "PRIME_API_KEY"


class GraderPolicies(Policies):
    """Every request answered by the scripted grader: a judge names its own model, which no policy serves."""

    def reply(self, request: ChatRequest) -> Reply:
        return gullible_grader(request, None)


def route_judges(base_url: str) -> None:
    """Point verifiers' default judge endpoint at `base_url` (the child's own grader), offline only."""
    os.environ[JUDGE_URL_VAR] = base_url
    os.environ[JUDGE_KEY_VAR] = "local"
