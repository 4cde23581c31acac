"""Every file a result block or a feedback file names is there: `autoenv demo` of a candidate the gates discard
(no rollouts, so no traces and no worker.log) keeps its output in run.log as evaluate.sh does, and names it.
The same evaluation shows a planted hack discarded before any model is called (one demo, read by both tests)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import autoenv, head, ledger


def block(stdout: str) -> dict[str, str]:
    """The result block's `key: value` lines (after the last `---`)."""
    tail = stdout.rsplit("\n---\n", 1)[-1]
    return {m[1]: m[2] for m in re.finditer(r"(?m)^([a-z_]+):\s+(.*)$", tail)}


def named_files(feedback: Path, root: Path) -> list[Path]:
    """The files a feedback file links: markdown links (relative to its folder) and `outputs/...` in backticks."""
    text = feedback.read_text()
    linked = [feedback.parent / target for target in re.findall(r"\]\(([^)\s]+)\)", text)
              if not target.startswith(("http:", "https:", "#"))]
    quoted = [root / path for path in re.findall(r"`(outputs/[^`<>*]+)`", text)]
    return linked + quoted


@pytest.fixture(scope="module")
def discarded_demo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`autoenv demo --example hack-format` (a planted hack the gates discard), run once for this module's tests,
    which only read it."""
    where = tmp_path_factory.mktemp("links")
    root = where / "demo"
    return root, autoenv("demo", "--example", "hack-format", "--dir", str(root), cwd=where)


@pytest.mark.slow
def test_a_gate_discarded_demo_names_only_files_that_exist_and_keeps_its_log(discarded_demo):
    root, done = discarded_demo
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    fields = block(done.stdout)
    commit = head(root)
    assert fields["verdict"] == "discard" and fields["log"] == f"outputs/{commit}/run.log", fields
    run_log = (root / fields["log"]).read_text()
    assert "▶ check + probe" in run_log and re.search(r"(?m)^verdict:\s+discard$", run_log)  # the whole output
    for key in ("feedback", "plot", "log"):
        assert (root / fields[key]).is_file(), (key, fields[key])
    feedback = root / fields["feedback"]
    named = named_files(feedback, root)
    assert any(p.name == "gates.md" for p in named) and any(p.name == "audit.log" for p in named), named
    assert [p for p in named if not p.exists()] == [], feedback.read_text()
    assert not (root / "outputs" / commit / "worker.log").exists() and "worker.log" not in feedback.read_text()
    assert "<role>" not in feedback.read_text()


@pytest.mark.e2e
def test_planted_hack_is_discarded_before_any_model_is_called(discarded_demo):
    root, result = discarded_demo
    commit = head(root)
    assert result.returncode == 0, result.stderr
    assert re.search(r"(?m)^verdict:\s+discard$", result.stdout)
    (entry,) = ledger(root)
    assert entry["gates"]["passed"] is False
    assert any(f.startswith("probe wrong-answer") for f in entry["gates"]["failed"])
    assert entry["stats"] == {} and "failed gates" in entry["verdict"]["reason"]
    out = root / "outputs" / commit
    assert not (out / "smoke").exists() and not (out / "target").exists()  # nothing spent on models
    report = (root / "feedback" / f"{commit}.md").read_text()
    assert report.index("## Failed gates") < report.index("## Checks and probes")
    assert "wrong-answer" in report and "| probe wrong-answer | fail |" in (out / "gates.md").read_text()
