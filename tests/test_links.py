"""Every file a result block or a feedback file names is there: `autoenv demo` of a candidate the gates discard
(no rollouts, so no traces and no worker.log) keeps its output in run.log as evaluate.sh does, and names it."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import autoenv, head


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


def test_a_gate_discarded_demo_names_only_files_that_exist_and_keeps_its_log(tmp_path):
    root = tmp_path / "demo"
    done = autoenv("demo", "--example", "hack-format", "--dir", str(root), cwd=tmp_path)
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
