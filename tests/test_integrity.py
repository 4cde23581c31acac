"""autoenv verify: the ledger's hash chain against the git notes, on real repositories (no worker)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import autoenv, commit_all
from test_pipeline import stats

from autoenv.core.errors import AutoEnvError
from autoenv.evaluation.commands import verify
from autoenv.evaluation.context import EvalOptions, Outcome
from autoenv.evaluation.decision import verdict
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recording import record
from autoenv.run.gitrepo import Repo
from autoenv.run.integrity import FOUND, check, written_by_others


@pytest.fixture
def evaluated(run_repo) -> Path:
    """A run with three evaluated commits recorded in-process."""
    root = run_repo("arithmetic", run_base=True)
    for i in range(3):
        if i:
            (root / "candidate" / "README.md").write_text(f"iteration {i}\n")
            commit_all(root, f"iteration {i}")
        ctx = preflight(EvalOptions(cwd=root, offline=True))
        record(ctx, verdict(ctx, Outcome(stats=stats())))
    return root


def lines(root: Path) -> list[str]:
    return (root / "feedback_log.jsonl").read_text().splitlines()


def write(root: Path, new: list[str]) -> None:
    (root / "feedback_log.jsonl").write_text("".join(line + "\n" for line in new))


def problems(root: Path) -> list[str]:
    return check(root / "feedback_log.jsonl", Repo(root).notes())


@pytest.mark.slow
def test_an_intact_ledger_has_no_problems_and_each_note_carries_its_entry(evaluated):
    assert problems(evaluated) == []
    assert verify(evaluated) == ([], 3)
    assert all("\nentry: " in text and "\nledger: " in text for text in Repo(evaluated).notes().values())


@pytest.mark.slow
def test_an_edited_entry_is_named(evaluated):
    old = lines(evaluated)
    data = json.loads(old[1])
    data["description"] = "a better story"
    write(evaluated, [old[0], json.dumps(data), old[2]])
    found = problems(evaluated)
    assert any(p.startswith("line 2 (commit ") and "was edited" in p for p in found), found


@pytest.mark.slow
def test_an_edited_last_entry_is_named(evaluated):
    old = lines(evaluated)
    write(evaluated, [*old[:2], old[2].replace('"description": ""', '"description": "x"')])
    assert next(p for p in problems(evaluated) if "was edited" in p).startswith("line 3 (commit ")


@pytest.mark.slow
def test_reordered_entries_are_named(evaluated):
    old = lines(evaluated)
    write(evaluated, [old[0], old[2], old[1]])
    found = problems(evaluated)
    assert found == ["line 2 is out of order: its entry came after line 3's (reordered)"], found


@pytest.mark.slow
def test_an_inserted_entry_is_named(evaluated):
    old = lines(evaluated)
    fake = json.loads(old[1]) | {"description": "never evaluated"}
    write(evaluated, [old[0], json.dumps(fake), *old[1:]])
    assert "line(s) 2–2 were inserted: line 3 continues the chain from line 1" in problems(evaluated)


@pytest.mark.slow
def test_a_deleted_last_entry_is_named_and_recorded_by_the_next_evaluation(evaluated):
    old = lines(evaluated)
    write(evaluated, old[:2])
    last = json.loads(old[2])["commit"]
    entry_hash = hashlib.sha256(old[2].encode()).hexdigest()
    assert problems(evaluated) == [(f"the entry of commit {last[:12]} was deleted: its git note records entry "
                                   f"{entry_hash[:12]}, which is not in feedback_log.jsonl")]
    result = autoenv("verify", cwd=evaluated)
    assert result.returncode == 1 and f"the entry of commit {last[:12]} was deleted" in result.stdout
    ctx = preflight(EvalOptions(cwd=evaluated, offline=True))
    entry = record(ctx, verdict(ctx, Outcome(stats=stats())))
    assert entry.ledger_check.startswith("1 problem(s): the entry of commit")


@pytest.mark.slow
def test_a_lost_ledger_is_rebuilt_from_the_notes_and_outputs(evaluated):
    old = lines(evaluated)
    (evaluated / "feedback_log.jsonl").unlink()
    assert problems(evaluated)[0].startswith("feedback_log.jsonl is missing or empty but 3 evaluated commit(s)")
    assert verify(evaluated, restore=True) == ([], 3)
    assert lines(evaluated) == old
    with pytest.raises(AutoEnvError, match="exists and is not empty"):
        verify(evaluated, restore=True)


# --- written during an evaluation: record() restores what preflight verified -----------


def forged_after(line: str, **change) -> str:
    """A forged `keep` continuing the chain from `line`, as a candidate that read the source would write."""
    forged = json.loads(line) | {"prev_hash": hashlib.sha256(line.encode()).hexdigest(),
                                 "verdict": {"verdict": "keep", "reason": "forged"}} | change
    return json.dumps(forged)


@pytest.mark.attack
@pytest.mark.slow
def test_a_forged_entry_written_during_an_evaluation_is_set_aside_and_the_commit_tampered(evaluated, attack_row):
    seen = lines(evaluated)
    (evaluated / "candidate" / "README.md").write_text("iteration 3\n")
    commit_all(evaluated, "iteration 3")
    ctx = preflight(EvalOptions(cwd=evaluated, offline=True))
    forged = forged_after(seen[-1], commit="f" * 40)
    write(evaluated, [*seen, forged])  # a valid entry, chained: only the missing git note gives it away
    entry = verdict(ctx, Outcome(stats=stats()))
    assert entry.verdict.verdict == "tampered" and "feedback_log.jsonl (written during the evaluation)" in entry.tampered
    said = f"line 4 (commit {'f' * 12}) has no git note: no evaluation recorded it"
    assert said in entry.verdict.reason
    assert lines(evaluated) == seen  # restored before the baseline was read
    assert (ctx.out / FOUND).read_text().splitlines() == [*seen, forged]
    recorded = record(ctx, entry)
    assert lines(evaluated)[:3] == seen and len(lines(evaluated)) == 4 and problems(evaluated) == []
    attack_row("forged keep entry with a valid hash chain, appended during an evaluation",
               f"found before the verdict ('{said}'), the ledger restored "
               f"to its {len(seen)} verified lines, the forged text kept in outputs/<commit>/{FOUND}, the commit "
               f"recorded {recorded.verdict.verdict}")


@pytest.mark.slow
def test_entries_another_evaluation_appends_meanwhile_are_kept(evaluated):
    """Two commits evaluated at once in one worktree: the other's line (chained, noted) is no tampering."""
    seen = lines(evaluated)
    (evaluated / "candidate" / "README.md").write_text("iteration 3\n")
    commit_all(evaluated, "iteration 3")
    slow = preflight(EvalOptions(cwd=evaluated, offline=True))
    (evaluated / "candidate" / "README.md").write_text("iteration 4\n")
    commit_all(evaluated, "iteration 4")
    fast = preflight(EvalOptions(cwd=evaluated, offline=True))
    record(fast, verdict(fast, Outcome(stats=stats())))
    entry = verdict(slow, Outcome(stats=stats()))
    assert entry.verdict.verdict != "tampered", entry.verdict.reason
    record(slow, entry)
    assert len(lines(evaluated)) == len(seen) + 2 and problems(evaluated) == []
    assert not (slow.out / FOUND).exists()


@pytest.mark.parametrize("damage,said", [
    (lambda seen: [seen[0], "edited", *seen[2:]], "line 2 of the 3 preflight verified was changed or removed"),
    (lambda seen: [*seen, '{"forged": true}'], "line 4 is not a ledger entry"),
    (lambda seen: [*seen, forged_after(seen[0])], "line 4 does not continue the hash chain"),
])
def test_other_writes_during_an_evaluation_are_named(evaluated, damage, said):
    seen = lines(evaluated)
    write(evaluated, damage(seen))
    problems_found, keep = written_by_others(evaluated / "feedback_log.jsonl", seen, Repo(evaluated).notes())
    assert len(problems_found) == 1 and problems_found[0].startswith(said) and keep == seen
