"""The near-miss probe: the reference answer changed the way a careless comparison still accepts it.

Tried as a new user would, `abs(value) == abs(answer)` passed every gate offline: each probe either kept the right
answer (padding, first-number) or put in a different task's answer, never the right number with its sign dropped.
tests/data/abs-compare (signed temperatures, half below zero) has that reward; its fixed version compares signed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoenv.core.messages import Reply
from autoenv.gates.probes import near_misses, probe_replies
from tests.conftest import autoenv, small_config

DATA = Path(__file__).parent / "data"


def test_a_number_is_changed_the_ways_a_careless_comparison_accepts():
    assert near_misses("42") == {"sign flipped": "-42", "times ten": "420", "digits swapped": "24", "off by one": "43"}
    assert near_misses("-7") == {"sign flipped": "7", "times ten": "-70", "off by one": "-6"}
    assert "off by one" not in near_misses("420") and "off by one" not in near_misses("4.5")  # 1% or more only
    assert near_misses("5050")["digits swapped"] == "5500"  # never a leading zero ("0550")
    assert near_misses("3.14")["times ten"] == "31.4" and near_misses("0") == {"off by one": "1"}
    assert near_misses("Paris") == {}  # a case change or a synonym may be what the task allows: not tried
    replies = probe_replies("near-miss", oracle=Reply(content="It ends at <answer>-13</answer>."), answer="-13",
                            answers=[], messages=[], tools=[], key="k")
    assert {r.content for r in replies.values()} == {"It ends at <answer>13</answer>.",
                                                      "It ends at <answer>-130</answer>.",
                                                      "It ends at <answer>-31</answer>.",
                                                      "It ends at <answer>-12</answer>."}


def findings(root: Path) -> dict:
    gates = max((root / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    return {f["name"]: f for f in json.loads(gates.read_text())["findings"]}


@pytest.mark.slow
def test_an_abs_comparison_is_caught_its_fix_passes_and_a_text_answer_is_not_applicable(tmp_path):
    (tmp_path / "config.toml").write_text(small_config())
    result = autoenv("probe", "--env", str(DATA / "abs-compare"), cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    row = findings(tmp_path)["probe near-miss"]
    assert row["status"] == "fail" and "sign flipped" in row["message"], row
    fixed = tmp_path / "fixed"
    shutil.copytree(DATA / "abs-compare", fixed)
    module = fixed / "abs_compare" / "__init__.py"
    module.write_text(module.read_text().replace("SIGNED = False", "SIGNED = True"))
    result = autoenv("probe", "--env", str(fixed), cwd=tmp_path)
    assert result.returncode == 0 and "FAILED" not in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    assert findings(tmp_path)["probe near-miss"]["status"] == "pass"
    autoenv("probe", "--env", str(DATA / "quiz-rows"), cwd=tmp_path)  # an oracle hook, capital cities as answers
    row = findings(tmp_path)["probe near-miss"]
    assert row["status"] == "skip" and "does not apply: the task's answer is not a number" in row["message"], row
