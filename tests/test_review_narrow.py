"""`log` and `show` in a narrow terminal (COLUMNS=80): a stacked layout, no line wider than 80, and the
numbers that matter (the #, intervals, counts) never cut."""

from __future__ import annotations

import pytest
from conftest import autoenv
from review_run import review_run

WIDTH = 80


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return review_run(tmp_path_factory.getbasetemp() / "review")


def narrow(root, *args: str, columns: int = WIDTH) -> str:
    result = autoenv(*args, cwd=root, env={"COLUMNS": str(columns)})
    assert result.returncode == 0, result.stderr
    return result.stdout


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.slow
def test_log_stacks_under_100_columns(run):
    out = narrow(run.root, "log")
    print(out)
    assert widest(out) <= WIDTH
    lines = out.splitlines()
    for number, key in enumerate(("real", "discard", "inconclusive", "crash", "gates", "keep", "priced"), 1):
        assert any(line.startswith(f"#{number} {run.commits[key][:8]} ") for line in lines), number
    assert "   target 0.50 [0.00, 1.00] · strong 1.00 · learn 0.50 · gates – · cost –" in lines
    assert any(line.startswith("#6 ") and line.endswith("keep ◀ kept") for line in lines)
    assert "gates fail 1" in out and "cost $0.0012" in out
    assert lines[-1].startswith("target mean  ▅▁▅  ▅▅  ")  # the gaps kept
    wide = narrow(run.root, "log", columns=132)  # a wide terminal keeps the table
    assert widest(wide) > WIDTH and "target [95% CI]" in wide


@pytest.mark.slow
def test_show_stacks_under_100_columns(run):
    for key in ("real", "discard", "crash", "gates", "keep", "priced"):
        out = narrow(run.root, "show", run.commits[key][:8])
        assert widest(out) <= WIDTH, (key, [line for line in out.splitlines() if len(line) > WIDTH])
    out = narrow(run.root, "show", run.commits["keep"][:8])
    print(out)
    assert "  mean 0.500 [0.500, 0.500] · std 0.500 · solve 0.500" in out  # the interval whole
    assert "  disagree 1.000 · scored 8/8 · errors p/t/e 0/0/0" in out
    assert "Evaluation summary" in out and "Per difficulty" in out
