"""Which task a rollout plays: the harness says it, the scripted endpoint never guesses it from shared text.

verifiers' `color_codeword` opens all 1000 tasks with one sentence ("Here are 2 squares.") and puts the task in
image parts and later turns; a scripted model that found its task by the first user message's text played task
0 in every rollout (a false `oracle: fail 0%`, answer-based probes built from the wrong task's answer).
tests/data/shared-codeword has that shape. The child tells the embedded endpoint each rollout's task from
verifiers' `run_slot(on_trace=...)`; where nothing says which task a request plays and several share its text,
the oracle and the answer-based probes are untested with the reason, never failed or passed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoenv.core.messages import ambiguity, ambiguous
from autoenv.evaluation.verdict import decide
from autoenv.gates.probes import NEEDS_ORACLE
from autoenv.gates.rules import Gates, judge_audit
from tests.audits import audit, rec
from tests.conftest import autoenv, ledger, small_config
from tests.test_gates import CONFIG
from tests.test_verdict import BANDS, counts, entry, stats

DATA = Path(__file__).parent / "data"
CODEWORD = DATA / "shared-codeword"
REASON = ambiguous(30)


def test_a_task_the_endpoint_cannot_tell_leaves_the_oracle_and_answer_probes_untested_never_failed():
    records = [{"probe": "oracle", "key": f"k{i}", "idx": i, "skipped": True, "reason": REASON, "error": None}
               for i in range(6)]
    for name in ("empty", "refusal", "echo", "garbage", *sorted(NEEDS_ORACLE - {"prompt-copy"})):
        records += [{"probe": name, "key": f"k{i}", "idx": i, "skipped": True, "reason": REASON, "error": None}
                    if name in NEEDS_ORACLE else rec(name, i, {"exact_match": 0.0}) for i in range(6)]
    report = Gates()
    judge_audit(audit(records, mode="rollouts", custom_env=True), CONFIG, report)
    status = {f.name: f for f in report.findings}
    assert status["oracle"].status == "skip" and REASON in status["oracle"].message
    for name in NEEDS_ORACLE - {"prompt-copy"}:
        assert status[f"probe {name}"].status == "skip" and REASON in status[f"probe {name}"].message, name
    assert status["probe empty"].status == "pass"  # a probe that needs no answer still plays and is judged
    assert not any(f.startswith(("oracle", "probe ", "reward errors")) for f in report.failed), report.failed
    untested = report.report().untested
    assert any(u.startswith("oracle:") for u in untested)
    held = decide(stats(counts(0.45)), BANDS, entry("k" * 40, stats(counts(0.05))), gates_untested=untested)
    assert held.verdict == "inconclusive"


def test_the_reason_is_read_back_from_a_rollouts_provider_error():
    # what a real rollout's trace holds when the endpoint answered 409 (verifiers' ProviderError, JSON-quoted)
    error = [{"type": "ProviderError", "status_code": 409, "message": 'upstream 409: {"error": {"message": "'
              + REASON + '; send the task\'s key as the X-AutoEnv-Task header", "type": "server_error", "code": 409}}'}]
    assert ambiguity(json.dumps([[], [error]])) == REASON
    assert ambiguity("upstream 404: no task of the candidate matches this conversation") is None


def answers_by_task(records: list[dict]) -> dict[str, str]:
    """The oracle's final reply of each task: its codeword (the oracle hook reveals all of it on the last turn)."""
    return {r["key"]: r["reply"] for r in records if r["probe"] == "oracle"}


@pytest.mark.e2e
def test_tasks_sharing_one_sentence_each_play_their_own_answer_through_the_real_cli(run_repo):
    root = run_repo("arithmetic", config_text=small_config(examples=6))
    result = autoenv("eval", "--offline", "--env", str(CODEWORD), cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    entry_ = ledger(root)[-1]
    gates = {f["name"]: f for f in entry_["gates"]["findings"]}
    assert gates["oracle"]["status"] == "pass", gates["oracle"]
    assert entry_["stats"]["strong"]["mean"] == 1.0  # the `oracle` model solved every task it was given
    assert entry_["verdict"]["verdict"] == "baseline", entry_["verdict"]
    records = json.loads((root / entry_["outputs"] / "gates" / "audit.json").read_text())["probes"]
    answers = answers_by_task(records)
    assert len(answers) == 6 and len(set(answers.values())) == 6  # six tasks, six codewords
    played = {name: [r for r in records if r["probe"] == name and not r.get("skipped")]
              for name in ("first-number", "last-line", "kitchen-sink", "wrong-answer")}
    assert all(len(rs) == 6 for rs in played.values()), {k: len(v) for k, v in played.items()}
    for r in played["first-number"]:  # each probe built from its own task's answer, never another task's
        assert r["reply"].startswith(answers[r["key"]] + " "), r
    for r in played["last-line"]:
        assert r["reply"].splitlines()[-1] == answers[r["key"]], r
    for r in played["kitchen-sink"]:
        assert answers[r["key"]] in r["reply"].splitlines(), r
    for r in played["wrong-answer"]:
        assert r["reply"] != answers[r["key"]], r
    assert {gates[f"probe {n}"]["status"] for n in played} == {"pass"}


@pytest.mark.slow
def test_color_codewords_first_longest_reading_is_caught_on_the_task_each_rollout_plays(tmp_path):
    """color_codeword's own extraction (the longest A-I run, the first of equals) pays a reply that offers its
    answer first and another after: `first-number` finds it, as it can only when it plays each task's answer."""
    flawed = tmp_path / "shared-codeword-planted"
    shutil.copytree(CODEWORD, flawed, ignore=shutil.ignore_patterns("__pycache__"))
    source = flawed / "shared_codeword" / "__init__.py"
    text = source.read_text()
    sound = '''    reply = (text or "").strip().upper()
    return reply if re.fullmatch(r"[A-I]+", reply) else ""
'''
    assert sound in text
    source.write_text(text.replace(sound, '''    runs = re.findall(r"\\b[A-I]+\\b", (text or "").upper())
    return max(runs, key=len) if runs else ""
'''))
    (tmp_path / "config.toml").write_text(small_config(examples=6))
    result = autoenv("probe", "--env", str(flawed), cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    found = json.loads(max((tmp_path / "outputs" / "scratch").glob("*/gates/gates.json"),
                           key=lambda p: p.stat().st_mtime).read_text())["findings"]
    status = {f["name"]: f["status"] for f in found}
    assert status["oracle"] == "pass" and status["probe first-number"] == "fail", found
    assert status["probe last-line"] == "pass" and status["probe wrong-answer"] == "pass"
