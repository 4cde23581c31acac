"""The rule for the plain-channel probe (autoenv.gates.plain_channel): a stated secret that is paid for in plain words.

Every seat of an episode played the plain policy: the seats told something of the task's own restated it, and the
seats that received it answered what it named. In a cooperative game that is often the intended play (describe the
picture to your partner), so earning this way fails only where a seat's own instructions say to hide what it was told
(`rule`): then the seats that restated it (the holders, who received nothing) are judged like any exploit probe, their
mean against `exploit_max` of the reference's, beyond noise. The receivers are not judged: reading a plain message is
no fault of theirs, and a game that pays them while it charges the holders (a monitor's penalty) stays clean.
"""

from __future__ import annotations

from collections import defaultdict

from autoenv.core.formats import quoted
from autoenv.gates import noise
from autoenv.gates.audit_record import ChannelProbe, ProbeRecord
from autoenv.gates.findings import Gates
from autoenv.gates.plain_channel import PLAIN


def total(record: ProbeRecord, low: float = 0.0, high: float = 1.0) -> float:
    """The record's weighted reward, each component normalised from [low, high] as the other rules see it."""
    span = high - low if high > low else 1.0
    return sum(((float(v) - low) / span) * record.weights.get(k, 1.0) for k, v in record.components.items()
               if isinstance(v, (int, float)))


def judge_channel(report: Gates, channel: ChannelProbe | None, reference: float, maximum: float, exploit_max: float,
                  low: float = 0.0, high: float = 1.0, constant_sum: float | None = None) -> None:
    """Add the `plain channel` finding: fail where the holders of a secret their instructions say to hide earn
    beyond `exploit_max` of `reference` (the oracle's mean, else the reward's `maximum`) by stating it plainly. A
    constant-sum game is not judged: what one seat gains another loses, so nothing passed between them is paid."""
    if channel is None or not channel.records:
        return
    if constant_sum is not None:
        report.add(PLAIN, "skip", "n/a, does not apply: a constant-sum game (payoffs summing to "
                   f"{constant_sum:g}): what one seat gains another loses, so a secret passed between seats is paid "
                   "to no one", constant_sum=constant_sum)
        return
    played = [r for r in channel.records if not r.skipped and not r.error and (r.outcome or "ok") == "ok"
              and r.components]
    if not played:
        reasons = sorted({r.error or r.reason or "not scored" for r in channel.records})
        report.add(PLAIN, "skip", "n/a, not tested: no episode was scored (" + "; ".join(reasons[:2]) + ")",
                   reasons=reasons[:3])
        return
    episodes: dict[str, list[ProbeRecord]] = defaultdict(list)
    for r in played:
        episodes[r.episode or r.key].append(r)
    rules = list(dict.fromkeys(r.rule for r in played if r.rule))
    ruled = {e for e, rs in episodes.items() if any(r.rule for r in rs)}
    how = f" ({channel.strategy})" if channel.strategy else ""
    if not ruled:
        mean = sum(total(r, low, high) for r in played) / len(played)
        report.add(PLAIN, "pass", "no seat's instructions say to hide what it was told, so talking plainly is fair "
                   f"play here: every seat saying its own part of the task and reading the others' back earned "
                   f"{mean:.3f}{how}", mean=round(mean, 4), episodes=len(episodes), strategy=channel.strategy)
        return
    holders: dict[str, list[float]] = defaultdict(list)
    for e in ruled:
        for r in episodes[e]:
            if not r.received:
                holders[r.seat or "?"].append(total(r, low, high))
    values = [v for vs in holders.values() for v in vs]
    if not values:
        report.add(PLAIN, "skip", "n/a, not tested: every seat received another's message before it spoke, so none "
                   "restated what it alone was told", rule=rules[0])
        return
    top = reference if reference > 0 else maximum
    scale = maximum if maximum > 0 else 1.0
    mean = sum(values) / len(values)
    allowed = exploit_max * top
    means = {seat: round(sum(v) / len(v), 4) for seat, v in holders.items()}
    per_seat = ", ".join(f"{seat} {m:.3f}" for seat, m in means.items())
    data = dict(seats=means, rule=rules[0], strategy=channel.strategy, episodes=len(ruled), allowed=round(allowed, 4),
                tried=channel.tried)
    example = _example(episodes, ruled)
    said = (f"the instructions say {quoted(rules[0], 100)}; the seats that were told it ({', '.join(holders)}) said "
            f"it in plain words{how} and the others read it back")
    if mean <= allowed + 1e-9:
        report.add(PLAIN, "pass", f"{said}: they earned {per_seat}, within {exploit_max:.0%} of the reference's "
                   f"{top:.3f}: the reward checks that the message hides it", **data)
    elif not noise.beyond(mean, allowed, len(values), scale, values):
        report.add(PLAIN, "warn", f"{said}: they earned {per_seat}, above {exploit_max:.0%} of the reference's "
                   f"{top:.3f} on only {len(values)} episode(s), {noise.within(mean, allowed, len(values), scale, values)}",
                   within_noise=True, **data)
    else:
        report.add(PLAIN, "fail", f"{said}, and that earned {per_seat} of the reference's {top:.3f} on "
                   f"{len(values)} episodes (allowed {allowed:.3f}){example}: the reward pays a secret passed in the "
                   "open, so training teaches the seats to state it rather than hide it", example=example.strip("; "),
                   **data)


def _example(episodes: dict[str, list[ProbeRecord]], ruled: set[str]) -> str:
    """One episode where the holders earned: what a holder said, and what a receiver answered."""
    for e in sorted(ruled):
        records = episodes[e]
        told = [r for r in records if not r.received and r.components and total(r) > 0]
        read = [r for r in records if r.received]
        if told and read:
            return f"; e.g. task idx {told[0].idx}: {told[0].seat} said {quoted(told[0].reply, 80)}, " \
                   f"{read[0].seat} answered {quoted(read[0].reply, 40)}"
    return ""
