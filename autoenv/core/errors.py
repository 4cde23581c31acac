"""The one error type a user sees: what went wrong, where, and what to do next."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class AutoEnvError(Exception):
    """A failure the user can act on.

    Every user-facing error carries three parts so the message is never a bare
    traceback: `what` happened, `where` (a file, a key, a line, a commit) and `fix`
    (the next thing to try). The CLI prints them and exits with `exit_code`.
    """

    exit_code = 2  # bad input: nothing was recorded

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None):
        super().__init__(what)
        self.what = what
        self.where = where
        self.fix = fix

    def __str__(self) -> str:
        parts = [self.what]
        if self.where:
            parts.append(f"where: {self.where}")
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "\n".join(parts)


class ProviderUnavailable(AutoEnvError):
    """A model endpoint did not answer (down, busy, unreachable): the provider's fault, never the candidate's.

    Exit 3. Found in preflight it records nothing; found by the smoke rollout it records an
    `inconclusive` entry whose reason starts with "provider unavailable".
    """

    exit_code = 3


class EngineUnavailable(ProviderUnavailable):
    """The container engine of a docker/podman runtime did not answer (stopped, crashed, unreachable):
    infrastructure, never the candidate's. Recorded like an unavailable provider: an `inconclusive`
    entry whose reason starts with "runtime engine unavailable", exit 3."""


def validation_problems(e: ValidationError) -> str:
    """A pydantic validation error, for a file the child wrote: the first three problems, each as
    `dotted.key: message` (the top level named as such), and how many more there are."""
    text = "; ".join(f"{'.'.join(str(p) for p in error['loc']) or '(top level)'}: {error['msg']}"
                     for error in e.errors()[:3])
    return text + (f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else "")
