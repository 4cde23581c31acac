"""`autoenv log`: the run's evaluations in a table or as JSON, from the ledger or the git notes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from review_run import BRANCH, copy_run, review, review_run

from autoenv.review.rows import sparkline
from autoenv.run.ledger import GENESIS, line_hash

VERDICTS = ["baseline", "discard", "inconclusive", "crash", "discard", "keep", "inconclusive"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return review_run(tmp_path_factory.getbasetemp() / "review")


@pytest.mark.slow
def test_the_table_lists_the_run_oldest_first_in_plain_text(run, capsys):
    code, out, _ = review(capsys, run.root, "log")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{BRANCH}: 7 evaluations, 2 kept, last kept (◀) #6 {run.commits['keep'][:8]}"
    rows = [line for line in lines if line[:2].strip().isdigit()]
    assert [row.split()[1] for row in rows] == [run.commits[k][:8] for k in
                                                ("real", "discard", "inconclusive", "crash", "gates", "keep", "priced")]
    assert run.commits["other"][:8] not in out  # another run's entry in the same ledger
    for row, verdict in zip(rows, VERDICTS):
        assert f" {verdict} " in row
    assert "◀ kept" in rows[5] and "◀" not in "".join(rows[:5] + rows[6:])
    assert "fail 1" in rows[4] and "$0.0012" in rows[6]  # the failed gate, the priced evaluation
    assert "0.50 [0.00, 1.00]" in rows[0] and rows[3].count("–") >= 4  # a crash has no numbers
    assert "\x1b[" not in out and not set("│┃━┏") & set(out)  # not a terminal: no colour, no borders
    assert lines[-1].startswith("target mean  ▅▁▅  ▅▅  ")


def test_json_gives_an_agent_every_row(run, capsys):
    code, out, _ = review(capsys, run.root, "log", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["verdict"] for r in rows] == VERDICTS
    assert [r["number"] for r in rows] == list(range(1, 8))
    assert [r["last_kept"] for r in rows] == [False] * 5 + [True, False]
    first, gates = rows[0], rows[4]
    assert first["commit"] == run.commits["real"] and first["target"]["ci"] == [0.0, 1.0]
    assert first["strong"] == {"model": "oracle", "mean": 1.0, "ci": [1.0, 1.0]}
    assert gates["gates"] == "fail" and gates["gates_failed"] == ["probe echo: mean 0.900 (allowed 10% of the oracle)"]
    assert rows[3]["target"] is None and rows[3]["learnable"] is None
    assert rows[6]["cost"] == pytest.approx(2 * 8 * (50 * 1.0 + 6 * 4.0) / 1e6)  # tokens x price, both models
    for r in rows:
        assert (run.root / r["feedback"]).is_file() and (run.root / r["plot"]).is_file()


def test_runs_are_told_apart_by_branch(run, capsys):
    code, out, _ = review(capsys, run.root, "log", "--all")
    assert code == 0 and "all runs: 8 evaluations, 3 kept" in out and " other " in out
    for tag in ("other", "autoenv/other"):
        code, out, _ = review(capsys, run.root, "log", "--json", "--tag", tag)
        assert [r["commit"] for r in json.loads(out)] == [run.commits["other"]]


def test_an_unknown_run_is_an_error_that_lists_the_runs(run, capsys):
    code, _, err = review(capsys, run.root, "log", "--tag", "nope")
    assert code == 2
    assert "there is no run autoenv/nope" in err and "demo-arithmetic (7 evaluations), other (1 evaluation)" in err


def test_a_branch_that_is_no_run_needs_a_tag(run, tmp_path, capsys):
    copy = copy_run(run, tmp_path / "copy")
    subprocess.run(["git", "checkout", "-qb", "scratch"], cwd=copy.root, check=True)
    code, _, err = review(capsys, copy.root, "log")
    assert code == 2 and "scratch is not a run branch" in err and "pass --tag" in err


def test_an_empty_run(run, tmp_path, capsys):
    copy = copy_run(run, tmp_path / "copy")
    subprocess.run(["git", "checkout", "-qb", "autoenv/empty"], cwd=copy.root, check=True)
    code, out, _ = review(capsys, copy.root, "log")
    assert code == 0 and "autoenv/empty: no evaluations yet" in out
    assert review(capsys, copy.root, "log", "--json")[1].strip() == "[]"
    code, _, err = review(capsys, copy.root, "plot")
    assert code == 2 and "autoenv/empty has no evaluations yet: nothing to plot" in err and "evaluate.sh" in err


def test_the_git_notes_stand_in_for_a_missing_ledger(run, tmp_path, capsys):
    copy = copy_run(run, tmp_path / "copy")
    (copy.root / "feedback_log.jsonl").unlink()
    code, out, _ = review(capsys, copy.root, "log")
    assert code == 0 and "(from git notes: the ledger is missing)" in out
    rows = json.loads(review(capsys, copy.root, "log", "--json")[1])
    assert [r["verdict"] for r in rows] == VERDICTS and {r["source"] for r in rows} == {"git note"}
    assert rows[0]["target"] == {"model": "noisy-oracle:0.45", "mean": 0.5, "ci": None}
    assert rows[4]["gates"] == "fail" and rows[1]["description"] == "harder prompts"  # the commit's subject
    code, out, _ = review(capsys, copy.root, "show", run.commits["keep"][:10])
    assert code == 0 and "from the git note only" in out


def test_an_edited_ledger_line_is_marked(run, tmp_path, capsys):
    copy = copy_run(run, tmp_path / "copy")
    ledger = copy.root / "feedback_log.jsonl"
    lines = ledger.read_text().splitlines()
    lines[1] = lines[1].replace('"harder prompts"', '"easier prompts"')
    ledger.write_text("\n".join(lines) + "\n")
    rows = json.loads(review(capsys, copy.root, "log", "--json")[1])
    assert [r["tampered"] for r in rows] == [False, False, True, False, False, False, False]
    assert "⚠ chain broken" in review(capsys, copy.root, "log")[1]
    assert review(capsys, copy.root, "plot")[0] == 0


def test_entries_of_older_harnesses_show_dashes(run, tmp_path, capsys, data_dir):
    """Version-1 entries stripped of every optional field: shown as "–", never a crash."""
    copy = copy_run(run, tmp_path / "copy")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=copy.root, capture_output=True, text=True).stdout.strip()
    lines, previous = [], GENESIS
    for number, line in enumerate((data_dir / "ledger_v1.jsonl").read_text().splitlines()):
        raw = json.loads(line)
        for key in ("budget", "gates", "judge", "timings", "run_id", "outputs", "candidate", "offline", "description",
                    "strong_model", "failed_stage", "error"):
            raw.pop(key, None)
        raw["rl_readiness"] = {}
        for stats in raw["stats"].values():
            for key in ("per_task", "components", "by_difficulty", "by_category", "cost_usd", "mean_seconds"):
                stats.pop(key, None)
        if number == 0:  # no branch either: it belongs to the run when its commit is in the branch's history
            raw.pop("branch")
            raw["commit"] = head
        raw["prev_hash"] = previous
        lines.append(json.dumps(raw))
        previous = line_hash(lines[-1])
    (copy.root / "feedback_log.jsonl").write_text("\n".join(lines) + "\n")
    code, out, err = review(capsys, copy.root, "log")
    assert code == 0, err
    assert "4 evaluations" in out and "⚠" not in out
    rows = json.loads(review(capsys, copy.root, "log", "--json")[1])
    assert [r["verdict"] for r in rows] == ["keep", "inconclusive", "discard", "crash"]
    assert rows[0]["commit"] == head and rows[0]["description"] == "" and rows[0]["learnable"] is None
    code, out, err = review(capsys, copy.root, "show", head[:8])
    assert code == 0, err
    assert "description: –" in out and "gates: did not run" in out and "judge: none" in out
    for command in ("plot", "report"):
        assert review(capsys, copy.root, command)[0] == 0


@pytest.fixture
def data_dir() -> Path:
    return Path(__file__).parent / "data"


def test_the_sparkline_scales_to_one_and_leaves_gaps():
    assert sparkline([0.0, 0.5, None, 1.0]) == "▁▅ █"
    assert sparkline([1.0, 2.0]) == "▅█"  # rewards above 1 rescale
    assert sparkline([0.25, 0.375]) == "▃▄"  # told apart


def test_a_rescored_row_is_marked_with_the_commit_it_scored_again():
    from autoenv.core.record import Entry, Verdict
    from autoenv.review.rows import Row
    from autoenv.review.terminal import row_marks

    entry = Entry(commit="b" * 40, timestamp="2026-01-01T00:00:00Z", eval_success=True,
                  verdict=Verdict(verdict="keep", reason="-"), rescored_from="a" * 40)
    row = Row.from_entry(entry, 3)
    assert row_marks(row) == "↻ rescored aaaaaaaa" and row.to_json()["rescored_from"] == "a" * 40
    assert row_marks(Row.from_entry(Entry(**{**entry.model_dump(), "rescored_from": None}), 4)) == ""
