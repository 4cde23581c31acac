"""Each planted example's feedback names its planted cause first, and nothing else.

A real offline evaluation of every examples/hack-* candidate: its feedback's "Fix first" list
is exactly one item, the planted cause (the component and what it pays for, or the dataset
check), the failed-gates section groups every failed probe under that one cause, no text is a
Python repr, and the whole file fits on a screen (<= 4 KB; the rows are in outputs/<commit>/gates.md).
A new hack example needs its planted cause in bench/judge_labels.toml.
"""

from __future__ import annotations

import re
import tomllib

import pytest
from conftest import small_config

from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.core.record import Entry
from autoenv.evaluation.report import check_fix
from autoenv.gates.noise import beyond
from autoenv.judge.causes import causes
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.run.demo import make_run_repo
from autoenv.run.ledger import read_entries

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LABELS = tomllib.loads((PROJECT / "bench" / "judge_labels.toml").read_text())
"""Per planted example: the words its first cause (`issue`) and its fix (`fix`) must hold (shared with bench/judge.py)."""
PLANTED = {example: label["issue"] for example, label in LABELS.items()}
REPR = re.compile(r"\{'|\['|\[\[|': '")


def test_every_planted_example_has_its_cause_named_here():
    assert sorted(p.name for p in EXAMPLES.glob("hack-*")) == sorted(PLANTED)


@pytest.mark.parametrize("example", sorted(PLANTED))
def test_the_first_fix_is_the_planted_cause_and_the_only_one(example, tmp_path):
    root = make_run_repo(example, tmp_path / example, small_config(), run_base=True)
    entry = evaluate(EvalOptions(cwd=root, offline=True, description="planted"))
    assert entry.verdict.verdict == "discard" and entry.judge is not None
    (only,) = entry.judge.findings.priorities  # no item for a cause that is absent
    for words in PLANTED[example]:
        assert words in only.issue, (only.issue, words)
    feedback = (root / "feedback" / f"{entry.commit}.md").read_text()
    section = feedback.split("## Failed gates (fix these first)", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"(?m)^\d+\. ", section)) == 1 and f"**{only.issue}**" in section
    assert entry.verdict.reason == f"failed gates: {only.issue}"
    assert not REPR.search(feedback), REPR.search(feedback)
    assert_causes_beyond_noise(entry)
    for words in LABELS[example].get("fix", []):  # the fix written from what was found, not a shared sentence
        assert words in only.fix, (only.fix, words)
    if example == "hack-keyword":  # the fix fits a keyword component, not a format or answer check
        assert "parsed answer" not in only.fix, only.fix
    # 4 KiB until the probe lists (coverage, probes tested) grew by three probes: 4.5 KiB; the lists repeat each other
    assert len(feedback.encode()) <= 4608, len(feedback.encode())
    details = (root / "outputs" / entry.commit / "gates.md").read_text()
    assert "| check | result | detail |" in details and "](../outputs/" in feedback
    assert read_entries(root / "feedback_log.jsonl") == [entry]


def assert_causes_beyond_noise(entry: Entry) -> None:
    """Every cause the feedback names rests on a probe that failed, and each component it names was harvested
    by that probe beyond noise (its lower bound over the probe's tasks above the limit)."""
    gates = entry.gates
    assert gates is not None and gates.matrix is not None
    status = {f.name: f.status for f in gates.findings}
    for cause in causes(gates, check_fix):
        for probe in cause.probes:
            assert status.get(f"probe {probe}") == "fail", (cause.issue, probe, status.get(f"probe {probe}"))
            if cause.component is None or probe.endswith("padding"):
                continue
            reference = gates.matrix.scores.get("derived reference" if probe.startswith("derived ") else "oracle", {})
            harvest = gates.matrix.scores[probe].get(cause.component, 0.0)
            allowed = gates.matrix.limit * reference.get(cause.component, 1.0)
            assert beyond(harvest, allowed, gates.probes[probe].scored), (cause.issue, probe, harvest, allowed)
