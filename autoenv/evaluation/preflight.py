"""Preflight: config, git state, the ledger against the notes, the rules, keys and endpoints, before any work.

Failures here raise and record nothing: they are the user's to fix (exit 2), or a provider that
does not answer (exit 3). A commit that changed the rules is found here and recorded as
`tampered` without any model call.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from autoenv.containers.access import check_engine_ready
from autoenv.core import display
from autoenv.core.config import CONFIG_NAME, Config, check_runtime_ready, load_config, with_env
from autoenv.core.errors import AutoEnvError, ProviderUnavailable
from autoenv.core.formats import stamp
from autoenv.core.paths import spec_warnings
from autoenv.core.record import (
    ROLES,
    Entry,
)
from autoenv.core.traces import (
    finished_episodes,
)
from autoenv.core.venvseal import check_from_outside
from autoenv.driver.gate import refuse_when_spent
from autoenv.evaluation.context import Context, EvalOptions
from autoenv.evaluation.provider import api_key, check_endpoint
from autoenv.evaluation.recheck import config_at, forged
from autoenv.run.archive import archive_previous
from autoenv.run.cache import cache_key
from autoenv.run.cleantree import require_clean_candidate, undo_fix
from autoenv.run.envref import environment_ref
from autoenv.run.gitrepo import Repo
from autoenv.run.integrity import check as check_integrity
from autoenv.run.integrity import own_commits
from autoenv.run.integrity import summary as integrity_summary
from autoenv.run.ledger import raw_lines, read_entries
from autoenv.run.ledger import verify as verify_ledger
from autoenv.run.runbase import NO_BASE, check_rules, harness_paths, refuse
from autoenv.sandbox.confine import choose


def preflight(options: EvalOptions) -> Context:
    with display.stage("preflight", "config, git state, keys"):
        repo = Repo(options.cwd)
        config, config_warnings = run_config(repo, options)
        require_sealed_venv()
        for message in verify_ledger(config.path("log_file")):
            display.note(message)
        ledger_check = verify_notes(repo, config)
        head = repo.head()
        require_clean_candidate(repo, harness_paths(config), head.commit, config.path("candidate"))
        refuse_when_spent(config.path("outputs"), config.path("log_file"), head.branch)  # autoenv run's budget
        candidate = config.path("candidate")
        if config.candidate.install and not candidate.is_dir():
            raise AutoEnvError(
                f"no candidate directory at {candidate}",
                where=f"{config.root / CONFIG_NAME} [paths] candidate",
                fix="create candidate/ (see program.md), or the person points paths.candidate at it",
            )
        rules = check_rules(repo, head)
        if rules.changed:
            display.tampered(rules.changed)
            if rules.on_tamper == "refuse":
                raise refuse(rules)
        elif rules.base is None:
            display.warn(NO_BASE + f" (branch {head.branch or '(detached HEAD)'} has no .autoenv/run.toml; "
                         "the person starts runs with autoenv new <tag>)")
        if not options.offline and not rules.changed:
            check_keys(config)
            check_endpoints(config)
        check_runtime_ready(config.runtime.type, config.root / CONFIG_NAME)
        check_engine_ready(config.runtime, config.root / CONFIG_NAME, choose().kind)
        environment = environment_ref(options.env, config.candidate.taskset, config.candidate.package or None) \
            if options.env else None
        out = config.path("outputs") / (f"env/{environment.key}" if environment else head.commit)
        interrupted = None if options.restart else unfinished_run(out, read_entries(config.path("log_file")))
        if interrupted is None:
            archive_previous(out)
        else:
            display.note(f"resuming the interrupted evaluation {interrupted} from its finished rollouts "
                         "(--restart to start over)")
        display.note(f"commit {head.commit[:12]} on {head.branch or '(detached HEAD)'}: {head.subject}")
        warnings = [*config_warnings, *spec_warnings(config.root)]
        for warning in warnings:
            display.warn(warning)
        if options.offline:
            display.note(f"offline: target = {config.offline.target}, strong = {config.offline.strong} (scripted)")
        if environment:
            display.note(f"--env {options.env}: environment {environment.key}, recorded apart from the run's "
                         f"evaluations (compared only with evaluations of the same content; outputs {out.name}/)")
    return Context(config=config, repo=repo, head=head, options=options, run_id=interrupted or stamp(), out=out,
                   warnings=warnings, resuming=interrupted is not None,
                   rules=rules, ledger_check=ledger_check, ledger_seen=raw_lines(config.path("log_file")),
                   cache_key=None if environment else cache_key(repo, head, config, options.offline),
                   environment=environment)


def run_config(repo: Repo, options: EvalOptions) -> tuple[Config, list[str]]:
    """config.toml, and the warnings it gave (for the terminal, the entry and the feedback).

    config.toml is protected, so a config that does not load is never the agent's to edit: an
    uncommitted change is undone (never committed: that is tampering); a committed change the run base
    names is still recorded as tampered, judged by the base's config.toml, and the warning says why the
    changed one does not load (the key, the line, the message); any other broken config is the person's.
    """
    path = options.config or repo.root / CONFIG_NAME
    try:
        config = load_config(path)
    except AutoEnvError as error:
        if options.config:
            raise
        if CONFIG_NAME in repo.dirty_paths():
            raise AutoEnvError(error.what, where=error.where, fix=undo_fix(
                [CONFIG_NAME], repo.untracked_paths(), person="they make it load, commit it") + "; then run again") \
                from None
        rules = check_rules(repo, repo.head())
        if rules.base is None or f"{CONFIG_NAME} (modified)" not in rules.changed \
                and f"{CONFIG_NAME} (deleted)" not in rules.changed:
            raise
        warning = (f"{CONFIG_NAME} does not load: {error.what} ({error.where}); the run base's {CONFIG_NAME} "
                   f"(commit {rules.base[:12]}) is used to record the commit as tampered")
        return load_config(path, text=repo.run_git("show", f"{rules.base}:{CONFIG_NAME}") + "\n"), [warning]
    return (with_env(config, options.env, options.env_id) if options.env else config), []


def require_sealed_venv() -> None:
    """Refuse to evaluate with a harness venv that changed since setup (autoenv.core.venvseal): code a candidate
    left there runs in this very process, which holds the key and writes the ledger."""
    found = check_from_outside()
    if found is None:
        display.warn(f"the harness's venv ({sys.prefix}) has no seal, so nothing shows a candidate's install left no "
                     "code in it: the person's `bash setup.sh` writes the seal")
    elif found:
        raise AutoEnvError(
            "the harness's venv changed since setup, so this process may be running a candidate's code:\n"
            + "\n".join(f"  {line}" for line in found[:12]),
            where=sys.prefix,
            fix="the person removes the files named (left by a candidate's install or a package installed by hand, and "
                "listed by `autoenv verify` too), then runs `bash setup.sh`, which seals the venv as it is then")


def verify_notes(repo: Repo, config: Config) -> str:
    """`autoenv verify` before any work: the ledger against the git notes; what it found, for the entry."""
    log = config.path("log_file")
    notes = repo.notes()
    problems = check_integrity(log, notes, own_commits(config.path("outputs"), repo.ancestors("HEAD")))
    for problem in problems:
        display.warn(f"ledger: {problem}")
    if not problems:  # an entry recorded with a valid chain whose verdict the rules would not give
        for problem in forged(read_entries(log), config, show=config_at(repo, config)):
            display.warn(f"ledger: {problem}; it is no reference for this evaluation's verdict")
    return integrity_summary(log, notes, problems)


def check_keys(config: Config) -> None:
    for role, model in config.models().items():
        if model.api_key_var and not os.environ.get(model.api_key_var):
            raise AutoEnvError(
                f"the {role} model needs an API key in ${model.api_key_var}, which is not set",
                where=f"{config.root / CONFIG_NAME} [{role}] api_key_var",
                fix=f"the person exports {model.api_key_var}=... (never into a file); "
                "or run offline with scripted policies: bash evaluate.sh --offline",
            )


def unfinished_run(out: Path, entries: list[Entry]) -> str | None:
    """The run id of an evaluation of this commit that stopped after some rollouts and recorded nothing."""
    try:
        run_id = json.loads((out / "run.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        return None
    if any(e.run_id == run_id for e in entries) or not (out / "job.json").is_file():
        return None
    return run_id if any(finished_episodes(out / role) for role in ROLES) else None


def check_endpoints(config: Config) -> None:
    """Ask each real model's endpoint before any gate runs: a wrong URL or key is the user's
    to fix (exit 2), a provider that does not answer is nobody's commit (exit 3)."""
    for role, model in config.models().items():
        check = check_endpoint(model.base_url, model.model, api_key(model.api_key_var))
        where = f"{config.root / CONFIG_NAME} [{role}] base_url = {model.base_url}"
        if check.ok:
            display.note(f"{role} endpoint answers ({check.detail})")
        elif check.fixable and "does not list the model" in check.detail:
            raise AutoEnvError(f"the {role} endpoint does not serve the configured model: {check.detail}",
                               where=f"{config.root / CONFIG_NAME} [{role}] model = {model.model!r}",
                               fix=f"the person sets [{role}] model to one of the models the endpoint lists (or "
                               f"fixes [{role}] base_url if it points at the wrong server)")
        elif check.fixable:
            raise AutoEnvError(f"the {role} endpoint refused the request: {check.detail}", where=where,
                               fix=f"the person checks [{role}] base_url, model and the key in "
                               f"${model.api_key_var or '(none)'}")
        else:
            raise ProviderUnavailable(
                f"provider unavailable: the {role} endpoint did not answer after {check.attempts} attempts: "
                f"{check.detail}", where=where,
                fix="nothing was run or recorded: run evaluate.sh again later (or bash evaluate.sh --offline to "
                "evaluate with scripted models); a wrong URL is the person's to fix")
