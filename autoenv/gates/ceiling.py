"""The ceiling as evidence: a reward component that the best honest policy observed never earns in full.

The reference reply (the oracle hook, else the answer-field oracle) is the best policy the gates
can show without a model. A positively weighted component it never earns in full, on any sampled
task, is earned by no honest policy shown here: it is unreachable, or it pays for something other
than doing the task. The finding names each such component, with what the reference earned and
what any probe earned on it (a probe built without the task earning more than the reference is the
second case, seen); the reward search (autoenv.gates.search) is pointed at these components.
A warning, never a failure on its own: a failure needs a content-free harvest beyond noise, which the
content-free gate judges.
"""

from __future__ import annotations

from autoenv.core.formats import quoted
from autoenv.gates.findings import Gates
from autoenv.gates.rows import Row

FULL = 1.0 - 1e-6


def judge_ceiling(report: Gates, by_probe: dict[str, list[Row]], weights: dict[str, float],
                  content_free: tuple[str, ...], pointed: list[str]) -> None:
    """Add the `ceiling` finding (warn) when the reference never earns some component in full (`pointed`: the
    components the reward search was pointed at)."""
    oracle = [r for r in by_probe.get("oracle", []) if not r.skipped and not r.env_error and r.components]
    if not oracle:
        return
    short: dict[str, float] = {}
    for component, weight in weights.items():
        values = [v for r in oracle if (v := r.score(component)) is not None]
        if weight > 0 and values and max(values) < FULL:
            short[component] = max(values)
    if not short:
        return
    parts = []
    beaten: dict[str, str] = {}
    for component, best in short.items():
        text = f"`{component}` (weight {weights[component]:g}): the reference's best is {best:.3f} over {len(oracle)} tasks"
        over = _best_probe(by_probe, component, best, content_free)
        if over is not None:
            probe, value, reply = over
            beaten[component] = probe
            text += (f", while {probe}, built without the task, earned {value:.3f} on it with {quoted(reply, 80)}: it "
                     "pays for something other than the task")
        else:
            text += ": no honest policy shown here earns it (unreachable, or paying for something else)"
        parts.append(text)
    aimed = [c for c in short if c in pointed]
    report.add("ceiling", "warn", "components the reference never earns in full: " + "; ".join(parts)
               + (f". The reward search was pointed at {', '.join(f'`{c}`' for c in aimed)}" if aimed else ""),
               components=short, beaten=beaten)


def _best_probe(by_probe: dict[str, list[Row]], component: str, best: float,
                content_free: tuple[str, ...]) -> tuple[str, float, str] | None:
    """The content-free probe whose mean on `component` most exceeds the reference's best, with its best reply."""
    found: tuple[str, float, str] | None = None
    for name in content_free:
        rows = [r for r in by_probe.get(name, []) if not r.skipped and not r.env_error]
        values = [r.score(component) or 0.0 for r in rows]
        if not values:
            continue
        mean = sum(values) / len(values)
        if mean > best + 0.05 and (found is None or mean > found[1]):
            top = max(rows, key=lambda r: r.score(component) or 0.0)
            found = (name, mean, top.reply or "")
    return found
