"""The rules for a multi-seat env: a constant-sum game's fair share, and each exploit probe judged seat by seat.

A game can hand one seat what another loses, so a seat's reward is not by itself a
harvest. With every seat played by the same probe, a constant-sum game measures the other
seat's play; with per-seat probing (autoenv.child.rollout_probes) the probed seat's fair
share is the constant over the number of seats, and episodes whose reference seat did not
play measure the reference, not the probe: they are left out and named.
"""

from __future__ import annotations

from collections import defaultdict

from autoenv.core.formats import quoted
from autoenv.core.record import ProbeSummary
from autoenv.gates import noise
from autoenv.gates.audit_record import AuditRecord, OtherSeat
from autoenv.gates.findings import Gates
from autoenv.gates.rows import Row


def constant_sum_game(records: list[Row], seats: list[str]) -> float | None:
    """The constant the seats' rewards sum to in every probe episode of a multi-seat env, or None.

    With every seat played by the same probe, such a game hands one seat what another
    loses: its rewards measure the other seat's play, not a harvest by the probe. With
    per-seat probing (records carry `others`, the reference seats' rewards) the probed
    seat's fair share is the constant over the number of seats.
    """
    if len(seats) < 2:
        return None
    totals: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.episode and r.outcome == "ok" and not r.env_error:
            totals[r.episode].append(r.weighted())
            for other in r.others:  # per-seat probing: the reference seats of the same episode
                if other.outcome == "ok" and other.reward is not None:
                    totals[r.episode].append(other.reward)
    sums = [sum(v) for v in totals.values() if len(v) == len(seats)]
    if len(sums) < 2 or max(sums) - min(sums) > 1e-9:
        return None
    return round(sums[0], 9)


def judge_seats(report: Gates, name: str, summary: ProbeSummary, records: list[Row], failed: list[Row], share: float,
                 top: float, exploit_max: float, audit: AuditRecord, untested: dict[str, str]) -> None:
    """One exploit probe of a multi-seat env probed seat by seat: each seat's mean over its fair share
    (`share`, 0 unless the game is constant-sum) may reach `exploit_max` of the way to `top`; episodes whose
    reference seat did not play are left out, and a gain in them is named as the other seat's failure."""
    reference = audit.seat_reference
    policy = (reference.policy if reference else None) or next((r.reference for r in records + failed if r.reference), "?")
    gained = []
    for r in failed:
        reward = r.total if r.total is not None else r.weighted() if r.components else None
        if (reward or 0) > share + 1e-9:
            gained.append(r)
    named = (f"; {len(gained)} of {len(failed)} episodes left out gave the probed seat a reward from another seat's "
             f"failure (the reference `{policy}` did not play: "
             + "; ".join(sorted({f"{o.seat}: {_did(o)}" for r in gained for o in r.others if o.failed})[:2])
             + "), not a harvest"
             if gained else f"; {len(failed)} episodes left out: the reference seat did not play" if failed else "")
    seats: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if (total := r.total) is not None:
            seats[r.probed_seat or "?"].append(total)
    if not seats:
        if summary.errors:
            report.add(f"probe {name}", "fail", f"every reply hit an error ({summary.errors} of "
                       f"{summary.tasks}): see reward errors", errors=summary.errors)
            return
        why = "; ".join([*sorted({r.reason or "not played" for r in records if r.skipped}),
                         *([left_out(failed, policy)] if failed else [])]) or "not played"
        untested[name] = why
        report.add(f"probe {name}", "skip", "n/a, not tested: " + why + named, reasons=[why],
                   from_other_failure=len(gained))
        return
    order = list(audit.seats or [])  # the env's seat order, never the order the episodes finished in
    means = {seat: sum(seats[seat]) / len(seats[seat])
             for seat in sorted(seats, key=lambda s: (order.index(s) if s in order else len(order), s))}
    room = max(top - share, 0.0)
    allowed = share + exploit_max * room
    scale = top if top > 0 else 1.0
    above = {seat: m for seat, m in means.items() if m > allowed + 1e-9}
    # beaten only where the seat's episodes support it: Student's bound on its per-episode rewards clears the
    # allowance (a seat that wins every episode is beaten on three; 0.562 against 0.550 on four is noise)
    bad = {seat: m for seat, m in above.items() if noise.beyond(m, allowed, len(seats[seat]), scale, seats[seat])}
    unsure = {seat: m for seat, m in above.items() if seat not in bad}
    text = ", ".join(f"{seat} {m:.3f}" for seat, m in means.items())
    few = "; ".join(f"seat {seat} is above it on only {len(seats[seat])} episode(s), within noise: the "
                    f"{noise.Z_WORDS} lower bound of its mean is {noise.bound(m, len(seats[seat]), scale, seats[seat]):.3f}"
                    for seat, m in unsure.items())
    report.add(f"probe {name}", "fail" if bad else "warn" if unsure else "pass",
               f"per seat, the other seats played by {(reference.why if reference else None) or f'the reference `{policy}`'}: {text} "
               f"(allowed a fair share of {share:.3f} plus {exploit_max:.0%} of the way to {top:.3f})" + named
               + (f"; beaten at seat {', '.join(bad)}" if bad else "")
               + (f"; {few} (more episodes, probes.rollout_sample, would tell)" if unsure else ""),
               seats={seat: round(m, 4) for seat, m in means.items()}, reference=policy, fair_share=round(share, 4),
               from_other_failure=len(gained), episodes={seat: len(v) for seat, v in seats.items()},
               **({"within_noise": sorted(unsure)} if unsure else {}))


def left_out(failed: list[Row], policy: str) -> str:
    """Why the episodes whose reference seat did not play measured nothing: it never got a turn (the episode
    ended before it), or it took one and did not play (an error, an empty reply, a refusal)."""
    others = [o for r in failed for o in r.others if o.failed]
    what = "; ".join(sorted({f"{o.seat}: {_did(o)}" for o in others})[:2])
    if others and all(o.turns == 0 for o in others):
        return (f"the other seat never got a turn (the reference `{policy}`; {what}): every episode ended before "
                "it, so this probe measured nothing against it")
    return f"every episode was left out: the reference `{policy}` did not play in it ({what})"


def _did(other: OtherSeat) -> str:
    """What a reference seat that did not play did instead."""
    if other.outcome != "ok":
        return f"ended {other.outcome}" + (" before its first turn" if other.turns == 0 else "")
    return "an empty reply" if not other.reply.strip() else quoted(other.reply, 50)
