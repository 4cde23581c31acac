"""Incremental evaluation: a reward-only commit is rescored from stored rollouts, any other change is rolled out."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import commit_all, small_config
from test_cache import Served
from test_pipeline import stats

from autoenv.core.config import load_config
from autoenv.core.messages import Reply
from autoenv.core.record import Entry, Verdict
from autoenv.endpoint.policies import Policies
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.evaluation.rescore import find_source
from autoenv.run.demo import make_run_repo
from autoenv.run.fingerprint import FINGERPRINT_FILE, module_changes
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import read_entries

TASKSET = "candidate/candidate_env/taskset.py"
ARITHMETIC = (Path(__file__).parents[1] / "examples" / "arithmetic" / "candidate_env" / "taskset.py").read_text()

# A reward edit: the correct answer's reward weighs half.
REWARD_EDIT = ("@vf.reward(weight=1.0)", "@vf.reward(weight=0.5)")
HELPER_EDIT = ('    return (messages[-1].content or "") if messages else ""',
               '    return (messages[-1].content or "").strip() if messages else ""')
DOCSTRING_EDIT = ('"""Multi-step integer arithmetic:', '"""Integer arithmetic in several steps:')
ROLLED_OUT = {
    "prompt": ('"Evaluate the arithmetic expression exactly. ', '"Evaluate the arithmetic expression. '),
    "stop condition": ("return trace.num_turns >= 1", "return trace.num_turns >= 2"),
    "task data": ("num_tasks: int = 1000", "num_tasks: int = 900"),
    "env code (the task key)": ('return f"arith:{self.data.prompt}"', 'return f"arithmetic:{self.data.prompt}"'),
    "env code (the oracle hook)": ('return f"<answer>{self.data.answer}</answer>"', 'return self.data.answer'),
}

WARM = True  # several evaluations of one run per test: the warm child forks them (tests/conftest.py)


def edited(text: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_only_reward_metric_helper_and_docstring_edits_leave_the_rollout_code_alone():
    assert module_changes(ARITHMETIC, edited(ARITHMETIC, REWARD_EDIT)) == []
    assert module_changes(ARITHMETIC, edited(ARITHMETIC, HELPER_EDIT)) == []  # _last_reply: rewards and metrics only
    assert module_changes(ARITHMETIC, edited(ARITHMETIC, DOCSTRING_EDIT, ("# zero tags", "# no tag"))) == []
    metric = edited(ARITHMETIC, ("return float(len(tags) == 1 and", "return float(len(tags) >= 1 and"))
    assert module_changes(ARITHMETIC, metric) == []
    assert module_changes(ARITHMETIC, edited(ARITHMETIC, ROLLED_OUT["prompt"])) == ["SYSTEM"]
    assert module_changes(ARITHMETIC, edited(ARITHMETIC, ROLLED_OUT["stop condition"])) == ["ArithmeticTask"]
    assert module_changes(ARITHMETIC, edited(ARITHMETIC, ROLLED_OUT["task data"])) == ["ArithmeticConfig"]
    assert module_changes(ARITHMETIC, edited(ARITHMETIC, ROLLED_OUT["env code (the oracle hook)"])) == ["ArithmeticTask"]
    # a helper that load() uses as well as a reward is rollout code
    shared = edited(ARITHMETIC, ("expression = _expression(rng, difficulty, category)",
                                 "expression = _expression(rng, difficulty, category)\n            _as_int(expression)"))
    assert module_changes(shared, edited(shared, ("return int(text.replace", "return int(text.strip().replace"))) \
        == ["_as_int"]
    assert module_changes(ARITHMETIC, "def broken(:\n") == ["does not parse (invalid syntax, line 1)"]


def finished(root: Path, commit: str) -> Entry:
    """A stand-in finished evaluation of `commit` whose outputs hold rollouts and a task fingerprint."""
    out = root / "outputs" / commit
    (out / "target").mkdir(parents=True)
    (out / "target" / "traces.jsonl").write_text("{}\n")
    (out / FINGERPRINT_FILE).write_text("{}")
    (out / "run.json").write_text(json.dumps({"run_id": "r1", "commit": commit}))
    return Entry(commit=commit, timestamp="2026-01-01T00:00:00Z", eval_success=True, stats=stats(), run_id="r1",
                 verdict=Verdict(verdict="baseline", reason="first"), branch=Repo(root).head().branch, offline=True,
                 outputs=f"outputs/{commit}")


def source_after(root: Path, path: str, edits: tuple[tuple[str, str], ...], base: Entry) -> tuple:
    file = root / path
    file.write_text(edited(file.read_text(), *edits))
    commit_all(root, f"edit {path}")
    repo = Repo(root)
    return find_source(repo, repo.head(), load_config(root / "config.toml"), [base], offline=True, run_base=None)


def test_a_reward_or_docs_edit_finds_the_evaluation_to_rescore_and_every_other_change_says_why_not(run_repo):
    root = run_repo("arithmetic")
    base = finished(root, Repo(root).head().commit)
    for path, edits in ((TASKSET, (REWARD_EDIT,)), ("candidate/README.md", (("#", "##"),))):
        source, why = source_after(root, path, edits, base)
        assert why is None and source is not None and source.commit == base.commit, path
    for kind, edit in ROLLED_OUT.items():
        source, why = source_after(root, TASKSET, (edit,), base)
        assert source is None and why is not None and "candidate/candidate_env/taskset.py changed outside reward" \
            in why, kind
        (root / TASKSET).write_text(edited((root / TASKSET).read_text(), (edit[1], edit[0])))
        commit_all(root, f"revert the {kind} change")
    (root / "outputs" / base.commit / "run.json").write_text(json.dumps({"run_id": "r2", "commit": base.commit}))
    source, why = source_after(root, TASKSET, (("@vf.reward(weight=0.5)", "@vf.reward(weight=0.25)"),), base)
    assert source is None and why and why.endswith("now hold another evaluation of that commit")
    source, why = source_after(root, "config.toml", (("seed = 20261121", "seed = 7"),), base)
    assert source is None and why == f"not provably reward-only against {base.commit[:12]}: config.toml changed"


def test_a_tool_schema_edit_is_rolled_out(run_repo):
    root = run_repo("shopping")
    base = finished(root, Repo(root).head().commit)
    tools = root / "candidate" / "candidate_env" / "tools.py"
    text = tools.read_text()
    doc = re.search(r'def \w+\(self[^)]*\)[^:]*:\n\s+"""([^"\n]+)', text)
    assert doc is not None, "the shopping toolset documents its tools"
    source, why = source_after(root, "candidate/candidate_env/tools.py", ((doc.group(1), doc.group(1) + " (new)"),), base)
    # a tool's docstring is its schema's description: it is what the model reads, never stripped as a mere docstring
    assert source is None and why is not None and "tools.py" in why


class ArithmeticOracle:
    """The built-in endpoint's oracle for the arithmetic example, read off the prompt (no candidate import here)."""

    def __init__(self) -> None:
        self.answers: list[str] = []

    def find(self, messages: list[dict], key: str | None = None) -> SimpleNamespace | None:
        prompt = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        if not isinstance(prompt, str) or not prompt.startswith("Compute: "):
            return None
        value = eval(prompt.removeprefix("Compute: "), {"__builtins__": {}})  # the example's own generated text
        return SimpleNamespace(key=f"arith:{prompt}", data=SimpleNamespace(answer=str(value)))

    def next_message(self, messages: list[dict], key: str | None = None) -> Reply | None:
        task = self.find(messages)
        return None if task is None else Reply(content=f"<answer>{task.data.answer}</answer>")

    def task_key(self, messages: list[dict], key: str | None = None) -> str | None:
        task = self.find(messages)
        return None if task is None else task.key


def served_config(base_url: str) -> str:
    config = small_config()
    config = re.sub(r'(?m)^model = "gpt-4\.1-mini"', 'model = "noisy-oracle:0.5"', config)
    config = re.sub(r'(?m)^model = "gpt-4\.1"', 'model = "oracle"', config)
    config = re.sub(r'(?m)^base_url = .*', f'base_url = "{base_url}"', config)
    config = re.sub(r'(?m)^api_key_var = .*', 'api_key_var = ""', config)
    return re.sub(r'(?m)^backend = .*', 'backend = "offline"', config)


@pytest.mark.e2e
def test_a_reward_edit_is_rescored_without_a_model_request_and_a_prompt_edit_is_rolled_out(tmp_path):
    with Served(Policies(ArithmeticOracle())) as endpoint:
        root = make_run_repo("arithmetic", tmp_path / "run", served_config(endpoint.base_url))
        first = evaluate(EvalOptions(cwd=root, description="first"))
        spent = endpoint.counts["requests"]
        assert first.verdict.verdict == "baseline" and spent >= 12 and first.rescored_from is None
        assert first.stats["strong"].mean == 1.0 and first.stats["target"].mean < 1.0
        (root / TASKSET).write_text(edited((root / TASKSET).read_text(), REWARD_EDIT))
        commit_all(root, "reward: the correct answer weighs half")
        second = evaluate(EvalOptions(cwd=root, description="reward edit"))
        assert endpoint.counts["requests"] == spent  # zero model requests
        assert second.rescored_from == first.commit and second.cached_from is None and second.eval_success
        assert "rescore" in second.timings and "rollouts" not in second.timings and second.gates is not None
        for role, stats in second.stats.items():
            old = first.stats[role]
            assert stats.mean == pytest.approx(old.mean * 0.5, abs=1e-4) and stats.rollouts == old.rollouts, role
        assert second.rescored and all(r.new == pytest.approx(r.old * 0.5) for r in second.rescored)
        assert {r.role for r in second.rescored} == set(first.stats)
        feedback = (root / "feedback" / f"{second.commit}.md").read_text()
        assert f"## Rescored from {first.commit[:12]}" in feedback
        assert re.search(r"\| strong \| \d+ \| `arith:Compute: [^`]+` \| 1\.000 \| 0\.500 \| -0\.500 \|", feedback)
        rescore = json.loads((root / "outputs" / second.commit / "rescore.json").read_text())
        assert rescore["rescored"] == sum(s.rollouts for s in first.stats.values()) and rescore["errors"] == 0

        (root / TASKSET).write_text(edited((root / TASKSET).read_text(), ROLLED_OUT["prompt"]))
        commit_all(root, "prompt: shorter")
        third = evaluate(EvalOptions(cwd=root, description="prompt edit"))
        assert endpoint.counts["requests"] > spent and third.rescored_from is None and "rollouts" in third.timings
        assert third.rescore_refused and "SYSTEM" in third.rescore_refused
        feedback = (root / "feedback" / f"{third.commit}.md").read_text()
        assert "rolled out in full, not rescored: not provably reward-only" in feedback
        spent = endpoint.counts["requests"]

        (root / TASKSET).write_text(edited((root / TASKSET).read_text(), HELPER_EDIT))
        commit_all(root, "reward helper: strip the reply")
        forced = evaluate(EvalOptions(cwd=root, description="forced", force=True))
        assert forced.rescored_from is None and endpoint.counts["requests"] > spent
        spent = endpoint.counts["requests"]

        # the child's own check: sampled tasks that differ from the stored rollouts' (here: a doctored hash) roll out
        stored = root / "outputs" / forced.commit / FINGERPRINT_FILE
        stored.write_text(json.dumps({**json.loads(stored.read_text()), "tasks": "0" * 64}))
        readme = root / "candidate" / "README.md"
        readme.write_text(readme.read_text() + "\nA docs-only change.\n")
        commit_all(root, "docs")
        fifth = evaluate(EvalOptions(cwd=root, description="docs"))
        assert fifth.rescored_from is None and endpoint.counts["requests"] > spent
        assert fifth.rescore_refused == (f"the stored rollouts of {forced.commit[:12]} were not rescored: the sampled "
                                         "tasks differ from the stored rollouts' in: tasks")
        assert [e.rescored_from for e in read_entries(root / "feedback_log.jsonl")] == \
            [None, first.commit, None, None, None]


def test_only_a_rollout_that_finished_is_rescored():
    from autoenv.child.rescore_stage import rescorable

    assert rescorable({"rewards": {"correct": {"score": 1.0, "weight": 1.0}}})
    # a reward that raised (verifiers' scoring boundary) or ran out of time scoring: the replies are all there
    assert rescorable({"errors": [{"type": "TaskError", "message": "scoring: ValueError: bad"}],
                       "stop_condition": "task_error"})
    assert rescorable({"is_timeout": True, "stop_condition": "scoring_timeout"})
    # the rollout itself failed or was cut: kept as it was, never rescored into a success
    assert not rescorable({"errors": [{"type": "ProviderError", "message": "HTTP 500"}]})
    assert not rescorable({"is_timeout": True, "stop_condition": "agent_timeout"})
    assert not rescorable({"errors": [{"type": "TaskError", "message": "task setup: boom"}]})
