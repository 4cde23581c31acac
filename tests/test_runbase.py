"""autoenv new, the run base, protected files and rebase-rules, on real git repositories (no worker)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import autoenv, commit_all, head, small_config
from test_pipeline import stats

from autoenv.core.errors import AutoEnvError
from autoenv.evaluation.context import EvalOptions, Outcome
from autoenv.evaluation.decision import verdict
from autoenv.evaluation.pipeline import evaluate, one_at_a_time
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recording import record
from autoenv.run.demo import make_run_repo
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import read_entries
from autoenv.run.lifecycle import new_run, rebase_rules
from autoenv.run.runbase import NO_BASE, REF_PREFIX, RUN_FILE, RunBase, check_rules

# one file of every protected kind, as a full AutoEnv checkout has them
PROTECTED_KINDS = ["evaluate.sh", "feedback.py", "setup.sh", "config.toml", "spec.md", "program.md",
                   "pyproject.toml", ".gitignore", "autoenv/evaluation/verdict.py", "tests/test_verdict.py"]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A repository on `main` shaped like an AutoEnv checkout: every protected kind, and the example candidate."""
    root = make_run_repo("arithmetic", tmp_path / "repo", small_config(), run_base=False)
    git(root, "branch", "-m", "main")
    for path in PROTECTED_KINDS:
        if not (root / path).exists():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(f"# {path}\n")
    commit_all(root, "the harness")
    return root


def state(root: Path) -> tuple[str, str, str]:
    """Branches, HEAD and status: what a refused command must leave as it was."""
    return git(root, "branch", "--list"), head(root), git(root, "status", "--porcelain")


def test_new_commits_spec_and_the_run_base(checkout, tmp_path):
    spec = tmp_path / "my-spec.md"
    spec.write_text("# Count the primes\n")
    start = head(checkout)
    root = new_run(checkout, "mar5", spec=spec)
    assert root == checkout.resolve() and git(root, "branch", "--show-current") == "autoenv/mar5"
    assert (root / "spec.md").read_text() == "# Count the primes\n"
    assert git(root, "status", "--porcelain") == ""  # spec.md and the base are committed
    assert git(root, "rev-parse", REF_PREFIX + "mar5") == head(root)
    assert git(root, "log", "-1", "--format=%s") == "autoenv new mar5: spec.md and the run base"
    base = RunBase.parse((root / RUN_FILE).read_text(), RUN_FILE)
    assert base.tag == "mar5" and base.base_commit == start and base.seed == 20261121
    assert base.models == {"target": "gpt-4.1-mini", "strong": "gpt-4.1"} and base.on_tamper == "record"
    assert set(base.files) >= set(PROTECTED_KINDS) and not any(p.startswith("candidate/") for p in base.files)
    assert RunBase.parse(base.text(), RUN_FILE) == base
    repo = Repo(root)
    assert check_rules(repo, repo.head()).changed == []


@pytest.mark.parametrize("path", PROTECTED_KINDS)
def test_a_change_to_each_protected_kind_is_tampering_named_by_file(checkout, path):
    root = new_run(checkout, "t")
    (root / path).write_text((root / path).read_text() + "\n# lowered the bar\n")
    (root / "candidate" / "README.md").write_text("an honest change too\n")
    commit_all(root, f"edit {path}")
    repo = Repo(root)
    assert check_rules(repo, repo.head()).changed == [f"{path} (modified)"]


def test_added_deleted_and_hand_edited_base_are_named(checkout):
    root = new_run(checkout, "t")
    (root / "autoenv" / "extra.py").write_text("x = 1\n")
    (root / "setup.sh").unlink()
    commit_all(root, "add and delete")
    repo = Repo(root)
    assert check_rules(repo, repo.head()).changed == ["autoenv/extra.py (added)", "setup.sh (deleted)"]
    text = (root / RUN_FILE).read_text()
    (root / RUN_FILE).write_text(text.replace('on_tamper = "record"', 'on_tamper = "record" '))
    commit_all(root, "hide it")
    assert check_rules(repo, repo.head()).changed == [f"{RUN_FILE} (modified by hand)"]
    (root / RUN_FILE).unlink()
    commit_all(root, "no rules at all")
    assert check_rules(repo, repo.head()).changed == [f"{RUN_FILE} (deleted)"]


def test_a_tampered_commit_is_recorded_red_never_kept_and_runs_nothing(checkout):
    root = new_run(checkout, "t")
    text = (root / "config.toml").read_text().replace("target_min = 0.2", "target_min = 0.0")
    (root / "config.toml").write_text(text)
    sha = commit_all(root, "widen the band")
    entry = evaluate(EvalOptions(cwd=root, offline=True))
    assert entry.verdict.verdict == "tampered" and not entry.kept
    assert entry.tampered == ["config.toml (modified)"] and entry.stats == {} and entry.judge is None
    assert "config.toml (modified)" in entry.verdict.reason and "autoenv rebase-rules" in entry.verdict.reason
    assert not (root / "outputs" / sha / "job.json").exists()  # no child, no model
    feedback = (root / "feedback" / f"{sha}.md").read_text()
    assert "- verdict: **tampered**" in feedback and "- rules: tampered: 1 protected file(s)" in feedback
    assert git(root, "notes", "--ref", "autoenv", "show", sha).startswith("autoenv: tampered")
    assert read_entries(root / "feedback_log.jsonl") == [entry]


@pytest.mark.slow
def test_on_tamper_refuse_records_nothing(tmp_path):
    config = small_config().replace('on_tamper = "record"', 'on_tamper = "refuse"')
    root = make_run_repo("arithmetic", tmp_path / "r", config)
    (root / "spec.md").write_text("# an easier spec\n")
    commit_all(root, "edit the spec")
    with pytest.raises(AutoEnvError) as raised:
        preflight(EvalOptions(cwd=root, offline=True))
    assert "spec.md (modified)" in raised.value.what and "rebase-rules" in (raised.value.fix or "")
    result = autoenv("eval", "--offline", cwd=root)
    assert result.returncode == 2 and "spec.md (modified)" in result.stderr
    assert not (root / "feedback_log.jsonl").exists()


@pytest.mark.slow
def test_rebase_rules_is_a_commit_and_starts_a_new_comparison(checkout):
    root = new_run(checkout, "t")
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    first = record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert first.verdict.verdict == "baseline" and first.run_base == head(root)
    (root / "config.toml").write_text((root / "config.toml").read_text().replace("examples = 3", "examples = 4"))
    commit_all(root, "a bigger budget")
    commit, changed = rebase_rules(root, "a bigger budget resolves smaller changes")
    assert changed == ["config.toml (modified)"] and commit == head(root)
    assert git(root, "log", "-1", "--format=%s") == "autoenv rebase-rules: a bigger budget resolves smaller changes"
    assert "config.toml (modified)" in git(root, "log", "-1", "--format=%b")
    assert git(root, "rev-parse", REF_PREFIX + "t") == commit
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    assert ctx.rules.changed == [] and ctx.rules.base == commit
    second = record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert second.verdict.verdict == "baseline"  # not compared with an entry judged under the old rules
    assert second.verdict.reason.startswith(  # worded as a rebase, not as the run's first evaluation
        f"first evaluation of the run autoenv/t under the rules rebased at {commit[:12]} (autoenv rebase-rules; "
        "1 earlier evaluation(s) under the old rules are not compared)")
    assert first.verdict.reason.startswith("first evaluation of the run autoenv/t with")
    with pytest.raises(AutoEnvError, match="needs a reason"):
        rebase_rules(root, " ")


def test_without_a_run_base_the_entry_and_feedback_say_so(run_repo):
    root = run_repo("arithmetic")  # a branch made by hand
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    entry = record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert entry.rules == NO_BASE and entry.run_base is None and entry.verdict.verdict == "baseline"
    assert f"- rules: {NO_BASE}" in (root / "feedback" / f"{entry.commit}.md").read_text()


def test_demo_repositories_are_started_with_new(tmp_path):
    root = make_run_repo("arithmetic", tmp_path / "demo", small_config())
    assert git(root, "branch", "--show-current") == "autoenv/demo-arithmetic"
    assert git(root, "log", "--format=%s") == ("autoenv new demo-arithmetic: spec.md and the run base\n"
                                               "demo: arithmetic example as the candidate")
    repo = Repo(root)
    rules = check_rules(repo, repo.head())
    assert rules.base == head(root) and rules.changed == []


def test_new_with_an_example_in_its_own_worktree(checkout, tmp_path):
    wt = tmp_path / "runs" / "shop"
    root = new_run(checkout, "shop", example="shopping", worktree=wt)
    assert root == wt.resolve() and git(checkout, "branch", "--show-current") == "main"
    assert git(root, "branch", "--show-current") == "autoenv/shop"
    assert (root / "candidate" / "candidate_env").is_dir() and "shop" in (root / "spec.md").read_text().lower()
    assert git(root, "status", "--porcelain") == ""
    repo = Repo(root)
    assert check_rules(repo, repo.head()).changed == []


def test_bad_input_is_refused_and_changes_nothing(checkout, tmp_path):
    new_run(checkout, "taken", worktree=tmp_path / "taken")
    before = state(checkout)
    cases = [
        ({"tag": "taken"}, "exists already"),
        ({"tag": "bad..tag"}, "not a tag git accepts"),
        ({"tag": "x", "spec": tmp_path / "nope.md"}, "no spec file"),
        ({"tag": "x", "example": "nope"}, "no example named 'nope'"),
        ({"tag": "x", "worktree": tmp_path / "taken"}, "exists already"),
    ]
    for kwargs, message in cases:
        with pytest.raises(AutoEnvError, match=message):
            new_run(checkout, **kwargs)  # type: ignore[arg-type]
        assert state(checkout) == before, kwargs
    (checkout / "notes.txt").write_text("dirty\n")
    with pytest.raises(AutoEnvError, match="uncommitted changes"):
        new_run(checkout, "x")
    assert git(checkout, "branch", "--list", "autoenv/x") == ""
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(AutoEnvError, match="not inside a git repository"):
        new_run(tmp_path / "elsewhere", "x")


def test_a_failure_after_the_branch_exists_removes_it(checkout):
    (checkout / "spec.md").unlink()
    commit_all(checkout, "no spec")
    before = state(checkout)
    with pytest.raises(AutoEnvError, match="would have no spec.md"):
        new_run(checkout, "x")
    assert state(checkout) == before and git(checkout, "branch", "--show-current") == "main"


def test_a_malformed_base_names_the_file_and_key():
    with pytest.raises(AutoEnvError) as raised:
        RunBase.parse('[run]\ntag = "t"\n[models]\n[files]\n', ".autoenv/run.toml")
    assert "malformed" in raised.value.what and "[run] base_commit" in (raised.value.where or "")
    with pytest.raises(AutoEnvError, match="not valid TOML"):
        RunBase.parse("[run\n", ".autoenv/run.toml")


@pytest.mark.slow
def test_cli_new_refuses_an_existing_tag_with_exit_2(tmp_path):
    root = make_run_repo("arithmetic", tmp_path / "r", small_config())  # no autoenv/ folder to shadow the package
    assert autoenv("new", "one", cwd=root).returncode == 0
    result = autoenv("new", "one", cwd=root)
    assert result.returncode == 2 and "the run autoenv/one exists already" in result.stderr


def test_a_second_evaluation_of_the_same_commit_is_refused_while_one_runs(run_repo):
    root = run_repo("arithmetic")
    repo = Repo(root)
    with one_at_a_time(repo, head(root)), pytest.raises(AutoEnvError, match="another evaluation of commit .* is"):
        evaluate(EvalOptions(cwd=root, offline=True))
    assert not (root / "feedback_log.jsonl").exists() and not (root / "outputs").exists()


@pytest.mark.parametrize("damage", ["broken", "deleted"])
def test_a_config_that_no_longer_loads_is_still_recorded_as_tampering(checkout, damage):
    root = new_run(checkout, "t")
    if damage == "broken":
        (root / "config.toml").write_text("[bands\ntarget_min = 0\n")
    else:
        (root / "config.toml").unlink()
    sha = commit_all(root, f"config {damage}")
    entry = evaluate(EvalOptions(cwd=root, offline=True))
    assert entry.verdict.verdict == "tampered" and entry.commit == sha
    assert entry.tampered == [f"config.toml ({'modified' if damage == 'broken' else 'deleted'})"]
    assert (root / "feedback" / f"{sha}.md").is_file()
