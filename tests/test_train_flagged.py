"""`autoenv train` refuses a kept commit with a known reward hack, and trains at the cap the models are measured at.

A kept commit can still carry a hack the gates saw but did not fail on: here hack-persona with its phrase bonus cut
to 4% of the weight (the reference still reaches 96% of the maximum), so the reward search earns it (the `ceiling` finding names the component, beaten by a
content-free reply) while every gate passes and the offline evaluation is kept. Training on it teaches the phrase:
`autoenv train` says so and stops before any work, unless `--allow-flagged` says the hack is the experiment.
"""

from __future__ import annotations

import re

import pytest

from autoenv.evaluation.context import EvalOptions
from autoenv.evaluation.pipeline import evaluate
from autoenv.export.source import flags, kept_entry
from autoenv.model.realrun import REAL_SAMPLING
from autoenv.model.train import TrainOptions
from autoenv.run.demo import make_run_repo
from tests.conftest import autoenv, commit_all, small_config


@pytest.mark.e2e
def test_a_kept_commit_with_a_component_only_a_content_free_reply_earns_is_refused(tmp_path):
    root = make_run_repo("hack-persona", tmp_path / "run", small_config(), run_base=True)
    module = root / "candidate" / "candidate_env" / "__init__.py"
    text = module.read_text()
    text2 = re.sub(r"@vf\.reward\(weight=1\.0\)(\s+async def expert_voice)", r"@vf.reward(weight=0.04)\1", text)
    # an oracle hook, so the offline evaluation has a reference to play (the honest reply: no phrase)
    text2 = text2.replace("\nclass ConvertConfig", '\n    def oracle(self, messages: list[dict]) -> str:\n'
                          '        return f"Answer: {self.data.answer}"\n\n\nclass ConvertConfig', 1)
    module.write_text(text2)
    assert "weight=0.04" in text2 and "def oracle" in text2
    commit_all(root, "the phrase bonus at 4%")
    entry = evaluate(EvalOptions(cwd=root, offline=True, description="small bonus"))
    assert entry.verdict.verdict == "baseline", entry.verdict.reason  # every gate passed: kept
    found = flags(kept_entry(root)[0])
    assert found and "`expert_voice`" in found[0] and "search" in found[0], found
    proc = autoenv("train", "--max-steps", "1", cwd=root)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = proc.stdout + proc.stderr
    assert "known reward hack" in said and "expert_voice" in said and "--allow-flagged" in said
    assert not (root / "train").exists()  # refused before any work


def test_training_samples_at_the_cap_the_models_are_measured_at():
    assert TrainOptions(root=".").max_completion_tokens is None  # type: ignore[arg-type]  # resolved in train()
    assert REAL_SAMPLING["max_tokens"] == 192
