"""The candidate environment: a stub until the coding agent builds one from spec.md."""

import verifiers.v1 as vf


class StubTaskset(vf.Taskset):
    def load(self):
        raise NotImplementedError(
            "candidate/ holds only the stub from main: no environment has been built yet. "
            "Write spec.md on a branch autoenv/<tag>, then have the coding agent follow "
            "program.md to build the environment in candidate/ (or try an example: "
            "autoenv demo)."
        )


__all__ = ["StubTaskset"]
