"""Multi-seat envs probed seat by seat: each exploit probe plays one seat, verifiers' per-seat
`AgentConfig.model` pins the other seats to a reference policy the built-in endpoint serves (the oracle
hook when the task has one, else the fixed policy `choice`), and only the probed seat's reward counts.

Real rollouts through the real CLI on two custom two-seat Envs: examples/real-duel (no oracle hook:
reference `choice`) and tests/data/say-duel (an oracle hook that forfeits odd numbers: a probe that wins
only because the oracle seat sent nothing is named as the other seat's failure, not a harvest).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoenv.core.config import with_env
from autoenv.core.messages import ChatRequest
from autoenv.core.paths import EXAMPLES, PROJECT
from autoenv.endpoint.policies import Policies, choice
from autoenv.gates.probes import REFUSAL
from autoenv.gates.rows import Row
from autoenv.gates.rules import Gates, judge_audit
from autoenv.gates.seat_rules import constant_sum_game
from tests.conftest import autoenv, small_config
from tests.test_realenv import audit_of, config

DUEL = EXAMPLES / "real-duel"
SAY = PROJECT / "tests" / "data" / "say-duel"


def ask(text: str, seed: int = 0, session: str = "s") -> str:
    return choice(ChatRequest("choice", [{"role": "user", "content": text}], [], session), seed).content


def test_choice_plays_a_move_the_message_offers_and_replays():
    prompt = "High card, deal #3. You hold K (ranks 23456789TJQKA, A high). Reply with one word: bet or fold."
    picks = {ask(prompt, seed) for seed in range(16)}
    assert picks == {"bet", "fold"}
    assert ask(prompt, 5, "a") == ask(prompt, 5, "b")  # the same message and seed: the same move
    assert ask("Pick red, green or blue.", 1) in {"red", "green", "blue"}
    assert ask("What is 2+2?") == REFUSAL
    assert "choice" in Policies().names()


def seat_record(name: str, episode: str, seat: str, mine: float, theirs: float, failed: bool = False) -> dict:
    other = {"first": "second", "second": "first"}[seat]
    return {"probe": name, "key": episode, "idx": 0, "components": {"payoff": mine}, "weights": {"payoff": 1.0},
            "outcome": "ok", "seat": seat, "episode": episode, "reply": "x", "probed_seat": seat, "reference": "choice",
            "others": [{"seat": other, "policy": "choice", "reward": theirs, "outcome": "ok",
                        "reply": "" if failed else "bet", "failed": failed}], "other_failed": failed}


def test_per_seat_rows_judge_the_fair_share_and_leave_out_the_others_failure(tmp_path):
    cfg = with_env(config(tmp_path), str(DUEL))
    seats = ["first", "second"]
    fair = [seat_record("empty", f"{s}{i}", s, v, -v) for s in seats for i, v in enumerate((0, -1, 0, 1))]
    beats = [seat_record("garbage", f"g{s}{i}", s, v, -v) for s in seats for i, v in enumerate((2, 1, 2, 2 if s == "first" else 1))]
    forfeit = [seat_record("echo", f"e{s}{i}", s, 1, -1, failed=i < 2) for s in seats for i in range(3)]
    assert constant_sum_game([Row.model_validate(r) for r in fair], seats) == 0  # the reference seats' rewards complete each episode
    gates = Gates()
    judge_audit(audit_of(fair + beats + forfeit, seats=seats, reward_range=[-2, 2],
                         seat_reference={"policy": "choice", "why": "the fixed policy `choice`"}), cfg, gates)
    rows = {f.name: f for f in gates.findings}
    assert rows["probe empty"].status == "pass" and rows["probe empty"].data["seats"] == {"first": 0.5, "second": 0.5}
    assert rows["probe garbage"].status == "fail" and "beaten at seat first, second" in rows["probe garbage"].message
    assert rows["probe garbage"].data["episodes"] == {"first": 4, "second": 4}
    echo = rows["probe echo"]  # one counted win per seat: beaten; the two won against a forfeit are named, not counted
    assert echo.data["from_other_failure"] == 4 and "reward from another seat's failure" in echo.message
    assert echo.data["seats"] == {"first": 0.75, "second": 0.75}
    assert not any("constant-sum game of 2 seats" in f.message for f in gates.findings)


def test_a_seat_just_above_its_allowance_on_few_episodes_is_within_noise_not_beaten(tmp_path):
    """0.562 against an allowance of 0.550 on four episodes (the duel's garbage under load, once) is noise: the row
    says so and fails nothing; the same mean on every one of many episodes is beaten."""
    cfg = with_env(config(tmp_path), str(DUEL))
    seats = ["first", "second"]
    def rows_of(values: tuple[float, ...]) -> dict:
        records = [seat_record("garbage", f"g{s}{i}", s, v, -v) for s in seats
                   for i, v in enumerate(values if s == "first" else (0,) * len(values))]
        gates = Gates()
        judge_audit(audit_of(records, seats=seats, reward_range=[-2, 2],
                             seat_reference={"policy": "choice", "why": "the fixed policy `choice`"}), cfg, gates)
        return {f.name: f for f in gates.findings}
    few = rows_of((2, -2, 0.5, 0.5))["probe garbage"]  # normalised: 1, 0, 0.625, 0.625 -> 0.5625
    assert few.data["seats"]["first"] == 0.5625 and few.status == "warn", few
    assert "within noise" in few.message and "only 4 episode(s)" in few.message and "beaten" not in few.message
    assert few.data["within_noise"] == ["first"] and "probes.rollout_sample" in few.message
    steady = rows_of((0.25,) * 12)["probe garbage"]  # 0.5625 every time: certain, and above the allowance
    assert steady.status == "fail" and "beaten at seat first" in steady.message, steady


def probe(env: Path, tmp_path: Path, **budget) -> tuple[dict, dict]:
    (tmp_path / "config.toml").write_text(small_config(**budget))
    result = autoenv("probe", "--env", str(env), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    gates = max((tmp_path / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    findings = {f["name"]: f for f in json.loads(gates.read_text())["findings"]}
    return findings, json.loads((gates.parent / "audit.json").read_text())


@pytest.mark.slow
def test_each_seat_probed_against_the_fixed_policy_without_an_oracle(tmp_path):
    findings, audit = probe(DUEL, tmp_path, rollout_sample=4, rollout_timeout=600)  # no probe cut short by a load
    assert audit["seat_reference"]["policy"] == "choice"
    played = [r for r in audit["probes"] if r["probe"] == "garbage"]
    assert {r["probed_seat"] for r in played} == {"first", "second"} and all(r["seat"] == r["probed_seat"] for r in played)
    assert all([o["seat"] for o in r["others"]] == [{"first": "second", "second": "first"}[r["seat"]]] for r in played)
    assert {o["reply"] for r in played for o in r["others"]} <= {"bet", "fold"}  # the reference really plays
    for name in ("probe empty", "probe garbage", "probe refusal"):
        row = findings[name]
        assert row["status"] == "pass" and set(row["data"]["seats"]) == {"first", "second"}, row
        assert row["data"]["reference"] == "choice" and row["data"]["fair_share"] == 0.5
        assert "constant-sum game" not in row["message"]
    assert findings["probe padding"]["status"] == "skip"  # needs the oracle's reply: there is none
    shapes = {"dataset size": "pass", "exact duplicates": "pass", "near duplicates": "skip", "oracle": "warn"}
    assert {k: findings[k]["status"] for k in shapes} == shapes
    assert findings["exploit matrix"]["status"] == "pass"


@pytest.mark.slow
def test_each_seat_probed_against_the_oracle_and_the_others_failure_named(tmp_path):
    findings, audit = probe(SAY, tmp_path, rollout_sample=4, rollout_timeout=600)
    assert audit["seat_reference"]["policy"] == "oracle"
    assert findings["oracle"]["status"] == "pass" and "constant-sum" in findings["oracle"]["message"]
    echo = [r for r in audit["probes"] if r["probe"] == "echo"]
    forfeits = [r for r in echo if r["other_failed"]]
    assert forfeits and all(int(r["components"]["said"]) == 1 for r in forfeits)  # it won: the oracle sent nothing
    assert all(r["components"]["said"] == 0 for r in echo if not r["other_failed"])  # against a playing oracle: a draw
    row = findings["probe echo"]
    assert row["status"] == "pass" and row["data"]["from_other_failure"] == len(forfeits), row
    assert "reward from another seat's failure" in row["message"] and "an empty reply" in row["message"]
    assert row["data"]["seats"] == {"left": 0.5, "right": 0.5}
    assert findings["probe empty"]["status"] == "pass" and findings["probe empty"]["data"]["seats"]["left"] == 0.0


def test_a_seat_that_never_got_a_turn_is_said_so_not_blamed_on_another_seats_failure(tmp_path):
    """A two-seat game where the probed seat's reply ends every episode (a rejected move, an env error) before the
    reference seat's turn: nothing was measured, and no reward came from the other seat's failure."""
    cfg = with_env(config(tmp_path), str(DUEL))
    seats = ["first", "second"]
    ended = []
    for i in range(4):
        record = seat_record("garbage", f"g{i}", "first", -1, 1, failed=True)
        record["others"][0].update(outcome="env_error", turns=0)
        ended.append(record)
    gates = Gates()
    judge_audit(audit_of(ended, seats=seats, seat_reference={"policy": "choice", "why": "the fixed policy"}), cfg, gates)
    row = next(f for f in gates.findings if f.name == "probe garbage")
    assert row.status == "skip" and "another seat's failure" not in row.message, row.message
    assert "the other seat never got a turn" in row.message and "second: ended env_error before its first turn" \
        in row.message
    played = [seat_record("garbage", f"p{i}", "first", 1, -1, failed=True) for i in range(4)]
    for record in played:
        record["others"][0]["turns"] = 1  # it took its turn and sent nothing
    gates = Gates()
    judge_audit(audit_of(played, seats=seats, seat_reference={"policy": "choice", "why": "the fixed policy"}), cfg, gates)
    row = next(f for f in gates.findings if f.name == "probe garbage")
    assert "every episode was left out: the reference `choice` did not play in it (second: an empty reply)" \
        in row.message and "never got a turn" not in row.message
