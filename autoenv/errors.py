"""The one error type a user sees: what went wrong, where, and what to do next."""

from __future__ import annotations


class AutoEnvError(Exception):
    """A failure the user can act on.

    Every user-facing error carries three parts so the message is never a bare
    traceback: `what` happened, `where` (a file, a key, a line, a commit) and `fix`
    (the next thing to try). The CLI prints them and exits non-zero.
    """

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
