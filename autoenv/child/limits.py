"""Per-call time limits on the candidate's code, inside the evaluation's child process.

A reward or `load()` that never returns used to be stopped only by the stage's outer
deadline (minutes to hours), with no word of what hung. A synchronous `time.sleep` in a
reward blocks the event loop, so `asyncio.wait_for` alone cannot stop it: each limited
call runs in a daemon worker thread it has to itself (an async reward in that worker's own
event loop) and the caller waits at most its limit. Workers are reused from call to call
(a fresh thread and event loop per call cost more than a reward: 10k probe replies paid
seconds for them, and a reward's HTTP client bound to its loop was rebuilt every call);
a worker whose call breached is abandoned, never reused. On a breach the caller gets `TimeLimitExceeded`,
naming the call, the task and where the thread is stuck in the candidate's code.

Python cannot kill a thread: the stuck one is left behind, daemon, so it never holds
the child's exit; the child itself is ended after the evaluation's stages (end of stdin,
then SIGKILL of its process group), which stays the last wall. So that a hung reward
costs one limit and not one per reply, a call that breached is not made again: its
later calls fail at once with the same message.

Rewards that take verifiers' `runtime` are bound to the child's own event loop; they
are limited with `asyncio.wait_for` in that loop instead (an `await` that never returns
is stopped, a blocking call is not).

A batch of scoring (the audit's replies to one task, `run_watched`) takes one worker hop in all
instead of one per reward call: the hop cost more than a fast reward (~0.1 ms a call, thousands
of probe replies). Inside the batch each limited call runs in the worker's event loop, one reply
after another, registered with its start; the caller watches every registered call against its
own limit and, on a breach, names it exactly as a lone call would be named (`Breached` carries
the message), abandons the worker and scores the rest itself, call by call. Only rewards that
compute fast are batched: a reward that once awaited (a suspended coroutine) or ran long (its calls
in one batch together: a blocking wait, say) is not batched again, and the batch hands the rest
back, since it runs its replies one after another where lone calls overlap their waits (a
model-graded reward's HTTP round trips).

A slow reward is not a hang. A reward or metric call is a hang only when it has not returned within
HANG_FACTOR times its limit (the cap); one that returns past its limit but within the cap is slow
(a reward that shells out to a verifier, 12-19 s alone on two loaded cores, 30+ s beside seven
more). Slowness from contention is limited where it comes from, the component's own concurrency:
the first call of each component runs alone (the others wait for it, their wait not counted) and
is measured; a component whose call alone took over SERIAL_SHARE of its limit, or whose call ever
ran past its limit, runs one call at a time from then on (one at a time of all such components
together: what makes them slow, the machine's cores, is shared). A slow call is retried once, alone; only
when the retry is slow too is it given up ("slow (N s, then M s alone)...", the component then not
called again, as a hang is).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import queue
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

HOOKS = ("reward", "metric")
_breached: dict[str, str] = {}
INLINE_BATCH_SECONDS = 0.25
"""A hook whose calls in one watched batch took this long together (a blocking wait a call at a time, say) takes
a worker hop of its own for each call from then on, never a batch's: what a slow reward loses to a batch (which
runs its replies one after another) is bounded by this, once. Well above what a machine's load adds to a batch of
fast rewards (a few ms), which would only cost the batch's saving."""
WATCH_POLL_SECONDS = 0.05
"""How often the caller of a watched batch looks at the calls it runs (a breach is named this late at most)."""
_slow: set[str] = set()
HANG_FACTOR = 4.0
"""A reward or metric call not returned within this many times its limit is a hang (named, its worker abandoned);
one that returns between its limit and this cap is slow, retried once alone. Four limits cover a slow reward
contended eight ways on two cores (the audit scores up to SCORE_BATCH replies of a task at once)."""
SERIAL_SHARE = 0.5
"""A component whose first call, made alone, took more than this share of its limit runs one call at a time from
then on: eight of them beside each other on two cores would each take several times as long."""
_measured: dict[str, float] = {}
_serial: set[str] = set()
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


class TimeLimitExceeded(Exception):
    """A call into the candidate ran past its limit; the message names it and where it was stuck."""


class RewardValueError(TypeError):
    """A `@vf.reward` returned something that is not a real number (a string, None, a list...): an environment
    error naming the reward and the value, never silently coerced ("0.5" is not 0.5)."""


def real_number(value: Any, what: str) -> Any:
    """`value` when it is a bool, int or float; RewardValueError naming `what` otherwise."""
    if isinstance(value, (bool, int, float)):
        return value
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise RewardValueError(f"{what} returned {type(value).__name__} {shown}: a reward must return a real number "
                           "(bool, int or float)")


class _Worker:
    """A daemon thread that runs limited calls one at a time, with one event loop of its own for the
    coroutines among them (a reward's HTTP client bound to that loop is reused by its next call)."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True, name="autoenv-limited")
        self.thread.start()

    def _serve(self) -> None:
        while True:
            self.calls.get()()

    def run(self, fn: Callable[[], Any], box: dict[str, Any], finished: Callable[[], None]) -> None:
        def call() -> None:
            started = time.monotonic()
            try:
                value = fn()
                if inspect.iscoroutine(value):
                    if self.loop is None:
                        self.loop = asyncio.new_event_loop()
                    box["loop"] = self.loop
                    value = self.loop.run_until_complete(value)
                box["value"] = value
            except BaseException as e:  # handed to the caller as it is
                box["error"] = e
            finally:
                box["took"] = time.monotonic() - started
                finished()
        self.calls.put(call)


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _take() -> _Worker:
    with _idle_lock:
        return _idle.pop() if _idle else _Worker()


def _give_back(worker: _Worker) -> None:
    with _idle_lock:
        _idle.append(worker)


def run_limited(fn: Callable[[], Any], seconds: float, what: str, source: str | None = None) -> Any:
    """`fn()` in a daemon worker thread; its result, its exception, or TimeLimitExceeded after `seconds`.

    A coroutine function's coroutine is run to completion in the worker's event loop. `source`
    is the candidate's directory, for naming the stuck line. Workers are reused (a thread and an
    event loop per call cost more than most rewards); each call has a worker to itself, so its
    limit counts only its own time, and a worker whose call breached is left behind, never reused.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    worker = _take()
    worker.run(fn, box, done.set)
    return _outcome(worker, box, done.wait(seconds), what, seconds, source)


def _outcome(worker: _Worker, box: dict[str, Any], returned: bool, what: str, seconds: float,
             source: str | None) -> Any:
    """The call's value or exception once it returned (its worker back in the pool); TimeLimitExceeded naming
    where it is stuck when it did not (its worker abandoned)."""
    if not returned:
        where = stuck_at(worker.thread, box.get("loop"), source)
        raise TimeLimitExceeded(f"{what} did not return within {seconds:g} s" + (f" (stuck at {where})" if where else ""))
    _give_back(worker)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _awaitable_end() -> tuple[asyncio.Future[None], Callable[[], None]]:
    """A future of the running loop, and the callback a worker calls from its thread when its call has ended
    (which settles the future in that loop)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not done.done():
            done.set_result(None)

    def finished() -> None:
        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the caller's loop closed while an abandoned call was stuck: nobody waits
            pass

    return done, finished


async def run_limited_async(fn: Callable[[], Any], seconds: float, what: str, source: str | None = None) -> Any:
    """run_limited awaited from an event loop: the caller's loop waits on the worker without a thread of its own."""
    return (await _run_timed(fn, seconds, what, source))[0]


async def _run_timed(fn: Callable[[], Any], seconds: float, what: str, source: str | None,
                     cap: float | None = None) -> tuple[Any, float]:
    """run_limited_async waiting up to `cap` (a hang past it, named with both) where given; the value and the
    seconds the call took in its worker."""
    box: dict[str, Any] = {}
    done, finished = _awaitable_end()
    worker = _take()
    worker.run(fn, box, finished)
    try:
        await asyncio.wait_for(asyncio.shield(done), cap or seconds)
        returned = True
    except asyncio.TimeoutError:
        returned = False
    if not returned and cap is not None:
        what = f"{what} did not return within {seconds:g} s nor within {cap:g} s (a hang)"
        where = stuck_at(worker.thread, box.get("loop"), source)
        raise TimeLimitExceeded(what + (f" (stuck at {where})" if where else ""))
    return _outcome(worker, box, returned, what, seconds, source), box.get("took", 0.0)


def _slow_message(what: str, seconds: float, took: list[float]) -> str:
    first, again = took
    return (f"{what} was slow ({first:.1f} s, then {again:.1f} s alone): past its limit of {seconds:g} s, not a hang "
            "(it returned); make it faster or raise checks.max_reward_seconds")


def _measure(key: str, took: float, seconds: float) -> None:
    """What a component's call took: its first call's time kept; a component slow for its limit runs serially."""
    _measured.setdefault(key, took)
    if took > seconds or _measured[key] > SERIAL_SHARE * seconds:
        _serial.add(key)


@asynccontextmanager
async def _alone(key: str) -> AsyncIterator[None]:
    """The call alone while its component is unmeasured or measured slow: one such call at a time in this event
    loop, of every such component together (what makes them slow, the machine, is shared)."""
    if key in _measured and key not in _serial:
        yield
        return
    lock = _gates.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with lock:
        yield


async def _tried(attempt: Callable[[], Awaitable[tuple[Any, float]]], seconds: float, what: str, key: str,
                 alone: bool = True) -> Any:
    """A limited call of component `key` (`attempt`: its value and the seconds it took, a hang raised): made alone
    while the component is unmeasured or slow (where `alone`), retried once when slow, given up when slow again."""
    took: list[float] = []
    while True:
        if alone:
            async with _alone(key):
                if key in _breached:  # it hung or was given up on while this call waited its turn
                    raise TimeLimitExceeded(f"{_breached[key]}; not called again")
                value, spent = await attempt()
        else:
            value, spent = await attempt()
        _measure(key, spent, seconds)
        if spent <= seconds:
            return value
        took.append(spent)
        if len(took) == 2:
            raise TimeLimitExceeded(_slow_message(what, seconds, took))


class Breached(Exception):
    """Calls of a watched batch (run_watched) ran past their limits: `fresh` maps each one's hook key to its
    message (the one a lone call would have raised), `unit` is the batch's unit (watch_unit) they were made in;
    the batch's worker is abandoned. The hooks count as breached (`breaches()`, "not called again") once the
    caller has called them again under `fresh_breaches(fresh)`, which raises that message: the units that ran
    beside the stuck one in a lone-call run can be scored first."""

    def __init__(self, fresh: dict[str, str], unit: int) -> None:
        super().__init__("; ".join(fresh.values()))
        self.fresh, self.unit = fresh, unit


class _Call:
    __slots__ = ("what", "seconds", "key", "unit", "started")

    def __init__(self, what: str, seconds: float, key: str, unit: int) -> None:
        self.what, self.seconds, self.key, self.unit, self.started = what, seconds, key, unit, time.monotonic()

    @property
    def cap(self) -> float:
        return self.seconds * HANG_FACTOR


class _Watch:
    """The limited calls of one watched batch in flight, as its worker runs them (read by the caller's thread)."""

    def __init__(self) -> None:
        self.calls: dict[int, _Call] = {}
        self.spent: dict[str, float] = {}
        self.stopped = False
        self.unit = 0

    async def run(self, fn: Callable[[], Any], what: str, seconds: float, key: str) -> Any:
        """`fn()` watched (a hang past its cap); a slow call retried once (the batch's calls are one at a time)."""
        return await _tried(lambda: self._once(fn, what, seconds, key), seconds, what, key, alone=False)

    async def _once(self, fn: Callable[[], Any], what: str, seconds: float, key: str) -> tuple[Any, float]:
        call = _Call(what, seconds, key, self.unit)
        self.calls[id(call)] = call
        suspended: list[bool] = []  # the loop runs this only if the call's coroutine gave it control (an await)
        mark = asyncio.get_running_loop().call_soon(suspended.append, True)
        try:
            value = fn()
            value = (await value) if inspect.iscoroutine(value) else value
            return value, time.monotonic() - call.started
        finally:
            mark.cancel()
            del self.calls[id(call)]
            wall = time.monotonic() - call.started
            self.spent[key] = spent = self.spent.get(key, 0.0) + wall
            if suspended or spent > INLINE_BATCH_SECONDS:
                _slow.add(key)


_watch: contextvars.ContextVar[_Watch | None] = contextvars.ContextVar("autoenv_limits_watch", default=None)
_fresh: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("autoenv_limits_fresh", default=None)


async def run_watched(fn: Callable[[], Awaitable[Any]], source: str | None = None) -> Any:
    """`await fn()` in one worker's event loop, the limited calls it makes run there too, each watched from here
    against its own limit; its value, its exception, or Breached (its worker abandoned) once a call ran past its
    limit. `fn` should stop early when `watch_stopped()` turns true (the caller has given up on it)."""
    watch = _Watch()

    async def watched() -> Any:
        _watch.set(watch)  # this task's context only: the worker's later calls do not see it
        return await fn()

    box: dict[str, Any] = {}
    done, finished = _awaitable_end()
    worker = _take()
    worker.run(watched, box, finished)
    overdue: list[_Call] = []
    while not done.done():
        now = time.monotonic()
        calls = list(watch.calls.copy().values())
        overdue = [c for c in calls if now - c.started >= c.cap]
        if overdue:
            break
        try:
            await asyncio.wait_for(asyncio.shield(done),
                                   min([c.started + c.cap - now for c in calls] + [WATCH_POLL_SECONDS]))
        except asyncio.TimeoutError:
            pass
    if done.done():
        return _outcome(worker, box, True, "", 0.0, source)
    watch.stopped = True
    where = stuck_at(worker.thread, worker.loop, source)
    raise Breached({call.key: f"{call.what} did not return within {call.seconds:g} s nor within {call.cap:g} s (a hang)"
                    + (f" (stuck at {where})" if where else "") for call in overdue}, min(c.unit for c in overdue))


def watch_stopped() -> bool:
    """Inside a watched batch: whether its caller has given up on it (a call breached its limit)."""
    watch = _watch.get()
    return watch is not None and watch.stopped


def watch_unit(unit: int) -> None:
    """Inside a watched batch: the calls made from here on belong to `unit` (a reply's index), which a Breached
    names."""
    watch = _watch.get()
    if watch is not None:
        watch.unit = unit


@contextmanager
def fresh_breaches(fresh: dict[str, str]) -> Iterator[None]:
    """Calls of these hooks made here raise their breach message at once (and mark the hook breached), not
    "...; not called again": the unit (a reply) whose call breached inside a watched batch, scored again outside
    it, reads as it would have read alone."""
    token = _fresh.set(fresh)
    try:
        yield
    finally:
        _fresh.reset(token)


def batchable(hooks: Iterable[Any]) -> bool:
    """Whether these bound hooks may run inside a watched batch: each one limited (limit_hooks) in a worker (not
    bound to the caller's loop by verifiers' `runtime`), none of them ever seen waiting or running long in one."""
    return all(getattr(fn, "_autoenv_limited", False) and not getattr(fn, "_autoenv_runtime", True)
               and _key(fn.__self__, fn.__name__) not in _slow for fn in hooks)


def _key(task: Any, name: str) -> str:
    return f"{type(task).__qualname__}.{name}"


def stuck_at(thread: threading.Thread, loop: asyncio.AbstractEventLoop | None, source: str | None) -> str | None:
    """The innermost line of the candidate's code the thread is in (a blocking call), or that
    its event loop's coroutines wait in (an await that never returns)."""
    frames: list[FrameType] = []
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    if loop is not None:
        try:
            tasks = list(asyncio.all_tasks(loop))
        except RuntimeError:  # the set changed while read from this thread: no coroutine detail
            tasks = []
        for task in tasks:
            frames.extend(reversed(_awaiting(task.get_coro())))
    for frame in frames:
        if _is_candidate(frame.f_code.co_filename, source):
            return f"{_short(frame.f_code.co_filename, source)}:{frame.f_lineno} in {frame.f_code.co_name}"
    return None


def _awaiting(coro: Any) -> list[FrameType]:
    """The frames of a coroutine and of what it awaits, outermost first."""
    frames = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def _is_candidate(filename: str, source: str | None) -> bool:
    return source is not None and Path(filename).resolve().is_relative_to(Path(source).resolve())


def _short(filename: str, source: str | None) -> str:
    path = Path(filename).resolve()
    return str(path.relative_to(Path(source).resolve())) if source and path.is_relative_to(Path(source).resolve()) else filename


def limit_hooks(task_cls: type, seconds: float, stage: str, source: str | None) -> None:
    """Wrap every `@vf.reward` and `@vf.metric` method of `task_cls` (and of its candidate base
    classes) in a per-call time limit. Idempotent. A breach raises TimeLimitExceeded inside
    the call, which verifiers records as the trace's environment error (the score is missing).
    """
    for klass in task_cls.__mro__:
        if klass.__module__.split(".")[0] in ("verifiers", "builtins", "pydantic"):
            continue
        for name, member in list(vars(klass).items()):
            kind = next((k for k in HOOKS if getattr(member, k, None) is True), None)
            if kind is None or getattr(member, "_autoenv_limited", False) or not inspect.iscoroutinefunction(member):
                continue
            setattr(klass, name, _limited(member, kind, seconds, stage, source))


def _limited(fn: Callable[..., Any], kind: str, seconds: float, stage: str, source: str | None) -> Callable[..., Any]:
    uses_runtime = "runtime" in inspect.signature(fn).parameters
    label = f"{kind} {fn.__name__!r}"

    @functools.wraps(fn)
    async def limited(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = _key(self, fn.__name__)
        fresh = (_fresh.get() or {}).get(key)
        if key in _breached and fresh is None:
            raise TimeLimitExceeded(f"{_breached[key]}; not called again")
        idx = getattr(getattr(self, "data", None), "idx", None)
        what = f"{label} on task idx {idx} in the {stage} stage"
        watch = _watch.get()

        async def call() -> Any:
            if uses_runtime:
                async def in_loop() -> tuple[Any, float]:
                    started = time.monotonic()
                    try:
                        value = await asyncio.wait_for(fn(self, *args, **kwargs), seconds * HANG_FACTOR)
                    except asyncio.TimeoutError:
                        raise TimeLimitExceeded(f"{what} did not return within {seconds:g} s nor within "
                                                f"{seconds * HANG_FACTOR:g} s (a hang)") from None
                    return value, time.monotonic() - started
                return await _tried(in_loop, seconds, what, key)
            if watch is not None:  # inside a watched batch, already in a worker: its caller keeps the limit
                return await watch.run(lambda: fn(self, *args, **kwargs), what, seconds, key)
            return await _tried(lambda: _run_timed(lambda: fn(self, *args, **kwargs), seconds, what, source,
                                                   seconds * HANG_FACTOR), seconds, what, key)

        try:
            if fresh is not None:  # this call breached inside a watched batch: it says so here
                raise TimeLimitExceeded(fresh)
            try:
                value = await call()
            except SystemError as e:
                if not ast_race(e):
                    raise
                value = await call()  # the race needs another thread inside the AST constructor at that instant
            return real_number(value, what) if kind == "reward" else value
        except TimeLimitExceeded as e:
            _breached.setdefault(key, str(e))
            raise

    limited._autoenv_limited = True  # type: ignore[attr-defined]
    limited._autoenv_runtime = uses_runtime  # type: ignore[attr-defined]
    # the signature verifiers reads on every call (which arguments to pass), computed once: the same one
    # inspect.signature finds through __wrapped__, without unwrapping and rebuilding it each time
    limited.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return limited


def ast_race(error: BaseException) -> bool:
    """Whether `error` is CPython's false "AST constructor recursion depth mismatch" (gh-106905, 3.11): the AST
    constructor's depth counter is shared by the interpreter's threads, so `ast.parse` (sympy's `parse_expr`, a
    reward that reads code) can raise it when another thread builds an AST at the same time, as the rewards this
    child scores in its worker threads do. Not the candidate's error: the call is made once more. A call that raises
    it again is charged as any error is (a reward that raises it on purpose gains nothing)."""
    return isinstance(error, SystemError) and str(error).startswith("AST constructor recursion depth mismatch")


def breaches() -> Iterable[str]:
    """Every hook that breached its limit in this process, as its message."""
    return list(_breached.values())
