"""Episodes the env itself ended by raising on an off-contract reply: rejections by design, not reward errors.

verifiers lets an Env refuse what it cannot use: `SolveTask.from_trace` raising on a proposer
reply without its JSON contract fails the episode (retryable) instead of scoring solvers against
garbage. A probe's off-contract reply meets exactly that, so an episode-level error raised from
the candidate's own code is recorded as a rejection. The gates then warn with the RL consequence
(a rejected rollout carries no reward, so a policy that keeps writing off-contract replies gets no
gradient from them) unless the reference reply is rejected as well: that is an environment error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def raised_where(traceback: str | None) -> tuple[str, int, str] | None:
    """The innermost frame (file, line, function) of a formatted traceback's first exception (the cause, when
    verifiers wrapped it: `EnvError: MyEnv.run(): ValueError: ...`), or None."""
    first = re.split(r"\n\s*The above exception was the direct cause|\n\s*During handling of the above", traceback or "")[0]
    frames = FRAME.findall(first)
    return (frames[-1][0], int(frames[-1][1]), frames[-1][2]) if frames else None


def own_code(path: str, roots: list[Path], modules: list[str]) -> bool:
    """Whether `path` is a file of the candidate (under one of `roots`, or inside one of its packages)."""
    resolved = Path(path).resolve() if path and not path.startswith("<") else None
    if resolved is None:
        return False
    if any(resolved.is_relative_to(r) for r in roots):
        return True
    return any(f"/{m}/" in resolved.as_posix() for m in modules)


def rejection(errors: list[dict[str, Any]], roots: list[Path], modules: list[str]) -> str | None:
    """`Type: message (file:line in fn)` when an episode error was raised by the candidate's own code, else None."""
    for error in errors:
        where = raised_where(error.get("traceback"))
        if where and own_code(where[0], roots, modules):
            name = Path(where[0]).name
            return f"{error.get('type', 'Error')}: {error.get('message', '')} ({name}:{where[1]} in {where[2]})"[:400]
    return None


def consequence(rejected: int, total: int) -> str:
    """What rejections by design mean for RL."""
    return (f"{rejected} of {total} probe episodes were rejected by the env raising on an off-contract reply "
            "(by design: the episode is dropped and retryable, not scored). In RL a rejected rollout carries no "
            "reward: a policy that writes off-contract replies gets no gradient away from them unless the trainer "
            "scores dropped episodes (or the env gives them 0 instead of raising)")
