"""`autoenv run <tag>`: launch the coding agent, relaunch it, nudge it, and end it at a budget.

One launch is one headless agent process in the run's worktree (its own process group),
its stdout the transcript. While it runs the driver polls, every `poll` seconds: the
transcript (tokens, cost), the ledger (new evaluations and what they cost) and, less
often, HEAD and the evaluation locks (is one running, and in which stage: while one runs
a heartbeat line says its commit, stage and elapsed time at least every 30 s, or a live line
on a terminal). An `autoenv eval --env` entry evaluated another environment: it is printed
and its cost counts, but it is not one of the run's evaluations nor its last verdict. Then:

- a budget spent: `stopping` goes into driver.json first (the evaluation gate then refuses
  any new evaluation), the driver waits for a running evaluation of the last allowed one
  to finish recording, and ends the agent (SIGTERM to its group, SIGKILL after `grace`); an
  evaluation ended by the hours or USD budget is interrupted as by Ctrl-C: nothing recorded;
- no commit, no evaluation and none running for `stall_minutes`: the launch is ended and the
  session resumed with a nudge;
- the agent stopped by itself: the session is resumed with a continue prompt holding the last
  verdict. A launch that fails (or does nothing) several times in a row ends the run, and a
  launch that reports it cannot log in ends it at once: relaunching cannot fix either.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from autoenv.core import display
from autoenv.core.config import CONFIG_NAME, Config, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.formats import iso_now, shorten
from autoenv.core.record import Entry
from autoenv.driver import prompts
from autoenv.driver.agents import AgentSpec, argv, check_ready, choose
from autoenv.driver.budget import Limits, Spend, exhausted
from autoenv.driver.gate import driver_dir
from autoenv.driver.settings import write_settings
from autoenv.driver.state import DriverLock, log_event, read_json, write_json
from autoenv.driver.transcript import LaunchStats, Transcript
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import read_entries
from autoenv.run.lifecycle import new_run
from autoenv.run.runbase import BRANCH_PREFIX, harness_paths

ENDED = {"agent": "the agent stopped", "nudge": "stalled: nudged", "budget": "a budget is spent"}
AUTH_ERRORS = ("invalid api key", "not logged in", "please run /login", "authentication_error", "401")


@dataclass
class RunOptions:
    cwd: Path
    tag: str
    agent: str | None = None
    command: str | None = None
    max_evals: int | None = None
    max_hours: float | None = None
    max_usd: float | None = None
    stall_minutes: float | None = None
    poll: float = 0.5
    """Seconds between looks at the transcript and the ledger."""
    heartbeat: float | None = None
    """Seconds between the lines that say an evaluation is still running (off a terminal); default
    display's PROGRESS_SECONDS (AUTOENV_PROGRESS_SECONDS overrides it)."""
    grace: float = 30.0
    """Seconds an ended agent (and its evaluation) gets after SIGTERM before SIGKILL."""
    max_failures: int = 3
    """Launches in a row that fail, or end without a commit or an evaluation, before the run stops."""
    env: dict[str, str] | None = None
    new: dict | None = None
    """Start the run first (autoenv new): {"spec": Path | None, "example": str | None, "worktree": Path | None}."""


@dataclass
class Summary:
    tag: str
    root: Path
    stop: str = ""
    launches: int = 0
    nudges: int = 0
    spend: Spend = field(default_factory=Spend)
    last: Entry | None = None
    session_id: str = ""
    directory: Path = Path(".")
    uncommitted: list[str] = field(default_factory=list)


def find_root(repo: Repo, tag: str) -> Path:
    """The worktree that has the run's branch checked out."""
    branch = BRANCH_PREFIX + tag
    if not tag or not repo.valid_branch(branch) or not repo.branch_exists(branch):
        raise AutoEnvError(f"there is no run {branch!r}", where=f"{repo.root} (branches autoenv/*)",
                           fix=f"start it first: autoenv new {tag or '<tag>'} --example arithmetic "
                               f"[--worktree ../run-{tag or 'tag'}]")
    current, found = None, None
    for line in repo.run_git("worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            current = Path(line[len("worktree "):])
        elif line == f"branch refs/heads/{branch}":
            found = current
    if found is None:
        raise AutoEnvError(f"the run {branch} is not checked out in any worktree", where=str(repo.root),
                           fix=f"git switch {branch} (here), or git worktree add ../run-{tag} {branch}")
    return found


class Driver:
    def __init__(self, options: RunOptions):
        self.o = options
        self.env = dict(options.env if options.env is not None else os.environ)
        self.env.pop("CLAUDECODE", None)  # a nested Claude Code refuses to start otherwise

    def prepare(self) -> None:
        """Every check that can refuse, before anything is written or started."""
        o = self.o
        if o.new is not None:
            here = Repo(o.cwd)
            config = load_config(here.root / CONFIG_NAME)  # the agent and budgets are checked before the run exists
            a = config.agent
            Limits.choose(Limits(a.max_evals, a.max_hours, a.max_usd), o.max_evals, o.max_hours, o.max_usd)
            check_ready(choose(a, o.agent, o.command), self.env)
            new_run(o.cwd, o.tag, **o.new)
        self.root = find_root(Repo(o.cwd), o.tag)
        self.repo = Repo(self.root)
        self.config: Config = load_config(self.root / CONFIG_NAME)
        a = self.config.agent
        self.limits = Limits.choose(Limits(a.max_evals, a.max_hours, a.max_usd), o.max_evals, o.max_hours, o.max_usd)
        if o.stall_minutes is not None and o.stall_minutes <= 0:
            raise AutoEnvError(f"--stall-minutes {o.stall_minutes} must be above zero", where="--stall-minutes",
                               fix="pass a positive number of minutes, or leave it out ([agent] stall_minutes)")
        self.stall = 60 * (o.stall_minutes if o.stall_minutes is not None else a.stall_minutes)
        self.spec: AgentSpec = choose(a, o.agent, o.command)
        check_ready(self.spec, self.env)
        self.dir = driver_dir(self.config.path("outputs"), o.tag)
        self.lock = DriverLock(self.dir)
        self.lock.probe()  # a second driver is named by PID, before the first one's work in progress counts as dirt
        self.head = self.repo.head().commit
        self.repo.require_clean(harness_paths(self.config), self.head)
        self.lock.acquire()

    def run(self) -> Summary:
        self.prepare()
        try:
            return self._run()
        finally:
            write_json(self.dir / "driver.json", {**self._state(), "pid": 0, "ended": iso_now()})
            self.lock.release()

    # -- the loop --------------------------------------------------------------------------------

    def _run(self) -> Summary:
        self.settings = write_settings(self.repo)
        self.log = self.config.path("log_file")
        self.ledger_start = len(read_entries(self.log)) if self.log.is_file() else 0
        self._ledger_size = self._size()
        self.spend = Spend()
        self.started = time.monotonic()
        self.stopping: str | None = None
        session = read_json(self.dir / "session.json")
        resumed = session.get("kind") == self.spec.kind and bool(session.get("session_id"))
        self.session_id = session["session_id"] if resumed else (str(uuid.uuid4()) if self.spec.pins_session else "")
        self.launch_no = int(session.get("launches", 0)) if resumed else 0
        summary = Summary(tag=self.o.tag, root=self.root, directory=self.dir)
        self.last: Entry | None = self._last_entry()
        log_event(self.dir, "start", pid=os.getpid(), agent=self.spec.kind, session_id=self.session_id,
                  resumed=resumed, limits=vars(self.limits), stall_minutes=self.stall / 60, head=self.head)
        self._write_state()
        prompt = prompts.resume(self.o.tag, self.last) if resumed else prompts.start(self.o.tag)
        first = not resumed
        failures = 0
        while True:
            self.stopping = exhausted(self.limits, self._spent())
            if self.stopping:
                break
            ended_by, stats, progress, code = self._launch(prompt, first)
            summary.launches += 1
            first = False
            if self.stopping:
                break
            failed = code != 0 or stats.is_error
            if failed and any(s in (stats.result or "").lower() for s in AUTH_ERRORS):
                self.stopping = f"the agent cannot authenticate: {shorten(stats.result, 200)}"
                break
            failures = 0 if progress else failures + 1
            if failures >= self.o.max_failures:
                what = f"exit {code}: {shorten(stats.result, 200)}" if failed else "ended without a commit or an evaluation"
                self.stopping = f"{failures} launches in a row made no progress (last: {what})"
                break
            if ended_by == "nudge":
                summary.nudges += 1
                log_event(self.dir, "nudge", launch=self.launch_no, stall_minutes=self.stall / 60)
                prompt = prompts.nudge(self.o.tag, self.last, self.stall / 60)
            else:
                prompt = prompts.resume(self.o.tag, self.last)
            if failures:
                time.sleep(min(2 ** failures, 30))  # a failing agent is not relaunched in a tight loop
        spend = self._spent()
        self._write_state()
        summary.stop = self.stopping or "stopped"
        summary.spend, summary.last, summary.session_id = spend, self.last, self.session_id
        summary.uncommitted = [p for p in self.repo.dirty_paths()
                               if not p.startswith(self.config.paths.outputs + "/")]
        log_event(self.dir, "stop", reason=summary.stop, launches=summary.launches, nudges=summary.nudges,
                  spend=spend.to_dict(), uncommitted=summary.uncommitted)
        display.note(f"stop: {summary.stop}")
        return summary

    def _launch(self, prompt: str, first: bool) -> tuple[str, LaunchStats, bool, int]:
        """One agent process to its end; returns how it ended, its stats, whether it made progress, its exit code."""
        self.launch_no += 1
        n = self.launch_no
        out, err = self.dir / f"launch-{n:03d}.jsonl", self.dir / f"launch-{n:03d}.stderr"
        resume = not first and bool(self.session_id)  # the templates can be one string (the command agent)
        template = self.spec.resume if resume else self.spec.start
        args = argv(template, prompt=prompt, session_id=self.session_id, settings=self.settings, root=self.root)
        env = {**self.env, "AUTOENV_RUN_TAG": self.o.tag, "AUTOENV_LAUNCH": str(n),
               "AUTOENV_SESSION_ID": self.session_id}
        write_json(self.dir / "session.json", {"kind": self.spec.kind, "session_id": self.session_id, "launches": n})
        transcript = Transcript(out)
        evals_before, env_before, head_before = self.spend.evals, self.spend.env_evals, self.head
        began, began_iso = time.monotonic(), iso_now()
        display.note(f"launch {n}: {self.spec.kind} agent, {'resumed' if resume else 'new'} "
                     f"session, transcript {out.relative_to(self.root) if out.is_relative_to(self.root) else out}")
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            try:
                proc = subprocess.Popen(args, cwd=self.root, env=env, stdin=subprocess.PIPE, stdout=stdout,
                                        stderr=stderr, start_new_session=True)
            except OSError as e:
                raise AutoEnvError(f"cannot start the agent: {e}", where=f"config.toml [agent] {self.spec.kind}_start",
                                   fix="check the template's program and its permissions") from None
            assert proc.stdin is not None, "started with stdin=PIPE"
            try:
                proc.stdin.write(prompt.encode())
                proc.stdin.close()
            except OSError:
                pass  # an agent that does not read stdin
            try:
                ended_by = self._watch(proc, transcript)
            except BaseException:  # Ctrl-C or SIGTERM of the driver: its agent goes with it
                self.stopping = "interrupted (Ctrl-C or SIGTERM)"
                self._write_state()
                self._end(proc)
                log_event(self.dir, "stop", reason=self.stopping, launch=n, exit_code=proc.returncode)
                raise
        code = proc.returncode
        stats = transcript.finish()
        self.head = self.repo.resolve("HEAD")
        if stats.session_id and (not self.session_id or not self.spec.pins_session):
            self.session_id = stats.session_id
        elif stats.session_id and stats.session_id != self.session_id:
            self.session_id = stats.session_id  # a resume that forked: follow the newest
        self._launched_usd += stats.priced(self.config.agent.input_price, self.config.agent.output_price)
        self._current = None
        self._refresh(force=True)
        progress = self.spend.evals > evals_before or self.head != head_before
        display.note(f"launch {n} ended ({ENDED.get(ended_by, ended_by)}, exit {code}) after "
                     f"{time.monotonic() - began:.0f} s: {self.spend.evals - evals_before} evaluation(s), "
                     f"{'a new HEAD' if self.head != head_before else 'no commit'}, "
                     f"{len(stats.permission_denials)} refused call(s)")
        write_json(self.dir / "session.json", {"kind": self.spec.kind, "session_id": self.session_id, "launches": n})
        log_event(self.dir, "launch", launch=n, agent=self.spec.kind, resume=resume,
                  session_id=self.session_id, started=began_iso, seconds=round(time.monotonic() - began, 3),
                  exit_code=code, ended_by=ended_by, cost_usd=stats.cost_usd,
                  priced_usd=round(stats.priced(self.config.agent.input_price, self.config.agent.output_price), 6),
                  input_tokens=stats.input_tokens, output_tokens=stats.output_tokens, turns=stats.turns,
                  subtype=stats.subtype, is_error=stats.is_error, result=shorten(stats.result, 500),
                  denials=len(stats.permission_denials), evals=self.spend.evals - evals_before,
                  env_evals=self.spend.env_evals - env_before,
                  commits=int(self.head != head_before), head=self.head, transcript=out.name,
                  prompt=shorten(prompt, 300))
        return ended_by, stats, progress, code

    def _watch(self, proc: subprocess.Popen, transcript: Transcript) -> str:
        """Poll until the agent exits ("agent"), stalls ("nudge") or a budget is spent ("budget")."""
        self._current = transcript
        activity = time.monotonic()
        slow_every = max(1, int(2.0 / self.o.poll))  # HEAD and eval locks: about every 2 s (each poll while one runs)
        tick = 0
        try:
            while True:
                try:
                    proc.wait(timeout=self.o.poll)
                    return "agent"
                except subprocess.TimeoutExpired:
                    pass
                tick += 1
                before = self._seen
                self._refresh()
                if self._seen != before:
                    activity = time.monotonic()
                if tick % slow_every == 0 or self._waiting is not None:
                    if tick % slow_every == 0:
                        head = self.repo.resolve("HEAD")
                        if head != self.head:
                            self.head, activity = head, time.monotonic()
                        self._write_state()  # the agent's spend so far, for the entry an evaluation records
                    if self._follow_evaluation():
                        activity = time.monotonic()
                reason = exhausted(self.limits, self._spent())
                if reason:
                    self.stopping = reason
                    self._write_state()  # the gate refuses new evaluations from now on
                    if reason.startswith("max_evals"):
                        self._wait_for_evaluation()
                    self._end(proc)
                    return "budget"
                if time.monotonic() - activity >= self.stall and not self._evaluating():
                    self._end(proc)
                    return "nudge"
        finally:
            self._stop_waiting()

    def _follow_evaluation(self) -> bool:
        """Is an evaluation running? While one does, a heartbeat says its commit, stage and time (display.Waiting)."""
        running = self._evaluation()
        if running is None:
            self._stop_waiting()
            return False
        stage = str(running.get("stage") or "starting")
        if self._waiting is None:
            commit = str(running.get("commit") or self.head or "HEAD")[:12]
            started = running.get("started")
            self._waiting = display.Waiting(f"evaluation running on {commit}", stage, every=self.o.heartbeat,
                                            since=started if isinstance(started, (int, float)) else None).start()
        else:
            self._waiting.update(stage)
        return True

    def _stop_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.stop()
            self._waiting = None

    def _end(self, proc: subprocess.Popen) -> None:
        for sig, wait in ((signal.SIGTERM, self.o.grace), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # what the agent's group left behind (an evaluation that outlived its shell)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _wait_for_evaluation(self) -> None:
        """Let the evaluation that spent the last allowed slot finish writing (its note follows its ledger line)."""
        deadline = time.monotonic() + self.o.grace
        while self._evaluating() and time.monotonic() < deadline:
            time.sleep(0.2)

    def _evaluating(self) -> bool:
        return self._evaluation() is not None

    def _evaluation(self) -> dict | None:
        """The running evaluation's lock (autoenv.evaluation.pipeline.one_at_a_time): its commit and stage as it
        wrote them ({} before it wrote any), or None when no evaluation runs."""
        for path in glob.glob(str(self.repo.git_dir / "autoenv-eval-*.lock")):
            try:
                with open(path) as f:
                    try:
                        fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        fcntl.flock(f, fcntl.LOCK_UN)
                        continue
                    except BlockingIOError:
                        text = f.read()
            except OSError:
                continue
            try:
                found = json.loads(text)
            except ValueError:
                found = {}  # not written yet, or being rewritten
            return found if isinstance(found, dict) else {}
        return None

    # -- spend -----------------------------------------------------------------------------------

    _launched_usd = 0.0
    _current: Transcript | None = None
    _waiting: display.Waiting | None = None
    _seen = 0
    """Ledger entries read since the driver started (the run's and `eval --env`'s)."""

    def _size(self) -> tuple[int, int]:
        try:
            st = self.log.stat()
            return st.st_size, st.st_mtime_ns
        except OSError:
            return 0, 0

    def _refresh(self, force: bool = False) -> None:
        """New ledger entries and the running transcript's tokens."""
        if self._current is not None:
            self._current.update()
        size = self._size()
        if size == self._ledger_size and not force:
            return
        self._ledger_size = size
        entries = read_entries(self.log) if self.log.is_file() else []
        new = entries[self.ledger_start + self._seen:]
        if new:
            self._seen += len(new)
            for entry in new:
                self.spend.add_entries([entry])
                reason = shorten(entry.verdict.reason.splitlines()[0], 200) if entry.verdict.reason else ""
                if entry.environment is not None:  # another environment: not one of the run's evaluations
                    display.note(f"--env evaluation of {entry.environment.key} (recorded apart, not counted): "
                                 f"{entry.verdict.verdict}: {reason}")
                    continue
                self.last = entry
                display.note(f"evaluation {self.spend.evals}: {entry.commit[:12]} {entry.verdict.verdict}: {reason}")
            self._write_state()

    def _spent(self) -> Spend:
        s = self.spend
        s.seconds = time.monotonic() - self.started
        a = self.config.agent
        current = self._current.stats.priced(a.input_price, a.output_price) if self._current else 0.0
        s.agent_usd = self._launched_usd + current
        return s

    def _last_entry(self) -> Entry | None:
        entries = read_entries(self.log) if self.log.is_file() else []
        branch = BRANCH_PREFIX + self.o.tag
        return next((e for e in reversed(entries) if e.branch == branch and e.environment is None), None)

    def _state(self) -> dict:
        return {"pid": os.getpid(), "tag": self.o.tag, "agent": self.spec.kind, "session_id": self.session_id,
                "ledger_start": self.ledger_start, "max_evals": self.limits.evals, "limits": vars(self.limits),
                "stopping": self.stopping, "spend": self._spent().to_dict(), "updated": iso_now()}

    def _write_state(self) -> None:
        write_json(self.dir / "driver.json", self._state())


def drive(options: RunOptions) -> Summary:
    return Driver(options).run()

