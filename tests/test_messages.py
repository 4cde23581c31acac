"""Every message prints: text with rich markup in it reaches the terminal as written.

Config keys, paths, commit subjects, the candidate's exceptions and a judge's error are
someone else's text. Rendered as rich markup, "[target]" vanished and a "[/x]" replaced the
error with a MarkupError traceback (exit 1 instead of 2). The unit tests push such text
through every display function; the CLI tests push it through each error path of the real
command and check the literal text and the exit code.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import autoenv, commit_all, ledger, small_config
from rich.text import Text

from autoenv.core import display
from autoenv.core.config import Bands
from autoenv.core.errors import AutoEnvError
from autoenv.core.record import BestReply, ErrorCounts, GateFinding, GateReport, ModelStats, ProbeSummary
from autoenv.run.demo import make_run_repo

AUTOENV = Path(__file__).resolve().parent.parent / "autoenv"
MARKUP = "[/x] [bold]bold?[/bold] [link=https://x]link?[/link] [red]:x:"


def printed(show) -> str:
    """What `show()` prints on both consoles, as plain text."""
    with display.console.capture() as out, display.err_console.capture() as err:
        show()
    return out.get() + err.get()


def test_only_the_display_modules_use_rich():
    """core/display.py for the pipeline, review/terminal.py for the review commands (on display's consoles)."""
    users = sorted(str(p.relative_to(AUTOENV)) for p in AUTOENV.rglob("*.py")
                   if any(isinstance(node, (ast.Import, ast.ImportFrom))
                          and any((getattr(node, "module", None) or alias.name).startswith("rich")
                                  for alias in node.names)
                          for node in ast.walk(ast.parse(p.read_text()))))
    assert users == ["core/display.py", "review/terminal.py"]


def test_the_consoles_never_read_markup_or_emoji_codes():
    for console in (display.console, display.err_console):
        assert console._markup is False and console._emoji is False


@pytest.mark.attack
def test_every_display_function_prints_text_as_written(attack_row):
    error = AutoEnvError(f"what {MARKUP}", where=f"config.toml [target] api_key_var {MARKUP}", fix=f"fix {MARKUP}")

    def stage() -> None:
        with display.stage(f"stage {MARKUP}", f"detail {MARKUP}"):
            display.note(f"note {MARKUP}")
            display.warn(f"warn {MARKUP}")

    text = printed(stage) + printed(lambda: display.show_error(error))
    for part in ("stage", "detail", "note", "! warn", "error: what", "where: config.toml [target] api_key_var",
                 "fix: fix"):
        assert f"{part} {MARKUP}" in text, part
    assert f"✓ stage {MARKUP}" in text
    assert "interrupted: nothing was recorded" in printed(display.interrupted)
    assert f"key: {MARKUP}" in printed(lambda: display.result_block({"key": MARKUP}))
    attack_row("bracketed text in stage, note, warning, error (what/where/fix) and result lines",
               f"printed as written: {next(line for line in text.splitlines() if 'where:' in line).strip()!r}")


@pytest.mark.attack
def test_tables_and_progress_print_text_as_written(attack_row, monkeypatch):
    stats = ModelStats(model="[bold]m[/x]", rollouts=1, scored=1, mean=0.5, ci=None, std=0.0, solve_rate=None,
                       max_reward=1.0, normalized_mean=0.5, tasks=1, disagree_share=0.0, errors=ErrorCounts())
    report = GateReport(mode="in-process", findings=[GateFinding(name="[bold]", status="fail", message="[/x]"),
                                                     GateFinding(name="probe echo", status="fail", message="-")],
                        probes={"echo": ProbeSummary(description="d", mean=1.0, tasks=1, scored=1,
                                                     skipped=0, errors=0,
                                                     best=[BestReply(idx=0, key="k", reward=1.0, reply="[/x]")])})
    monkeypatch.setattr(display.console, "_force_terminal", True)  # the live bar (off a terminal: plain lines)
    progress = display.rollout_progress()
    monkeypatch.undo()
    progress.add_task("[bold]", total=2, status="[/x]")
    text = printed(lambda: [display.console.print(t) for t in
                            (display.summary_table({"target": stats}, Bands()), *display.gates_tables(report),
                             progress.get_renderable())])
    assert "│ [bold]m[/x] " in text  # a model name
    assert "│ [bold] " in text and "│ [/x] " in text and '"[/x]"' in text  # check name and detail, probe reply
    assert re.search(r"\[bold\]\s+━*\s*0/2\s+\[/x\]", text)  # progress description and status
    attack_row("bracketed text in tables and progress (model name, check, probe reply, status)",
               f"printed as written: {next(line for line in text.splitlines() if '[bold]m[/x]' in line).strip()[:80]!r}")


def test_status_cells_keep_their_colour():
    checks, _ = display.gates_tables(GateReport(findings=[GateFinding(name="n", status="fail", message="m")]))
    (cell,) = checks.columns[1].cells
    assert isinstance(cell, Text) and str(cell) == "fail" and cell.style == "bold red"


# --------------------------------------------------------------------------------------
# The real CLI: preflight errors (exit 2, nothing recorded)
# --------------------------------------------------------------------------------------


def fails_with(result: subprocess.CompletedProcess, code: int, *texts: str) -> None:
    out = result.stdout + result.stderr
    assert result.returncode == code, out
    assert "Traceback" not in out and "MarkupError" not in out
    for text in texts:
        assert text in out, (text, out[-3000:])


def markup_row(attack_row, kind: str, result: subprocess.CompletedProcess, text: str) -> None:
    """A table row quoting the printed line that carries `text`."""
    line = next(line for line in (result.stdout + result.stderr).splitlines() if text in line)
    attack_row(f"bracketed text in {kind}", f"exit {result.returncode}, printed as written: {line.strip()[:110]!r}")


@pytest.mark.attack
@pytest.mark.slow
def test_config_errors_print_as_written(run_repo, attack_row):
    root = run_repo()
    (root / "config.toml").write_text(small_config() + "\n[broken\n")
    commit_all(root, "broken table header")
    result = autoenv("eval", "--offline", cwd=root)
    fails_with(result, 2, "tables need [brackets]")
    markup_row(attack_row, "a TOML parse error", result, "tables need [brackets]")
    (root / "config.toml").write_text(small_config().replace("examples = 3", f'"{MARKUP}" = 3'))
    commit_all(root, "a key made of markup")
    result = autoenv("eval", "--offline", cwd=root)
    fails_with(result, 2, f"unknown key `budget.{MARKUP}`")
    markup_row(attack_row, "a config key", result, "unknown key")
    (root / "config.toml").write_text(small_config().replace('candidate = "candidate"', f'candidate = "{MARKUP}"'))
    commit_all(root, "a candidate path made of markup")
    fails_with(autoenv("eval", "--offline", cwd=root), 2, f"no candidate directory at {root / MARKUP}",
               "config.toml [paths] candidate")
    assert ledger(root) == [] and not (root / "outputs").exists()


@pytest.mark.attack
@pytest.mark.slow
def test_preflight_errors_print_as_written(run_repo, tmp_path, attack_row):
    root = run_repo()
    result = autoenv("eval", cwd=root, env={"OPENAI_API_KEY": ""})
    fails_with(result, 2, "config.toml [target] api_key_var")
    markup_row(attack_row, "a config location (missing key)", result, "[target] api_key_var")
    (root / "[").mkdir()
    (root / "[" / "x] [bold]notes[link=https:").write_text("untracked\n")
    result = autoenv("eval", "--offline", cwd=root)
    fails_with(result, 2, "  [/x] [bold]notes[link=https:\n")
    markup_row(attack_row, "a file name (dirty tree)", result, "[bold]notes")
    outside = tmp_path / "[bold]not a repo[link=https:"
    outside.mkdir()
    fails_with(autoenv("eval", "--offline", cwd=outside), 2, f"{outside} is not inside a git repository")


# --------------------------------------------------------------------------------------
# The real CLI: a candidate whose exceptions, commit subject and judge speak markup
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def markup_eval(tmp_path_factory) -> tuple[Path, str, subprocess.CompletedProcess]:
    """The arithmetic example plus a module that raises markup on import (not imported by the
    package itself, so the install passes and the modules gate fails), committed with a
    subject made of markup and evaluated offline."""
    root = make_run_repo("arithmetic", tmp_path_factory.mktemp("markup") / "run", small_config())
    (root / "candidate" / "candidate_env" / "broken.py").write_text(f"raise RuntimeError({MARKUP!r})\n")
    commit = commit_all(root, f"subject {MARKUP}")
    return root, commit, autoenv("eval", "--offline", "-d", f"description {MARKUP}", cwd=root)


@pytest.mark.e2e
@pytest.mark.attack
def test_commit_subject_and_gate_failures_print_as_written(markup_eval, attack_row):
    root, commit, result = markup_eval
    fails_with(result, 0, f"{commit[:12]} on autoenv/demo-arithmetic: subject {MARKUP}\n",
               f"gate(s) failed: modules: candidate_env.broken fails to import: RuntimeError: {MARKUP}")
    markup_row(attack_row, "a commit subject", result, "subject [/x]")
    markup_row(attack_row, "a gate failure (candidate exception)", result, "gate(s) failed")
    assert re.search(r"(?m)^verdict:\s+discard$", result.stdout)
    assert ledger(root)[0]["description"] == f"description {MARKUP}"


@pytest.mark.e2e
@pytest.mark.attack
def test_a_judge_failure_prints_as_written(markup_eval, fake_bin, attack_row):
    root, commit, _ = markup_eval
    env = {"PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "FAKE_CLAUDE_MODE": "api-error",
           "FAKE_CLAUDE_ERROR": f"API Error: 401 {MARKUP}"}
    result = autoenv("judge", commit, "--backend", "claude", cwd=root, env=env)
    said = f"the claude judge failed (exit 1): API Error: 401 {MARKUP}"
    fails_with(result, 1, f"claude judge failed ({said}); offline review used")
    markup_row(attack_row, "a judge error", result, "claude judge failed")
    assert re.search(rf"(?m)^judge_error:\s+{re.escape(said)}$", result.stdout)


@pytest.mark.e2e
@pytest.mark.attack
def test_a_candidate_exception_at_install_prints_as_written(markup_eval, attack_row):
    root = markup_eval[0]
    init = root / "candidate" / "candidate_env" / "__init__.py"
    init.write_text(init.read_text() + "\nfrom candidate_env import broken  # noqa\n")
    commit_all(root, f"import the broken module {MARKUP}")
    result = autoenv("eval", "--offline", cwd=root)
    fails_with(result, 1, f"RuntimeError: {MARKUP}", f": import the broken module {MARKUP}\n")
    markup_row(attack_row, "an import error of the candidate", result, "RuntimeError: [/x]")
    assert ledger(root)[-1]["verdict"]["verdict"] == "crash"
