"""The shapes real verifiers v1 environments have (verifiers' own environments/ folder), each passing as
designed while a planted flaw of the same shape is still caught: duplicates keyed on media and data
fields, rewards outside [0, 1], multi-seat attribution, env-raised rejections, coverage as a gate,
messages that say something."""

from __future__ import annotations

import json

import pytest

from autoenv.core.traces import said
from autoenv.gates.dataset import measure


def image(n: int) -> str:
    return f"img{n:04x}"


def rows_of(prompts: list[str], parts: list[str] | None = None, data: list[dict] | None = None) -> list[dict]:
    return [{"key": f"k{i}", "idx": i, "prompt": p, "system": "", "parts": (parts or [""] * len(prompts))[i],
             "data": json.dumps((data or [{}] * len(prompts))[i], sort_keys=True)} for i, p in enumerate(prompts)]


def test_multimodal_tasks_differ_by_their_images_and_answers_and_true_duplicates_are_caught():
    # grayscale/vision-style: one question text over many images, each with its own answer
    n = 40
    same_text = ["What colour is the square in the image?"] * n
    fine = measure(rows_of(same_text, [image(i) for i in range(n)], [{"answer": f"c{i % 7}"} for i in range(n)]), 0.9)
    assert fine["exact_duplicates"] == 0 and fine["near_duplicate_pairs"] == 0
    planted = measure(rows_of(same_text, [image(i % 10) for i in range(n)], [{"answer": f"c{i % 10}"} for i in range(n)]), 0.9)
    assert planted["exact_duplicates"] == n - 10  # the same image, text and answer: a true duplicate


def test_templated_prompts_over_distinct_seeds_are_not_near_duplicates_but_templated_questions_are():
    template = "You are playing a game of high card, deal number {seed}. You hold a card; reply with one word: bet or fold."
    seeds = measure(rows_of([template.format(seed=i) for i in range(50)], data=[{"info": {"seed": i}} for i in range(50)]), 0.8)
    assert seeds["near_duplicate_pairs"] == 0 and seeds["exact_duplicates"] == 0
    wordle = rows_of(["Let's play wordle: guess the five-letter word."] * 50,
                     data=[{"info": {"game": "Wordle-v0", "seed": i, "example_id": 1000 + i}} for i in range(50)])
    same = measure(wordle, 0.8, reach="the custom Env TextArenaEnv")  # verifiers' textarena: its Env plays the seed's game
    assert same["exact_duplicates"] == 0  # the text is one template, the tasks are the seeds
    assert same["id_fields"] == ["info.example_id"] and same["distinguished_by"] == "prompt and data fields"
    assert measure(wordle, 0.8)["exact_duplicates"] == 49  # seen only through the prompt: one task, 50 times
    sums = [f"Compute the following sum carefully, showing no work at all, and give only the final number on one "
            f"line with no units and no words around it, as the grader reads only that: {i} plus 1000" for i in range(50)]
    planted = measure(rows_of(sums, data=[{"answer": str(i + 1000)} for i in range(50)]), 0.8)
    assert planted["near_duplicate_share"] > 0.5  # the differing words are not the task's data: still near-duplicates


def test_an_error_raised_without_a_message_says_where():
    traceback = 'Traceback (most recent call last):\n  File "/env/gsm8k/taskset.py", line 41, in correct\nTimeoutError\n'
    assert said("TimeoutError", "", traceback) == ("TimeoutError raised with no message at taskset.py:41 in correct "
                                                    "(a call that ran past its own deadline)")
    assert said("ValueError", "bad move") == "ValueError: bad move"


# --- rules on the shapes (the audit.json a real env of that shape gives, judged as the gates judge it) ---

from autoenv.core.config import with_env  # noqa: E402
from autoenv.core.paths import EXAMPLES  # noqa: E402
from autoenv.evaluation.verdict import decide  # noqa: E402
from autoenv.gates.coverage import too_thin  # noqa: E402
from autoenv.gates.rules import Gates, judge_audit, judge_probes  # noqa: E402
from autoenv.gates.seats import NEVER_PLAYED, reference_failed  # noqa: E402
from tests.audits import audit, probe_records, rec  # noqa: E402
from tests.test_gates import CONFIG  # noqa: E402
from tests.test_realenv import audit_of, config  # noqa: E402
from tests.test_verdict import BANDS, counts, entry, stats  # noqa: E402


def judged(records: list[dict], **extra) -> Gates:
    report = Gates()
    judge_probes({"probes": records, **extra}, CONFIG, report)
    return report


def find(report: Gates, name: str):
    return next(f for f in report.findings if f.name == name)


def kuhn(probe: str, episode: str, seat: str, mine: float, *, other_reply: str = "[check]", other_turns: int = 1,
         other_outcome: str = "ok") -> dict:
    """A Kuhn-poker record (verifiers' kuhn_poker: payoffs +/-1, +/-2, zero-sum, a forfeit on an illegal move)."""
    other = {"player0": "player1", "player1": "player0"}[seat]
    return {"probe": probe, "key": episode, "idx": 0, "components": {"payoff": mine}, "weights": {"payoff": 1.0},
            "outcome": "ok", "seat": seat, "episode": episode, "reply": "x", "probed_seat": seat, "reference": "choice",
            "others": [{"seat": other, "policy": "choice", "reward": -mine, "outcome": other_outcome,
                        "reply": other_reply, "turns": other_turns,
                        "failed": reference_failed(other_outcome, other_reply, other_turns)}],
            "other_failed": reference_failed(other_outcome, other_reply, other_turns)}


def test_a_seat_that_forfeits_first_loses_on_its_own_and_a_farmed_payoff_is_caught(tmp_path):
    cfg = with_env(config(tmp_path), str(EXAMPLES / "real-duel"))
    seats = ["player0", "player1"]
    # player0 acts first: its garbage forfeits before the reference ever gets a turn (no reply: not a failure)
    forfeits = [kuhn("garbage", f"g0{i}", "player0", -1.0, other_reply="", other_turns=0) for i in range(4)]
    forfeits += [kuhn("garbage", f"g1{i}", "player1", -1.0) for i in range(4)]  # the reference checked, then it forfeited
    gates = Gates()
    judge_audit(audit_of(forfeits, seats=seats, seat_reference={"policy": "choice", "why": "the fixed policy"}), cfg, gates)
    row = find(gates, "probe garbage")
    assert row.status == "pass" and row.data["seats"] == {"player0": 0.0, "player1": 0.0}, row.message  # -1 of [-1, 1]
    assert row.data["from_other_failure"] == 0 and "reward from another seat's failure" not in row.message
    farmed = [kuhn("garbage", f"f{s}{i}", s, 2.0) for s in seats for i in range(4)]  # the payoff a reply can farm
    caught = Gates()
    judge_audit(audit_of(farmed, seats=seats, seat_reference={"policy": "choice", "why": "the fixed policy"}), cfg, caught)
    assert find(caught, "probe garbage").status == "fail" and not any("reward errors" in f for f in caught.failed)
    assert find(caught, "reward range").status == "warn"  # +/-2 chips: observed, not an error


def test_a_seat_that_never_played_counts_as_untested_not_passed(tmp_path):
    cfg = with_env(config(tmp_path), str(EXAMPLES / "real-duel"))
    seats = ["proposer", "solver"]
    never = [{"probe": name, "key": f"k{i}", "idx": i, "skipped": True, "reason": NEVER_PLAYED, "error": None,
              "probed_seat": "solver"} for name in ("empty", "echo", "garbage") for i in range(3)]
    played = [{**kuhn(name, f"p{name}{i}", "player0", 0.0), "probed_seat": "proposer", "seat": "proposer"}
              for name in ("empty", "echo", "garbage") for i in range(3)]
    gates = Gates()
    judge_audit(audit_of(never + played, seats=seats, seat_reference={"policy": "choice", "why": "x"}), cfg, gates)
    assert find(gates, "probe empty").status == "pass"
    solo = Gates()
    judge_audit(audit_of(never, seats=seats, seat_reference={"policy": "choice", "why": "x"}), cfg, solo)
    tested = find(solo, "probes tested")
    assert tested.data["coverage"] == "untested" and "never got a turn" in tested.message
    assert "a reference policy at the seats that play first" in tested.message


def test_env_rejections_of_off_contract_replies_warn_and_a_rejected_oracle_still_fails():
    rejected = "ValueError: proposer did not end with the JSON contract (taskset.py:88 in from_trace)"
    records = probe_records()
    records += [rec("garbage", 20 + i, {}, {}, error=rejected, outcome="env_error", rejected=rejected) for i in range(4)]
    report = judged(records)
    assert report.passed, report.failed
    row = find(report, "rejections")
    assert row.status == "warn" and "4 of" in row.message and "no gradient" in row.message and "from_trace" in row.message
    oracle_too = probe_records()[:0] + [rec("oracle", i, {}, {}, error=rejected, outcome="env_error", rejected=rejected)
                                        for i in range(4)] + probe_records()[10:]
    bad = judged(oracle_too)
    assert any(f.startswith("reward errors") for f in bad.failed)  # the reference reply refused: an env error


def test_coverage_is_a_gate_and_no_keep_on_evidence_it_lacks():
    assert too_thin(0, 0) and too_thin(5, 13) and not too_thin(7, 13)
    empty = Gates()
    judge_audit(audit([]), CONFIG, empty)
    report = empty.report()
    assert report.passed and report.untested and "0 of 0 exploit probes" in report.untested[0]
    assert find(empty, "exploit matrix").status == "skip"  # not "no reward component of 0 harvested"
    full = Gates()
    judge_audit(audit(), CONFIG, full)
    assert full.report().passed and not full.report().untested
    old, new = stats(counts(0.05)), stats(counts(0.45))
    assert decide(new, BANDS, entry("k" * 40, old)).verdict == "keep"
    held = decide(new, BANDS, entry("k" * 40, old), gates_untested=report.untested)
    assert held.verdict == "inconclusive" and "gates are untested" in held.reason


def test_every_answer_distinct_is_balanced_and_one_answer_everywhere_is_not():
    distinct = audit(dataset={"size": 5, "with_answer": 5, "distinct_answers": 5, "top_answer": "a",
                              "top_answer_share": 0.2})
    report = Gates()
    judge_audit(distinct, CONFIG, report)
    assert find(report, "answer balance").status == "pass"
    skewed = Gates()
    judge_audit({**distinct, "dataset": {"size": 5, "with_answer": 5, "distinct_answers": 2, "top_answer": "a",
                                         "top_answer_share": 0.8}}, CONFIG, skewed)
    assert find(skewed, "answer balance").status == "fail"


# --- real environments through the real CLI (`autoenv probe --env`), offline ---

import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from autoenv.core.paths import PROJECT  # noqa: E402
from tests.conftest import autoenv, small_config  # noqa: E402

DATA = PROJECT / "tests" / "data"


def probe_env(env: Path, cwd: Path, **budget) -> tuple[dict, dict]:
    """`autoenv probe --env` on `env` from `cwd` (exit 1 when a gate failed); the findings by name and audit.json."""
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "config.toml").write_text(small_config(**budget))
    result = autoenv("probe", "--env", str(env), cwd=cwd)
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-2000:]
    gates = max((cwd / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    findings = {f["name"]: f for f in json.loads(gates.read_text())["findings"]}
    return findings, json.loads((gates.parent / "audit.json").read_text())


def planted(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of tests/data/<name> with one line of its design changed (the planted flaw)."""
    copy = tmp_path / f"{name}-planted"
    shutil.copytree(DATA / name, copy, ignore=shutil.ignore_patterns("__pycache__"))
    source = next(copy.glob("*/__init__.py"))
    text = source.read_text()
    assert old in text
    source.write_text(text.replace(old, new))
    return copy


@pytest.mark.slow
def test_stop_and_intercept_hooks_are_honoured_in_rollouts_mode(tmp_path):
    findings, audit = probe_env(DATA / "stop-guard", tmp_path / "good", rollout_sample=4)
    assert audit["mode"] == "rollouts" and audit["response_hooks"] == ["@vf.stop said_it"]
    assert findings["oracle"]["status"] == "pass" and findings["probe echo"]["status"] == "pass"
    assert not [f for f in findings.values() if f["status"] == "fail"]
    flawed = planted(tmp_path, "stop-guard", '(response.message.content or "").strip() == self.data.answer',
                     'self.data.answer in (response.message.content or "")')
    findings, _ = probe_env(flawed, tmp_path / "bad", rollout_sample=4)
    assert findings["probe kitchen-sink"]["status"] == "fail"  # in-process, no guard ran: every probe scored 0


@pytest.mark.slow
def test_a_reward_running_a_shipped_uv_script_with_dependencies_works_in_the_sandbox(tmp_path):
    """verifiers' gsm8k design (a PEP 723 `verify.py` with its own dependency, run by `runtime.run_uv_script`):
    its dependencies are resolved into uv's cache before the sandbox without network starts."""
    findings, audit = probe_env(DATA / "version-verify", tmp_path / "good", rollout_sample=4)
    assert audit["mode"] == "rollouts" and audit["runtime_rewards"] == ["correct"]
    assert not [f for f in findings.values() if f["status"] == "fail"], findings
    assert findings["oracle"]["status"] == "pass" and "unprepared_scripts" not in audit
    script = DATA / "version-verify" / "version_verify" / "verify.py"
    wrong = tmp_path / "version-verify-planted"
    shutil.copytree(DATA / "version-verify", wrong, ignore=shutil.ignore_patterns("__pycache__"))
    (wrong / "version_verify" / "verify.py").write_text(  # the planted flaw: any valid version earns full marks
        script.read_text().replace("print(1.0 if Version(reply) == Version(gold) else 0.0)", "Version(reply); print(1.0)"))
    findings, _ = probe_env(wrong, tmp_path / "bad", rollout_sample=4)
    assert findings["probe wrong-answer"]["status"] == "fail" and "reward errors" not in findings


@pytest.mark.slow
def test_a_slow_reward_passes_the_gates_and_one_that_never_returns_is_a_hang(tmp_path):
    """verifiers' gsm8k on a loaded two-core machine: its `uv run verify.py` reward, slower the more run at once,
    took past max_reward_seconds when the probes called it concurrently, and 16 gates failed on a reward that
    always returns. Measured alone (0.5 s of a 1 s limit), it runs one call at a time and passes every gate;
    a verifier that never answers is still a hang."""
    findings, audit = probe_env(DATA / "slow-verify", tmp_path / "good", rollout_sample=4, max_reward_seconds=1)
    assert audit["mode"] == "rollouts" and audit["time_limits"] == []
    assert not [f for f in findings.values() if f["status"] == "fail"], findings
    assert findings["oracle"]["status"] == "pass" and findings["probe wrong-answer"]["status"] == "pass"
    hangs = planted(tmp_path, "slow-verify", "return await asyncio.to_thread(verify, self.data.answer, trace.last_reply or \"\")",
                    "await asyncio.sleep(3600)")
    findings, audit = probe_env(hangs, tmp_path / "bad", rollout_sample=4, max_reward_seconds=1)
    (hung,) = audit["time_limits"]
    assert hung.startswith("reward 'correct' on task idx ") and hung.endswith(
        "in the audit stage did not return within 1 s nor within 4 s (a hang)"), hung
    assert findings["time limits"]["status"] == "fail"


def test_what_the_sandbox_blocked_is_said_once_and_plainly():
    from autoenv.gates.rules import distinct_errors
    from autoenv.sandbox.scripts import blocked

    dns = ("TaskError: task setup: RuntimeError: failed to prepare uv script: error: Request failed after 3 retries\n"
           "  cause: Failed to fetch: https://pypi.org/simple/math-verify/\n  cause: dns error\n  cause: error "
           "resolving DNS")
    said = distinct_errors([f"task {i} (oracle): {dns}" for i in range(6)], ["verify.py: `uv lock --script` failed: x"])
    assert len(said) == 1 and said[0].startswith("the sandbox blocked network access to https://pypi.org/simple/math-verify/")
    assert "(x6 replies)" in said[0] and "not prepared beforehand: verify.py" in said[0] and "AUTOENV_SANDBOX=none" in said[0]
    assert blocked("ValueError: bad move") is None
    assert distinct_errors(["task 1 (echo): ValueError: x", "task 2 (echo): ValueError: x"], []) == [
        "task 1 (echo): ValueError: x (x2 replies; also task 2 (echo))"]


def test_shipped_scripts_with_dependencies_are_found_and_prepared_where_verifiers_looks(tmp_path):
    import hashlib

    from autoenv.core.paths import PROJECT as root
    from autoenv.sandbox.scripts import prepare, shipped

    package = DATA / "version-verify"
    assert [p.name for p in shipped(package)] == ["verify.py"]
    assert shipped(DATA / "say-duel") == []
    uv = str(next(p for p in (Path(root) / ".venv" / "bin" / "uv", Path(shutil.which("uv") or "/nonexistent")) if p.exists()))
    assert prepare(package, tmp_path, uv) == []
    digest = hashlib.sha256((package / "version_verify" / "verify.py").read_bytes()).hexdigest()
    assert (tmp_path / f"{digest}.py").read_bytes() == (package / "version_verify" / "verify.py").read_bytes()
    assert (tmp_path / f"{digest}.py.lock").is_file()  # the lock lets `uv sync --script` inside go without the index


@pytest.mark.slow
def test_the_answer_field_oracle_is_played_as_the_final_reply_in_rollouts_mode(tmp_path):
    """No oracle hook, rollouts mode (a reward that needs the runtime; tools and custom Envs take the same path):
    the answer field is played as the final reply, so the probes built from it are tested, not skipped."""
    no_hook = planted(tmp_path, "version-verify", "    def oracle(self, messages: list[dict]) -> str:\n"
                      "        return self.data.answer\n", "")
    findings, audit = probe_env(no_hook, tmp_path / "good", rollout_sample=4)
    assert audit["mode"] == "rollouts" and audit["oracle_source"] == "inferred:bare", audit.get("oracle_formats_tried")
    assert findings["oracle"]["status"] == "pass" and "inferred" in findings["oracle"]["message"]
    assert findings["probe kitchen-sink"]["status"] == "pass" and findings["probe wrong-answer"]["status"] == "pass"
    assert "coverage" not in findings["probes tested"]["data"]
    verify = no_hook / "version_verify" / "verify.py"  # the planted flaw: `answer in reply`
    verify.write_text(verify.read_text().replace("print(1.0 if Version(reply) == Version(gold) else 0.0)",
                                                 "print(1.0 if gold in reply else 0.0)"))
    findings, _ = probe_env(no_hook, tmp_path / "bad", rollout_sample=4)
    assert findings["probe kitchen-sink"]["status"] == "fail"


@pytest.mark.slow
def test_a_sequential_card_game_is_probed_seat_by_seat_and_a_farmable_forfeit_is_caught(tmp_path):
    """verifiers' kuhn_poker design: moves offered as `[check] or [bet]`, a forfeit after one retry, payoffs of
    +/-1 and +/-2 with no declared range. The reference `choice` answers in the bracketed form, so the probes
    are played; with no oracle hook most probes cannot be built, and the gates say untested, not passed."""
    findings, audit = probe_env(DATA / "kuhn-seats", tmp_path / "good", rollout_sample=4)
    others = [o for r in audit["probes"] if r.get("probe") == "garbage" for o in r.get("others") or []]
    assert others and all(o["reply"] in {"[check]", "[bet]", "[fold]", "[call]", ""} for o in others)
    assert not any(o["failed"] for o in others)  # a seat that never got a turn did not fail
    for name in ("probe empty", "probe garbage", "probe echo"):
        assert findings[name]["status"] == "pass" and set(findings[name]["data"]["seats"]) == {"player0", "player1"}
    assert findings["reward range"]["status"] == "warn" and findings["reward range"]["data"]["constant_sum"] == 0
    assert not [f for f in findings.values() if f["status"] == "fail"]
    assert findings["probes tested"]["data"]["coverage"] == "untested"
    flawed = planted(tmp_path, "kuhn-seats", 'return -1 if forfeited == 0 else 1', 'return 1 if forfeited == 0 else -1')
    findings, _ = probe_env(flawed, tmp_path / "bad", rollout_sample=4)
    assert findings["probe garbage"]["status"] == "fail" and "beaten at seat player0" in findings["probe garbage"]["message"]


@pytest.mark.slow
def test_an_env_that_rejects_off_contract_replies_warns_and_rejecting_the_oracle_fails(tmp_path):
    """verifiers' proposer_solver design: the Env raises on a reply without its JSON contract (the episode is
    dropped, retryable). The probes' off-contract replies are rejections by design, not reward errors; an Env
    that rejects the oracle's valid reply as well is broken."""
    findings, audit = probe_env(DATA / "contract-env", tmp_path / "good", rollout_sample=4)
    assert findings["oracle"]["status"] == "pass" and "reward errors" not in findings
    row = findings["rejections"]
    assert row["status"] == "warn" and "no gradient" in row["message"] and "__init__.py:" in row["message"]
    assert not [f for f in findings.values() if f["status"] == "fail"]
    assert "score such a reply 0 instead" in findings["probes tested"]["message"]
    flawed = planted(tmp_path, "contract-env", 'isinstance(parsed.get(KEY), int)', 'isinstance(parsed.get("answers"), int)')
    findings, _ = probe_env(flawed, tmp_path / "bad", rollout_sample=4)
    assert findings["reward errors"]["status"] == "fail" and "rejections" not in findings


@pytest.mark.slow
def test_a_model_graded_reward_reaches_the_built_in_grader_offline_and_an_open_grader_is_caught(tmp_path):
    """A `vf.Judge` on verifiers' default endpoint (wiki_search's design) is graded offline by the built-in
    grader, not failed as APIConnectionError; without its format gate the grader is open to injection."""
    findings, audit = probe_env(DATA / "judged-answer", tmp_path / "good", sample=6)
    assert findings["oracle"]["status"] == "pass" and "reward errors" not in findings, findings.get("reward errors")
    assert not [f for f in findings.values() if f["status"] == "fail"]
    flawed = planted(tmp_path, "judged-answer", "        if not well_formed(reply):\n            return 0.0\n", "")
    findings, _ = probe_env(flawed, tmp_path / "bad", sample=6)
    assert findings["probe injection"]["status"] == "fail"


def test_a_grader_outage_is_infrastructure_not_the_envs_error():
    from autoenv.child.judge_routing import grader_outage
    from autoenv.core.traces import to_rollout

    outage = {"type": "RewardError", "message": "judged: APIConnectionError: Connection error."}
    assert grader_outage(outage["message"]) and to_rollout({"errors": [outage]}).outcome == "provider_error"
    bug = {"type": "RewardError", "message": "judged: KeyError: 'answer'"}
    assert not grader_outage(bug["message"]) and to_rollout({"errors": [bug]}).outcome == "env_error"


@pytest.mark.slow
def test_a_harness_package_is_named_a_harness_not_told_to_export_a_taskset(tmp_path):
    """verifiers' environments/ holds `compact`, a custom harness exported with no taskset: checked with --env it
    once got 'list your Taskset class in __all__', advice that would turn a harness into something it is not."""
    from tests.conftest import autoenv, small_config
    package = tmp_path / "rewriter"
    (package / "rewriter").mkdir(parents=True)
    (package / "pyproject.toml").write_text(
        '[project]\nname = "rewriter"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["verifiers"]\n\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["rewriter"]\n')
    (package / "rewriter" / "__init__.py").write_text(
        '"""A harness that rewrites its context every turn."""\nimport verifiers.v1 as vf\n\n\n'
        'class RewritingHarness(vf.Harness):\n    pass\n\n\n__all__ = ["RewritingHarness"]\n')
    (tmp_path / "config.toml").write_text(small_config())
    result = autoenv("check", "--env", str(package), cwd=tmp_path)
    text = result.stdout + result.stderr
    assert result.returncode != 0 and "is a harness package, not an environment" in text, text[-3000:]
    assert "RewritingHarness" in text and "list your Taskset class" not in text
