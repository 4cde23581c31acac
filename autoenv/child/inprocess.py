"""The in-process harness: verifiers' own null-harness chat program, run inside the rollout's event loop.

Why: verifiers' stock `null` harness starts a PEP 723 chat-program process per rollout
(a fresh interpreter importing openai, httpx, mcp: ~1.3 CPU-seconds on 2 cores), which is
nearly all of an offline evaluation's time. The model calls, tool calls and scoring are
identical whether that program runs in a child process or as a coroutine, because
verifiers' own interception proxy records the trace either way (verifiers' `Harness.launch`
contract allows an in-process loop as long as every model call goes through `endpoint`).

How, without patching or copying verifiers:
- the program is `CHAT_PROGRAM_SOURCE`, the exact text the null harness hands to uv (its
  `mcp`, `compaction` and `core` modules bundled), executed once into a private module
  namespace (`autoenv_chat_program`, never `__main__`, so its entry point stays inert);
- `InProcessHarness.launch` is the null harness's own `launch` (so verifiers' own
  `launch_chat_program` builds the argv) given a runtime view whose `prepare_uv_script`
  names the loaded program and whose `run_program` awaits its `main()` with that argv;
- per rollout, through context variables read by four names rebound in the private
  namespace only: `parse_args` parses the rollout's own argv; `AsyncOpenAI` and
  `httpx.AsyncClient` record the clients the program opens, closed when it returns however
  it returns; `traceback.print_exc` writes to the rollout's own stderr;
- a fifth, `certifi.where()`, names certifi's own certificates as a hashed folder instead of
  their bundle file, when the harness built one (autoenv.sandbox.trust): the program's
  `verify=certifi.where()` then trusts the same certificates without parsing ~140 of them
  for every client it makes (25 ms each, a third of a tool env's audit);
- the way it ends becomes the `ProgramResult` a dying process would have given: return ->
  exit 0; `SystemExit(n)` -> exit n (97 for the program's model-transport failure, with the
  traceback it printed as stderr); any other exception -> exit 1 with the traceback as stderr.
  A cancelled rollout (its timeout) cancels the coroutine as the stock runtime kills the process.

The harness id is `autoenv-inprocess`: verifiers resolves an id it does not ship by
importing the top-level module of that name (`autoenv_inprocess`, installed by our
pyproject) and taking the one Harness subclass in its `__all__`. It runs where the
program would run on this host: the subprocess runtime only (a container or sandbox
runtime gets the stock harness, which runs the program inside it).
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import io
import linecache
import os
import sys
import traceback
import types
from collections import Counter
from pathlib import Path
from typing import Any

from autoenv.sandbox.trust import certified_folder

HARNESS_ID = "autoenv-inprocess"
STOCK_HARNESS_ID = "null"
PROGRAM_NAME = "autoenv_chat_program"
PROGRAM_ARGV0 = "<autoenv in-process chat program>"
# What the bundled chat program imports (core at the top, mcp when a task has tools).
PROGRAM_PACKAGES = ("openai", "httpx", "httpx2", "tenacity", "certifi", "mcp", "anyio")

_argv: contextvars.ContextVar[list[str]] = contextvars.ContextVar("autoenv_chat_argv")
_clients: contextvars.ContextVar[list] = contextvars.ContextVar("autoenv_chat_clients")
_stderr: contextvars.ContextVar[io.StringIO] = contextvars.ContextVar("autoenv_chat_stderr")
seat: contextvars.ContextVar[str] = contextvars.ContextVar("autoenv_seat", default="")
"""The role whose rollout runs in this context (set by the rollouts stage), for counting retries."""
client_retries: Counter[str] = Counter()
"""Retries the chat program's OpenAI client made (a 429, 5xx or dropped connection sent again), by role."""


def unavailable_reason() -> str | None:
    """Why the in-process harness cannot run with the installed verifiers, or None when it can."""
    try:
        from verifiers.v1.harnesses.null import NullHarness  # noqa: F401 (deferred: verifiers only in the worker)
        from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE, launch_chat_program  # noqa: F401 (deferred: verifiers only in the worker)
    except ImportError as e:
        return f"the installed verifiers has no null harness chat program to run in-process ({e})"
    missing = [name for name in PROGRAM_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        return f"the chat program's packages are not installed in this venv: {', '.join(missing)}"
    try:
        program()
    except Exception as e:  # a future verifiers whose program no longer has main/parse_args
        return f"verifiers' chat program could not be loaded in-process: {type(e).__name__}: {e}"
    return None


@functools.cache
def program() -> types.ModuleType:
    """The null harness's chat program, loaded once into a private module namespace."""
    from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE  # deferred: verifiers only in the worker

    filename = f"<verifiers chat program {hash(CHAT_PROGRAM_SOURCE) & 0xFFFFFFFF:08x}>"
    # Tracebacks through the program then show its source lines, as they would from the script.
    linecache.cache[filename] = (len(CHAT_PROGRAM_SOURCE), None, CHAT_PROGRAM_SOURCE.splitlines(True), filename)
    module = types.ModuleType(PROGRAM_NAME, "verifiers' null-harness chat program (run in-process by autoenv)")
    module.__file__ = filename
    exec(compile(CHAT_PROGRAM_SOURCE, filename, "exec"), module.__dict__)
    for name in ("main", "parse_args", "AsyncOpenAI", "httpx", "traceback"):
        if name not in module.__dict__:
            raise AttributeError(f"the chat program defines no `{name}`")
    _rebind(module.__dict__)
    return module


def _rebind(ns: dict) -> None:
    """Make the program's process-wide assumptions per-rollout (see the module docstring)."""
    parse_args, openai_client, httpx_module, traceback_module = ns["parse_args"], ns["AsyncOpenAI"], ns["httpx"], ns["traceback"]

    def rollout_parse_args():
        saved = sys.argv
        sys.argv = [PROGRAM_ARGV0, *_argv.get()]
        try:  # synchronous: no other rollout can run between these lines
            return parse_args()
        finally:
            sys.argv = saved

    class TrackedAsyncOpenAI(openai_client):  # type: ignore[valid-type,misc]  # a class from the program's namespace
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _clients.get().append(self.close)

        async def _sleep_for_retry(self, *args, **kwargs):  # the openai client's one path to a retry
            client_retries[seat.get() or "?"] += 1
            return await super()._sleep_for_retry(*args, **kwargs)

    class TrackedAsyncClient(httpx_module.AsyncClient):  # type: ignore[name-defined]  # the program's httpx
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _clients.get().append(self.aclose)

    rollout_httpx = types.ModuleType("httpx")
    rollout_httpx.__dict__.update(httpx_module.__dict__)
    rollout_httpx.AsyncClient = TrackedAsyncClient  # type: ignore[attr-defined]  # a module built here

    rollout_traceback = types.ModuleType("traceback")
    rollout_traceback.__dict__.update(traceback_module.__dict__)
    rollout_traceback.print_exc = lambda limit=None, file=None, chain=True: traceback_module.print_exc(  # type: ignore[attr-defined]  # a module built here
        limit=limit, file=file or _stderr.get(), chain=chain)

    ns.update(parse_args=rollout_parse_args, AsyncOpenAI=TrackedAsyncOpenAI, httpx=rollout_httpx,
              traceback=rollout_traceback)
    certifi_module = ns.get("certifi")
    folder = certified_folder(os.environ, certifi_module.where()) if certifi_module is not None else None
    if folder is not None:  # the same certificates, as a folder OpenSSL reads lazily (autoenv.sandbox.trust)
        rollout_certifi = types.ModuleType("certifi")
        rollout_certifi.__dict__.update(certifi_module.__dict__)
        rollout_certifi.where = lambda: folder  # type: ignore[attr-defined]  # a module built here
        ns["certifi"] = rollout_certifi


async def run_program(args: list[str], workdir: Path | None = None):
    """Run the chat program with argv `args` in this event loop; its end as a ProgramResult."""
    from verifiers.v1.runtimes import ProgramResult  # deferred: verifiers only in the worker

    if workdir is not None:
        # The runtime wrote the initial-messages file into its working directory, the
        # program's cwd when it runs as a process there; here the cwd is the worker's.
        prefix = "--initial-messages-file="
        args = [f"{prefix}{workdir / a[len(prefix):]}" if a.startswith(prefix) and not Path(a[len(prefix):]).is_absolute()
                else a for a in args]
    module = program()
    stderr, clients = io.StringIO(), list[Any]()
    tokens = (_argv.set(list(args)), _clients.set(clients), _stderr.set(stderr))
    exit_code = 0
    try:
        await module.main()
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            exit_code = e.code or 0
        else:  # `sys.exit("message")` prints the message and exits 1
            stderr.write(f"{e.code}\n")
            exit_code = 1
    except Exception:  # an uncaught error: the interpreter prints the traceback and exits 1
        stderr.write(traceback.format_exc())
        exit_code = 1
    finally:
        for close in reversed(clients):
            try:
                await close()
            except Exception as e:  # closing noise must not hide how the program ended
                stderr.write(f"closing a client failed: {type(e).__name__}: {e}\n")
        _argv.reset(tokens[0])
        _clients.reset(tokens[1])
        _stderr.reset(tokens[2])
    return ProgramResult(exit_code=exit_code, stdout="", stderr=stderr.getvalue())


class _ProgramHost:
    """The rollout's runtime, except that the chat program runs here instead of as a process."""

    def __init__(self, runtime):
        self._runtime = runtime

    def __getattr__(self, name):
        return getattr(self._runtime, name)

    async def prepare_uv_script(self, script, env=None, *, activate=True) -> list[str]:
        from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE  # deferred: verifiers only in the worker

        if script != CHAT_PROGRAM_SOURCE:
            raise RuntimeError("the in-process harness runs only the null harness's chat program")
        return [PROGRAM_ARGV0]

    async def run_program(self, argv: list[str], env: dict[str, str]):
        if not argv or argv[0] != PROGRAM_ARGV0:
            return await self._runtime.run_program(argv, env)
        workdir = getattr(self._runtime, "workdir", None)
        return await run_program(argv[1:], Path(workdir) if workdir else None)


def harness_class():
    """InProcessHarness, defined on first use so importing autoenv stays free of verifiers."""
    return _harness_class()


@functools.cache
def _harness_class():
    from verifiers.v1.harnesses.null import NullHarness  # deferred: verifiers only in the worker

    class InProcessHarness(NullHarness):
        """verifiers' null harness with its chat program run as a coroutine in the rollout's loop."""

        async def setup(self, runtime) -> None:
            program()  # nothing for uv to prepare

        async def launch(self, ctx, trace, runtime, *args, **kwargs):
            return await super().launch(ctx, trace, _ProgramHost(runtime), *args, **kwargs)

    InProcessHarness.__module__ = "autoenv_inprocess"
    return InProcessHarness
