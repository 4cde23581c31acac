"""Where each rollout's chat program runs, and which harness drives the chat: `[runtime]` in the child.

verifiers runs each rollout's chat program in a runtime (the candidate's tool servers keep
their toolset's own, subprocess unless it names one):
`subprocess` (this machine, the default) or its container and sandbox runtimes (`docker`,
`podman`, `modal`, `prime`, `e2b`) for scale-out. The settings are checked when config.toml loads
(autoenv.core.runtimes); this module turns the job's runtime into verifiers' seat value.

The in-process harness (autoenv.child.inprocess) needs the chat program to reach the model
endpoint and the tool servers from this host, which holds only for the subprocess runtime;
anywhere else, or when the installed verifiers lacks what it needs, the stock `null`
harness is used and the worker says so in one line.
"""

from __future__ import annotations

from autoenv.child import inprocess
from autoenv.child.inprocess import HARNESS_ID, STOCK_HARNESS_ID
from autoenv.core.job import RuntimeSpec


def _spec(job_runtime: RuntimeSpec | dict | None) -> RuntimeSpec:
    return job_runtime if isinstance(job_runtime, RuntimeSpec) else RuntimeSpec.model_validate(job_runtime or {})


def seat_runtime(job_runtime: RuntimeSpec | dict | None) -> dict:
    """The verifiers seat `runtime` value for a worker job's `runtime` field."""
    spec = _spec(job_runtime)
    return {**spec.settings, "type": spec.type}


def choose_harness(job_runtime: RuntimeSpec | dict | None) -> tuple[str, str | None]:
    """(verifiers harness id, a one-line note when the wanted harness cannot be used)."""
    spec = _spec(job_runtime)
    if spec.harness == "stock":
        return STOCK_HARNESS_ID, None
    kind = spec.type
    if kind != "subprocess":
        return STOCK_HARNESS_ID, (f"harness: verifiers' stock null harness (the in-process harness needs the "
                                  f"subprocess runtime; runtime.type is {kind})")
    reason = inprocess.unavailable_reason()
    if reason:
        return STOCK_HARNESS_ID, f"harness: verifiers' stock null harness ({reason})"
    return HARNESS_ID, None


