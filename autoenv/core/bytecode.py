"""AutoEnv's own modules compiled to bytecode once, at setup, so that no process compiles them again.

Every `autoenv` command and every evaluation's child imports about 200 of AutoEnv's modules. Python compiles a
module it has no current bytecode for each time it imports it, and writes the result only where it may: never
inside the sandbox (the child sees AutoEnv's source read-only, so the modules only it imports were compiled anew
by every child), and nowhere when PYTHONDONTWRITEBYTECODE is set (as on the project's CI machine: every command
compiled everything). Compiled here they are read, not compiled: about 0.3 CPU-seconds saved per process. A module
edited later is compiled in memory again, as before, until the next setup (bytecode is checked against its
source's time and size, so a stale file is never run).
"""

from __future__ import annotations

import compileall
import io
from contextlib import redirect_stdout

from autoenv.core.paths import PROJECT


def compile_own() -> str:
    """Compile the autoenv package and the in-process harness's module; what was done, in a line."""
    package, harness = PROJECT / "autoenv", PROJECT / "autoenv_inprocess.py"
    sources = [p for p in package.rglob("*.py") if "__pycache__" not in p.parts] + [harness]
    with redirect_stdout(io.StringIO()) as said:  # compileall prints what failed; it is shown below
        ok = compileall.compile_dir(package, quiet=1) and compileall.compile_file(harness, quiet=1)
    if not ok:
        return f"some of AutoEnv's modules did not compile (they are compiled when imported): {said.getvalue()[-500:]}"
    return f"{len(sources)} modules of AutoEnv compiled to bytecode (__pycache__/, read by every later process)"
