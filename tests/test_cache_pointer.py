"""A cache hit is a pointer (verdict `cached`, `cached_from`), never a second baseline or kept row;
every reader follows it to the source's numbers, traces and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import commit_all
from review_run import review
from test_pipeline import stats

from autoenv.core.record import Entry
from autoenv.evaluation.context import EvalOptions, Outcome
from autoenv.evaluation.decision import verdict
from autoenv.evaluation.pipeline import evaluate
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recording import record
from autoenv.export.source import kept_entry
from autoenv.review.run import Project, load_run
from autoenv.run.cache import resolve
from autoenv.run.ledger import read_entries


def baseline_then_hit(root: Path) -> tuple[Entry, Entry]:
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    source = record(ctx, verdict(ctx, Outcome(stats=stats())))
    (root / "NOTES.md").write_text("a commit that leaves the candidate alone\n")
    commit_all(root, "notes")
    hit = evaluate(EvalOptions(cwd=root, offline=True, description="same candidate"))
    return source, hit


def test_a_cache_hit_is_recorded_as_a_pointer_not_a_second_baseline(run_repo):
    root = run_repo("arithmetic")
    source, hit = baseline_then_hit(root)
    assert source.verdict.verdict == "baseline" and source.kept
    assert hit.verdict.verdict == "cached" and not hit.kept
    assert hit.cached_from == source.commit and hit.stats == {} and hit.gates is None and hit.judge is None
    entries = read_entries(root / "feedback_log.jsonl")
    assert resolve(entries, entries[1]) == source
    feedback = (root / "feedback" / f"{hit.commit}.md").read_text()
    assert feedback.startswith(f"# {hit.commit[:12]}: cached from {source.commit[:12]}")
    assert (root / "feedback" / f"{source.commit}.md").read_text() in feedback


def test_every_reader_follows_the_pointer_to_the_source(run_repo, capsys):
    root = run_repo("arithmetic")
    source, hit = baseline_then_hit(root)
    (root / "outputs" / source.commit / "plot.png").write_bytes(b"png")
    run = load_run(Project.open(root))
    first, second = run.rows
    assert second.cached_from == source.commit and not second.kept and second.verdict == "cached"
    assert second.target == first.target and second.entry == source  # the source's numbers
    assert run.last_kept is first and sum(r.kept for r in run.rows) == 1
    code, out, _ = review(capsys, root, "log", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["cached_from"] for r in rows] == [None, source.commit]
    assert [r["kept"] for r in rows] == [True, False] and rows[1]["target"] == rows[0]["target"]
    assert rows[1]["plot"] == rows[0]["plot"] == f"outputs/{source.commit}/plot.png"
    code, out, _ = review(capsys, root, "show", hit.commit[:10])
    assert code == 0 and f"are those of {source.commit[:12]} (verdict baseline)" in out
    assert "target" in out and "0.417" in out
    assert kept_entry(root, hit.commit)[0] == source  # export follows the pointer
    assert kept_entry(root)[0] == source  # the last kept entry is the source, not the copy


def test_the_result_block_of_a_hit_shows_the_sources_numbers(run_repo, capsys):
    from autoenv.cli import print_result
    root = run_repo("arithmetic")
    source, hit = baseline_then_hit(root)
    capsys.readouterr()
    print_result(hit, root)
    out = capsys.readouterr().out
    assert "verdict:" in out and "cached" in out and "cached_from:" in out and source.commit in out
    assert "target_mean:" in out and str(source.stats["target"].mean) in out


def test_a_version_4_copy_reads_as_a_pointer(run_repo):
    root = run_repo("arithmetic")
    source, hit = baseline_then_hit(root)
    old = json.loads(source.to_json()) | {"schema_version": 4, "commit": hit.commit, "cached_from": source.commit}
    copy = Entry.from_json(old)
    assert copy.verdict.verdict == "cached" and not copy.kept
    assert resolve([source, copy], copy) == source


@pytest.mark.slow
def test_the_report_and_the_plot_show_a_hit_as_a_pointer(run_repo, capsys, tmp_path):
    root = run_repo("arithmetic")
    source, hit = baseline_then_hit(root)
    code, out, _ = review(capsys, root, "report", "--out", str(tmp_path / "report.html"))
    assert code == 0
    page = (tmp_path / "report.html").read_text()
    assert f"→ #1 {source.commit[:8]} (cache hit)" in page and "2 evaluations · 1 kept" in page
    code, out, _ = review(capsys, root, "plot", "--out", str(tmp_path / "plot.png"))
    assert code == 0 and (tmp_path / "plot.png").stat().st_size > 10_000
