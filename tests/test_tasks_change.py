"""A run survives its own progress: a literal walk of program.md that changes the tasks still gets verdicts.

Tasks are keyed by their prompt, so the most common improvement an agent makes (to the tasks)
once shared no task with the kept evaluation, and every later evaluation of the run ended
"too few shared tasks to compare": nothing could be kept or discarded again. Here the walk
follows program.md's loop (its probe, commit and evaluate commands, as written) on the
arithmetic example, against a stand-in target whose skill depends on the tasks' content
(tests/arith_model.py): a reworded prompt (every task key changes, the numbers do not),
then the spec's fix to the levels' construction (the target loses the nested tasks), which
must reach keep or discard on numbers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from arith_model import serving
from conftest import ledger, small_config
from literal_reader import result_block
from program_md import loop
from test_literal_reader import fresh_clone

pytestmark = pytest.mark.e2e
WARM = True  # several evaluations of one run per test: the warm child forks them (tests/conftest.py)

BUDGET = {"examples": 45, "rollouts_per_example": 2, "min_tasks": 10}


def models_at(base_url: str) -> str:
    text = small_config(**BUDGET).replace("target_max = 0.7", "target_max = 0.6")  # a person after a harder env
    assert "target_max = 0.6" in text
    text = text.replace('base_url = "https://api.openai.com/v1"', f'base_url = "{base_url}"')
    text = text.replace('api_key_var = "OPENAI_API_KEY"', 'api_key_var = ""')
    return text.replace('model = "gpt-4.1-mini"', 'model = "shallow"').replace('model = "gpt-4.1"', 'model = "exact"')


def fresh_run(root: Path, config: str) -> Path:
    """What a clone holds (harness files, the project's venv), then `autoenv new walk --example arithmetic`."""
    return fresh_clone(root, example="arithmetic", tag="walk", config=config)


class Walk:
    """program.md's loop, command by command, as its text gives them."""

    def __init__(self, root: Path):
        self.root = root
        steps = loop(root / "program.md")
        self.probe = next(c.text for c in steps if c.text.startswith(".venv/bin/autoenv probe"))
        self.commit = next(c.text for c in steps if c.text.startswith("git add candidate && git commit"))
        self.evaluate = next(c.text for c in steps if c.text.startswith("bash evaluate.sh"))

    def bash(self, command: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "OPENAI_API_KEY": "", "NO_COLOR": "1"}
        return subprocess.run(["bash", "-c", command], cwd=self.root, env=env, capture_output=True, text=True,
                              timeout=900, check=False)

    def fill(self, command: str, text: str) -> str:
        return re.sub(r'"<[^>]*>"', json.dumps(text), command)

    def step(self, edits: dict[str, str], why: str) -> dict[str, str]:
        """Edit the taskset (old text -> new), probe, commit, evaluate: the verdict's result block."""
        path = self.root / "candidate" / "candidate_env" / "taskset.py"
        text = path.read_text()
        for old, new in edits.items():
            assert old in text, old
            text = text.replace(old, new)
        path.write_text(text)
        probe = self.bash(self.probe)
        assert probe.returncode == 0, probe.stdout[-3000:] + probe.stderr[-3000:]
        done = self.bash(self.fill(self.commit, why))
        assert done.returncode == 0, done.stdout + done.stderr
        return self.run(why)

    def run(self, why: str) -> dict[str, str]:
        done = self.bash(self.fill(self.evaluate, why))
        block = result_block(done.stdout)
        assert "verdict" in block, done.stdout[-3000:] + done.stderr[-3000:]
        return block


def test_a_walk_that_changes_the_tasks_reaches_keep_or_discard_within_two_evaluations(tmp_path):
    with serving() as endpoint:
        walk = Walk(fresh_run(tmp_path / "run", models_at(endpoint.base_url)))
        first = walk.run("the example as autoenv new started it")
        assert first["verdict"] == "baseline", first
        reworded = walk.step({'prompt=f"Compute: {expression}"': 'prompt=f"Evaluate exactly: {expression}"'},
                             "reword the prompt: every task key changes, the difficulty does not")
        # the target (exact up to one level of parentheses) now misses every medium and hard task: 0.84 -> 0.33
        fixed = walk.step({"if count >= 2 and rng.random() < 0.7:": "if count >= 2:",
                           "if nested and rng.random() < 0.4:": "if nested:",
                           '"medium": ((2, 3), 50, False)': '"medium": ((2, 3), 50, True)'},
                          "too easy: medium and hard always group their first operation and nest an operand")
    entries = ledger(walk.root)
    assert [e["verdict"]["verdict"] for e in entries][0] == "baseline"
    for entry, block in zip(entries[1:], (reworded, fixed)):
        reason = entry["verdict"]["reason"]
        assert "too few" not in reason, reason
        shared = re.search(r"the tasks changed \(0 of this evaluation's (\d+) shared", reason)
        # 45 tasks; a canary rollout ([probes] canaries) may be a task's only rollout of a model, which then leaves
        # that task out of the paired statistics
        assert shared and 40 <= int(shared.group(1)) <= 45, reason
        assert block["verdict"] == entry["verdict"]["verdict"]
    verdicts = [reworded["verdict"], fixed["verdict"]]
    assert {"keep", "discard"} & set(verdicts), [e["verdict"]["reason"] for e in entries]
