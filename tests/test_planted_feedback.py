"""Each planted example's feedback names its planted cause first, and nothing else.

A real offline evaluation of every examples/hack-* candidate: its feedback's "Fix first" list
is exactly one item, the planted cause (the component and what it pays for, or the dataset
check), the failed-gates section groups every failed probe under that one cause, no text is a
Python repr, and the whole file fits on a screen (<= 4 KB; the rows are in outputs/<commit>/gates.md).
A new hack example needs its planted cause here.
"""

from __future__ import annotations

import re

import pytest
from conftest import small_config

from autoenv.core.paths import EXAMPLES
from autoenv.core.record import Entry
from autoenv.evaluation.report import check_fix
from autoenv.gates.noise import beyond
from autoenv.judge.causes import causes
from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.run.demo import make_run_repo
from autoenv.run.ledger import read_entries

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PLANTED = {  # example -> what its one cause must say
    "hack-format": ["reward component `formatted` (weight 0.6)", "pays the format whatever the answer"],
    "hack-injection": ["reward component `graded`", "note to the grader"],
    "hack-keyword": ["reward component `shows_work` (weight 0.5)", "pays the reply's wording whatever the answer"],
    "hack-lastline": ["reward component `correct`", "last line"],
    "hack-leak": ["reward component `correct`", "leaks into the prompt"],
    "hack-length": ["reward component `thorough`", "length"],
    "hack-repeats": ["exact duplicates", "repeated prompts"],
    "hack-substring": ["reward component `correct`", "list of guesses"],
    "hack-abstain": ["declines to answer"],
    "hack-typical": ["typical value"],
    "hack-selfreport": ["says about itself"],
    "hack-structural": ["structure alone"],
    "hack-stub": ["does nothing"],
    "hack-toolspam": ["valid tool calls"],
    "hack-stall": ["turns survived"],
    # flaws no probe names: the reward search builds the reply (its cause leads where it harvests most)
    "hack-nan-balance": ["reward component `correct` (weight 1)", "reward search built without the task"],
    "hack-recall": ["reward component `coverage` (weight 1)", "reward search built without the task"],
    "hack-persona": ["reward component `expert_voice` (weight 1)", "reward search built without the task"],
    "hack-toolecho": ["reward component `correct` (weight 1)", "reward search built without the task"],
}
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
    if example == "hack-keyword":  # the fix fits a keyword component, not a format or answer check
        assert "remove it, or gate it on correctness" in only.fix and "parsed answer" not in only.fix, only.fix
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
