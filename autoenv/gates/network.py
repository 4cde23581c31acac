"""The `network` gate: an env that needs network the sandbox does not give is one infrastructure outcome.

A reward, tool or loader that reaches the internet fails on every call in the sandbox (loopback only,
autoenv.sandbox.confine). Counted as it comes, that was N "reward errors", every probe failed, and the
reason drowned. Here each probe reply that hit a network failure (autoenv.sandbox.network) is left out as
untested with the reason `needs network: HOST`, never failed and never passed, and one `network` finding
says what the env needs and what to do. Its coverage is `untested`, so the verdict cannot be `keep` on
evidence the sandbox kept from the gates.
"""

from __future__ import annotations

from collections import Counter

from autoenv.gates import coverage
from autoenv.gates.audit_record import ProbeRecord
from autoenv.gates.findings import Gates
from autoenv.sandbox.network import NEEDS_NETWORK, advice, failure, hub, reason


def cut_off(records: list[ProbeRecord], reached: list[str]) -> tuple[list[ProbeRecord], Counter[str], bool]:
    """The records with each network failure turned into an untested record (`needs network: HOST`); how many
    replies each host cut off; whether the failures were the Hugging Face Hub's."""
    out, hosts, from_hub = [], Counter[str](), False
    for r in records:
        host = failure(r.error, reached) if r.error else None
        if host is None:
            out.append(r)
            continue
        hosts[host] += 1
        from_hub |= hub(r.error)
        out.append(r.model_copy(update={"skipped": True, "reason": reason(host), "error": None, "components": {},
                                        "outcome": "ok", "rejected": None, "other_failed": False}))
    return out, hosts, from_hub


def needs_network(why: str | None) -> bool:
    """Whether an untested reason is a network failure's."""
    return bool(why) and str(why).startswith(NEEDS_NETWORK)


def judge_network(report: Gates, hosts: Counter[str], total: int, from_hub: bool, unprepared: list[str]) -> None:
    """The one `network` finding for the replies a missing network cut off (none: no finding). `unprepared`: the
    shipped PEP 723 scripts whose dependencies could not be resolved before the sandbox started."""
    if not hosts:
        return
    named = [h for h in hosts if h]
    scripts = (f"; the shipped scripts' dependencies could not be resolved beforehand ({'; '.join(unprepared[:2])}): "
               "a script written at run time, or an index other than PyPI, cannot be prepared" if unprepared else "")
    report.add("network", "warn", advice(", ".join(named[:3]), "the env", from_hub)
               + f" ({sum(hosts.values())} of {total} probe replies could not be scored{scripts})",
               coverage=coverage.UNTESTED, hosts=named, replies=sum(hosts.values()))
