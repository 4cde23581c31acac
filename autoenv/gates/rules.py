"""Reward-faithfulness gates: checks and probes judged against config.toml, before any model.

An RL environment is only as good as its reward, and a reward a cheap trick can harvest
teaches the trick. So the harness measures, with no model and no key: the candidate's
platform metadata, its dataset (size, duplicates, conflicting labels, answer balance), determinism, the
oracle invariant (the reference behaviour earns the maximum) and the exploit probes
(cheap tricks earn about nothing). A failed gate forces the verdict to discard and, by
default, stops the spending on models.

The maximum achievable reward is the sum of the positive reward weights on the scale of [0, 1]
(program.md). verifiers documents no reward range, so a score outside [0, 1] is not an error: the
range is the env's declared `reward_range = (low, high)` when it has one (a score outside a declared
range is an environment error), else the observed bounds, reported as a warning with the numbers
(autoenv.gates.ranges); scores are normalised to [0, 1] before the probes are compared.

The rules read the audit stage's typed record (autoenv.gates.audit_record), parsed once and
validated. A multi-seat env's probes are judged seat by seat (autoenv.gates.seat_rules); the
derive stage's mutated replies after the rollouts (autoenv.gates.derived_rules).
"""

from __future__ import annotations

import math
import re
import time
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

from autoenv.core.config import Config
from autoenv.core.formats import idx_list, quoted
from autoenv.core.job import AuditPlan
from autoenv.core.messages import AMBIGUOUS
from autoenv.core.paths import shown
from autoenv.core.record import GateReport
from autoenv.gates import coverage, free, noise, ranges, rejections, shapes
from autoenv.gates.audit_record import AUDIT_FILE, AuditRecord, ProbeRecord, parse_audit, read_audit
from autoenv.gates.ceiling import judge_ceiling
from autoenv.gates.earnable import judge_earnable
from autoenv.gates.families import FAMILIES, NOT_APPLICABLE
from autoenv.gates.findings import Gates
from autoenv.gates.network import cut_off, judge_network, needs_network
from autoenv.gates.ungraded import judge_ungraded, left_ungraded, ungraded
from autoenv.gates.probes import EXPLOITS
from autoenv.gates.ranges import max_reward
from autoenv.gates.rows import Row, summarize, totals
from autoenv.gates.channel_rules import judge_channel
from autoenv.gates.seat_rules import constant_sum_game, judge_seats
from autoenv.sandbox.rollouts import Worker
from autoenv.sandbox.scripts import blocked

PLACEHOLDER = re.compile(r"^\s*(todo|tbd|fixme|xxx)\b|<one-line description>|one line saying what|lorem ipsum", re.I)


def platform_checks(candidate: Path, report: Gates, workspace: bool = True) -> None:
    """pyproject metadata and README, as the environment hub expects them.

    For the agent's workspace a shortfall fails (program.md's contract, name candidate-env
    included); an existing environment keeps its own name and a shortfall is a warning.
    """
    if not (candidate / "pyproject.toml").is_file() and not workspace:
        report.add("pyproject", "skip", f"no pyproject.toml in {shown(candidate)}: an installed environment")
        return
    bad = "fail" if workspace else "warn"
    pyproject = candidate / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as e:
        report.add("pyproject", "fail", f"{shown(pyproject)} cannot be read: {e}")
        return
    problems = []
    if workspace and project.get("name") != "candidate-env":
        problems.append(f"name is {quoted(project.get('name'))}, must be \"candidate-env\"")
    if not project.get("version"):
        problems.append("version is missing")
    description = str(project.get("description") or "")
    if len(description.strip()) < 15 or PLACEHOLDER.search(description):
        problems.append(f"description {quoted(description)} is missing or a placeholder: say in one line what it teaches")
    tags = project.get("tags")
    if not isinstance(tags, list) or not tags or not all(isinstance(t, str) and t for t in tags):
        problems.append("tags must be a non-empty list of strings, e.g. tags = [\"math\", \"single-turn\"]")
    report.add("pyproject", bad if problems else "pass",
               "; ".join(problems) or f"{project.get('name')} {project.get('version')}, tags {', '.join(tags or [])}")
    readme = candidate / "README.md"
    text = readme.read_text(errors="replace") if readme.is_file() else ""
    if len(text.strip()) < 200:
        report.add("readme", bad, f"{shown(readme)} is missing or under 200 characters: "
                   "describe the task, the rewards and the knobs")
    else:
        report.add("readme", "pass", f"{len(text)} characters")


def judge_audit(audit: AuditRecord | dict[str, Any], config: Config, report: Gates) -> None:
    """Judge the audit stage's measurements against config.toml (a dict is parsed and validated first)."""
    audit = audit if isinstance(audit, AuditRecord) else parse_audit(audit)
    c = config.checks
    report.mode = audit.mode
    hung = audit.time_limits
    if hung:
        report.add("time limits", "fail", "; ".join(hung) + ": a call into the candidate must return within its "
                   "limit ([checks] max_load_seconds, max_reward_seconds, max_tool_seconds); a hang is an environment error",
                   breaches=hung)
    if hung and audit.load_seconds is None:  # load() never returned: nothing else was measured
        report.add("load time", "fail", f"load() did not return within the limit of {c.max_load_seconds:g} s "
                   "(checks.max_load_seconds)", limit=c.max_load_seconds)
        return
    broken = [m for m in audit.modules if not m.ok]
    servers = [m.module for m in audit.modules if m.tool_server]
    scripts = [f"{m.module} ({m.script})" for m in audit.modules if m.script]
    if broken:
        report.add("modules", "fail", "; ".join(f"{m.module} fails to import: {m.error}" for m in broken)
                   + " (a tool server that dies at start costs ~3 minutes per rollout)",
                   modules=[m.module for m in broken])
    else:
        report.add("modules", "pass", f"{len(audit.modules) - len(scripts)} modules import"
                   + (f"; tool servers: {', '.join(servers)}" if servers else "")
                   + (f"; scripts, not imported (they run with their own dependencies): {', '.join(scripts)}"
                      if scripts else ""), scripts=scripts)
    d = audit.dataset
    size = d.size
    infinite = audit.infinite
    workspace = config.candidate.workspace
    if infinite:
        report.add("dataset size", "pass", f"infinite taskset: its first {infinite.taken} tasks are measured and "
                   f"sampled from (checks.infinite_take = {infinite.bound})", size=size, infinite=True)
    else:
        short = size < c.dataset_size
        report.add("dataset size", ("fail" if workspace else "warn") if short else "pass",
                   f"{size} tasks (wanted >= {c.dataset_size}"
                   + (", an error for the agent's workspace only: candidate.workspace = false)" if short and not workspace
                      else ")"), size=size, wanted=c.dataset_size)
    if d.duplicate_keys:
        repeated = d.duplicate_key_examples
        report.add("task keys", "fail", f"{d.duplicate_keys} tasks share a key with another; keys must be unique"
                   + (f"; e.g. {', '.join(map(repr, repeated))}" if repeated else ""), keys=repeated)
    share = d.exact_duplicate_share
    by = d.distinguished_by
    what = "prompts" if by == "prompt" else \
        f"tasks (same prompt and data fields, which reach the model through {d.data_reach})" \
        if by == "prompt and data fields" else "tasks (prompt, or data fields and seed without one)" \
        if by.startswith("prompt") else "tasks (no prompts: compared on their data fields and seed)"
    ids = f"; ids never make a task unique: {', '.join(d.id_fields)} left out" if d.id_fields and by != "prompt" else ""
    report.add("exact duplicates", "fail" if share > c.max_duplicate_share else "warn" if share else "pass",
               f"{d.exact_duplicates} repeated {what} ({share:.1%}, allowed {c.max_duplicate_share:.0%})"
               + (f"; e.g. task idx {idx_list(d.duplicate_examples)}" if d.duplicate_examples else "") + ids,
               examples=d.duplicate_examples, repeated=d.exact_duplicates,
               unit="prompts" if by == "prompt" else "tasks")
    if d.conflicting_labels:
        pairs = "; ".join(f"idx {a} {quoted(x)} vs idx {b} {quoted(y)}" for a, x, b, y in d.conflict_examples)
        report.add("conflicting labels", "fail",
                   f"{d.conflicting_labels} prompt{'s' if d.conflicting_labels > 1 else ''} given to several tasks "
                   f"with different answers: a right reply is scored wrong on one of them; e.g. {pairs}",
                   examples=d.conflict_examples, conflicting=d.conflicting_labels)
    elif d.data_reach or not d.with_answer:
        report.add("conflicting labels", "skip", f"the tasks' data fields reach the model through {d.data_reach}: "
                   "the same prompt may be a different task" if d.data_reach else "tasks carry no `answer` field")
    else:
        report.add("conflicting labels", "pass", "no prompt is given to two tasks with different answers")
    near = d.near_duplicate_share
    if by == "data fields":
        report.add("near duplicates", "skip", "the tasks have no prompts: near-duplicate text is not measured")
    else:
        report.add("near duplicates", "fail" if near > c.max_near_duplicate_share else "warn" if near else "pass",
                   f"{near:.1%} of tasks are near-duplicates (similarity >= {c.near_duplicate_similarity}, "
                   f"allowed {c.max_near_duplicate_share:.0%})"
                   + (f"; e.g. idx pairs {pairs_text(d.near_duplicate_examples)}" if d.near_duplicate_examples else ""),
                   examples=d.near_duplicate_examples)
    top = d.top_answer_share
    if top is None:
        report.add("answer balance", "skip", "tasks carry no `answer` field")
    else:
        distinct = d.distinct_answers == d.with_answer  # every answer its own: nothing to balance
        allowed = free.answer_share_allowed(c.max_answer_share, d.distinct_answers)
        status = "pass" if distinct else "fail" if top > allowed + 1e-9 else \
            "warn" if top > allowed / 2 and allowed == c.max_answer_share else "pass"
        why = (f"allowed {c.max_answer_share:.0%}" if allowed == c.max_answer_share else
               f"allowed {allowed:.0%}, what {d.distinct_answers} labels allow near balance")
        report.add("answer balance", status, f"most common answer {quoted(d.top_answer)} in {top:.1%} of tasks "
                   f"({d.distinct_answers} distinct; {why})",
                   answer=d.top_answer, share=top, allowed=c.max_answer_share,
                   distinct=d.distinct_answers, tasks=d.with_answer)
    for name, histogram in (("difficulty", d.difficulty), ("category", d.category)):
        if histogram:
            thin = [k for k, n in histogram.items() if n < 0.05 * size]
            report.add(name, "warn" if thin else "pass",
                       ", ".join(f"{k} {n}" for k, n in histogram.items())
                       + (f" (under 5%: {', '.join(thin)})" if thin else ""), histogram=histogram)
        else:
            report.add(name, "skip", f"tasks carry no `{name}` field (recommended)")
    load = audit.load_seconds or 0
    report.add("load time", "pass", f"{load:.2f} s (limit {c.max_load_seconds:g} s, checks.max_load_seconds)")
    report.add("deterministic load", "pass" if audit.deterministic_load else "fail",
               "two loads gave the same tasks in the same order" if audit.deterministic_load else
               f"two loads with the same config differ (first at position {audit.load_difference}): "
               "seed every random choice from the config", position=audit.load_difference)
    gold = audit.gold
    if gold is not None:
        bad = gold.invalid or gold.errors
        report.add("gold validation", "fail" if bad else "pass" if gold.valid else "skip",
                   f"verifiers' gold check (Task.validate) passed on {gold.valid} of {gold.checked + len(gold.errors)} "
                   "sampled tasks" + (f"; invalid on task idx {idx_list(gold.invalid[:8])}" if gold.invalid else "")
                   + (f"; raised: {'; '.join(gold.errors[:3])}" if gold.errors else "")
                   + (f"; no verdict (None) on task idx {idx_list(gold.unchecked[:8])}" if gold.unchecked else ""),
                   **gold.model_dump())
    if audit.probes is not None:
        judge_probes(audit, config, report)


SHAPE_FULL = 0.9
"""The share of the oracle's reward a degenerate filling of the answer's shape may earn (autoenv.gates.shapes): a reward
with partial credit pays a superset of twice the answer's size about two thirds; one that accepts it pays it in full."""
HELD_CONSTANT = "the constant is this task's own data value (right by the data, the constant probe's concern)"
"""Why a surface probe's task is left out of its judgement: its constant is an answer or label in the task's data."""


def judge_probes(audit: AuditRecord | dict[str, Any], config: Config, report: Gates) -> None:
    """Judge the probe records: reward errors, the oracle, each exploit probe, the matrix and the coverage."""
    audit = audit if isinstance(audit, AuditRecord) else parse_audit(audit)
    p = config.probes
    records, cut, from_hub = cut_off(audit.probes or [], audit.reached_hosts)  # a missing network: untested
    judge_network(report, cut, len(records), from_hub, audit.unprepared_scripts)
    records, mismatched, first = left_ungraded(records)  # a grader/format mismatch offline: untested
    judge_ungraded(report, mismatched, len(records), first)
    records = [r.model_copy(update={"skipped": True, "components": {}, "reason": HELD_CONSTANT})
               if r.probe in ("surface", "search") and r.constant_in_data and not r.skipped else r for r in records]
    if audit.deterministic_scoring is not None:
        ok = audit.deterministic_scoring
        report.add("deterministic scoring", "pass" if ok else "fail",
                   "scoring the same transcript twice gave the same rewards" if ok else
                   "scoring the same transcript twice gave different rewards: rewards must be pure functions")
    weights: dict[str, float] = {}
    errors: list[str] = []
    rng = ranges.choose(list(audit.reward_range) if audit.reward_range else None, records)
    declared = rng.normalises or None  # scores are normalised from a range other than [0, 1]
    low, high, documented = rng.low, rng.high, rng.text()
    oracle_rejected = any(r.rejected for r in records if r.probe == "oracle")
    rejected: list[ProbeRecord] = []
    rows: list[Row] = []  # each record judged once, in the records' order
    for r in records:
        if r.skipped:
            rows.append(Row.judged(r))
            if r.error:
                errors.append(f"task {r.idx} ({r.probe}): {r.error}")
            continue
        if r.rejected and not oracle_rejected:  # the env refused an off-contract reply, by design
            rejected.append(r)
            rows.append(Row.judged(r))
            continue
        outcome = r.outcome or ("env_error" if r.error else "ok")
        problem = r.error if outcome == "env_error" else None
        for name, score in r.components.items():
            weights[name] = r.weights.get(name, 1.0)
            if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
                problem = problem or f"reward {name!r} returned {score!r}, not a finite number"
            elif not low <= score <= high:
                problem = problem or f"reward {name!r} returned {score}, outside its {documented} range [{low:g}, {high:g}]"
        if not problem and not r.components and (r.outcome or "ok") == "ok":
            problem = "the rollout finished without any reward"
        rows.append(Row.judged(r, problem))
        if problem:
            errors.append(f"task {r.idx} ({r.probe}): {problem}")
    seats = audit.seats
    constant_sum = constant_sum_game(rows, seats)
    if rng.source == "observed":
        report.add("reward range", "warn", ranges.finding(rng, constant_sum), range=[rng.low, rng.high],
                   observed=list(rng.observed or ()), constant_sum=constant_sum)
    if rejected:
        report.add("rejections", "warn", rejections.consequence(len(rejected), len(records)) + "; e.g. "
                   + "; ".join(sorted({f"{r.probe}: {r.rejected}" for r in rejected})[:2]),
                   rejected=len(rejected), examples=sorted({r.rejected or "" for r in rejected})[:3])
    if declared and high > low:  # the statistics compare shares of [0, 1]: normalise the declared range
        rows = [row.model_copy(update={"components": {k: (v - low) / (high - low) for k, v in row.numbers().items()}})
                if not row.env_error and row.components else row for row in rows]
    by_probe: dict[str, list[Row]] = defaultdict(list)
    for r, row in zip(records, rows):
        if r.rejected and not r.skipped and not oracle_rejected:  # left out as the env's choice, not a failure
            row = row.model_copy(update={"skipped": True, "reason": f"rejected by the env: {r.rejected}"})
        by_probe[r.probe].append(row)
    maximum = max_reward(weights)
    per_seat = any(r.probed_seat for r in records)
    share = 0.0  # the probed seat's fair share of a constant-sum game, on the scale the statistics use
    if per_seat and constant_sum is not None:
        share = constant_sum / len(seats)
        if declared and high > low:
            share = (share - low * sum(weights.values() or [1.0])) / (high - low)
    from_failure: dict[str, list[Row]] = {}
    if per_seat:  # an episode whose reference seat did not play measures the reference, not the probe
        for name in list(by_probe):
            failed = [r for r in by_probe[name] if r.other_failed]
            if failed:
                from_failure[name] = failed
                by_probe[name] = [r for r in by_probe[name] if not r.other_failed]
    if errors:
        report.add("reward errors", "fail", f"{len(errors)} probe replies hit environment errors, e.g. "
                   + "; ".join(distinct_errors(errors, audit.unprepared_scripts)[:3]),
                   examples=errors[:10])
    order = ["oracle", *EXPLOITS]
    summaries = {name: summarize(name, by_probe[name], weights) for name in sorted(by_probe, key=order.index)}
    report.probes = summaries
    oracle = summaries.get("oracle")
    if oracle and oracle.scored == 0 and not oracle.errors and not any(r.error for r in by_probe["oracle"]):
        oracle = None  # no reference reply at all (no hook, nothing inferable): not an error, unproven
    played = totals(by_probe.get("oracle", []))
    reference = (sum(played) / len(played) if played else oracle.mean) if oracle and oracle.mean is not None \
        else maximum  # unrounded, like every mean a rule compares
    source = audit.oracle_source
    inferred = (f"inferred from the tasks' `{audit.oracle_field or 'answer'}` field in the {source.split(':', 1)[1]} "
                "format (the candidate "
                "has no oracle hook: this proves only that the answer so formatted earns the reward); "
                if source and source.startswith("inferred:") else "")
    gold = audit.gold
    unknown = sorted({r.reason for r in by_probe.get("oracle", []) if r.skipped and r.reason and AMBIGUOUS in r.reason})
    offline = sorted({r.reason or "" for r in by_probe.get("oracle", []) if r.skipped and needs_network(r.reason)})
    unjudged = sorted({r.reason or "" for r in by_probe.get("oracle", []) if r.skipped and ungraded(r.reason)})
    if not oracle and offline:  # the sandbox gives no network: neither passed nor failed
        report.add("oracle", "skip", f"untested: {offline[0]} (see network)", coverage=coverage.UNTESTED,
                   reasons=offline)
    elif not oracle and unjudged:  # the offline grader and the reward disagree on the verdict's form
        report.add("oracle", "skip", f"untested: {unjudged[0]} (see grader)", coverage=coverage.UNTESTED,
                   reasons=unjudged)
    elif not oracle and unknown:  # the scripted model could not tell which task it played: neither passed nor failed
        report.add("oracle", "skip", f"untested: {unknown[0]}", coverage=coverage.UNTESTED, reasons=unknown)
    elif not oracle and gold and gold.valid and not gold.invalid and not gold.errors:
        report.add("oracle", "pass", f"no oracle hook; verifiers' gold check (Task.validate) proves the reference "
                   f"answer passes on {gold.valid} sampled tasks (offline models still need a hook to play; the "
                   "exploits built from the oracle's reply were not tested)", source="gold")
    elif not oracle and gold:
        report.add("oracle", "fail", "no oracle hook, and verifiers' gold check (Task.validate) failed: see gold validation",
                   cause="gold")
    elif not oracle:
        report.add("oracle", "warn", "the task has no oracle hook and no answer-field oracle could be inferred"
                   + tried_text(audit.oracle_formats_tried) + ": solvability is unproven offline and the exploits built "
                   "from the oracle's reply were not tested (add `def oracle(self, messages)`, see program.md; or keep "
                   "the reference answer in a data field and state its reply format in the instructions)",
                   source=source)
    elif oracle.mean is None:
        report.add("oracle", "fail", "no oracle reply could be scored (the hook raised or the reward failed "
                   "on every sampled task): see reward errors", cause="unscored")
    elif maximum <= 0:
        report.add("oracle", "fail", "no positive reward weight: nothing can be earned", cause="no positive weight")
    elif per_seat and constant_sum is not None:
        report.add("oracle", "pass", f"the oracle at every seat of a constant-sum game (payoffs summing to "
                   f"{constant_sum:g}): mean {oracle.mean:.3f} per seat against a fair share of {share:.3f}; "
                   "self-play proves the hook plays every seat, not how well", source=source)
    else:
        short = [r for r in by_probe["oracle"] if (total := r.total) is not None and total < p.oracle_min * maximum]
        share = (oracle.mean or 0) / maximum
        status = "pass" if share >= p.oracle_min and not short else "fail"
        earned = totals(by_probe["oracle"])
        uniform = bool(earned) and max(earned) - min(earned) <= 1e-6
        if status == "fail" and inferred and audit.mode == "rollouts" and (oracle.mean or 0) > 0:
            # the answer played alone as the final reply: what tools or turns earn is out of its reach
            status = "warn"
            inferred += ("a shortfall is not a failure here: the answer alone cannot earn what tool calls or "
                         "turns earn (an oracle hook would show it); ")
        elif status == "fail" and inferred and uniform and (oracle.mean or 0) > 0:
            # the same share on every task: the answer, formatted, earns its part, and another component pays for
            # something the answer alone does not say (a style, a field, a phrase): the ceiling finding names it
            status = "warn"
            short = []
            inferred += ("a shortfall is not a failure here: the answer alone earns the same share on every task, "
                         "and what else the reward pays for is out of its reach (see `ceiling`; an oracle hook would "
                         "show it); ")
        report.add("oracle", status, inferred + f"mean {oracle.mean:.3f} of a maximum {maximum:g} ({share:.0%}, "
                   f"wanted >= {p.oracle_min:.0%})" + (f"; below on task idx {idx_list([r.idx for r in short][:8])}: "
                   "unsolvable or wrongly scored" if short else ""), tasks=[r.idx for r in short],
                   components=_short_components(short, weights), source=source)
    untested: dict[str, str] = {}
    inapplicable: dict[str, str] = {}
    correct = free.correctness_component(summaries, by_probe, weights)
    inapplicable.update({n: "; ".join(sorted({r.reason or "" for r in by_probe[n]})) for n, s in summaries.items()
                         if s.mean is None and not s.errors and by_probe[n]
                         and all(r.skipped and r.reason in NOT_APPLICABLE.values() for r in by_probe[n])})
    content_free = {} if per_seat or constant_sum is not None else free.judge_free(
        report, summaries, by_probe, weights, declared=bool(declared), maximum=maximum, free_max=p.free_max,
        dataset=audit.dataset, max_answer_share=config.checks.max_answer_share, inapplicable=inapplicable)
    noisy: list[str] = []  # above the limit, not beyond noise: warned, never a cause
    for name, summary in summaries.items():
        if name == "oracle":
            continue
        if per_seat:
            judge_seats(report, name, summary, by_probe[name], from_failure.get(name, []), share,
                         maximum if constant_sum is not None else reference, p.exploit_max, audit, untested)
            continue
        if constant_sum is not None and summary.mean is not None:
            report.add(f"probe {name}", "skip", f"not applicable: a constant-sum game of {len(seats)} seats "
                       f"({', '.join(seats)}, payoffs summing to {constant_sum:g} in every episode) with every "
                       "seat playing this probe: a seat's reward is the other seat's failure, not a harvest. Probing one "
                       "seat needs a reference policy for the others (per-seat probing runs through rollouts)",
                       constant_sum=constant_sum)
            untested[name] = (f"a constant-sum game of {len(seats)} seats: probing one seat needs a reference "
                              "policy for the others")
            continue
        summary = summaries[name] = summary.model_copy(update={
            "of_oracle": None if not reference or summary.mean is None else round(summary.mean / reference, 4)})
        if summary.mean is None:
            if summary.errors:
                report.add(f"probe {name}", "fail", f"every reply hit an error ({summary.errors} of "
                           f"{summary.tasks}): see reward errors", errors=summary.errors)
            else:
                reasons = sorted({r.reason or "the task has no answer in the oracle's reply"
                                  for r in by_probe[name] if r.skipped})
                if name in inapplicable:  # nothing of the kind to exploit here
                    report.add(f"probe {name}", "skip", "n/a, does not apply: " + inapplicable[name], reasons=reasons)
                    continue
                untested[name] = "; ".join(reasons)
                report.add(f"probe {name}", "skip", f"n/a, not tested on any of {summary.tasks} tasks: "
                           + untested[name], reasons=reasons)
            continue
        if name == "padding":
            bad = oracle is not None and summary.mean > (oracle.mean or 0) + 1e-9
            limit = "must not beat the oracle"
        elif name == "constant":  # its accuracy, against what the sampled tasks and the label count allow
            bad, limit = free.judge_constant(by_probe[name], summary, correct, reference or 0.0, p.exploit_max,
                                             audit.dataset, config.checks.max_answer_share)
        elif name == "prompt-copy" and (span := free.copies_a_constant(by_probe[name])) is not None:
            bad, limit = free.judge_constant(by_probe[name], summary, correct, reference or 0.0, p.exploit_max,
                                             audit.dataset, config.checks.max_answer_share,
                                             own="answer_is_copy", what=f"the same span {span!r} copied for every task")
        elif name in FAMILIES:  # content-free families: judged against the reward's range (autoenv.gates.free)
            bad, limit = content_free.get(name, (False, "not judged: the reward's range is unobserved"))
        else:
            cap = SHAPE_FULL if name == "shape-fill" else p.exploit_max  # partial credit for a superset is a design
            allowed = cap * (reference or 0)
            values = totals(by_probe[name])
            mean = sum(values) / len(values) if values else summary.mean  # unrounded: rounding is for display
            bad = noise.beyond(mean, allowed, summary.scored, maximum, values)
            limit = f"allowed {cap:.0%} of the oracle"
            if not bad and mean > allowed + 1e-9:
                limit += "; " + noise.within(mean, allowed, summary.scored, maximum, values)
        if not bad and "within noise" in limit:
            noisy.append(name)
        harvested = ", ".join(f"{k}: {v}" for k, v in summary.harvested.items())
        best = summary.best[0] if summary.best else None
        partly = f"; tested on {summary.scored} of {summary.tasks} tasks" if summary.scored < summary.tasks else ""
        strategy = next((r.strategy for r in by_probe[name] if r.strategy), None)
        if strategy:
            limit += (f"; best strategy: {quoted(strategy)}" if name in FAMILIES else
                      f"; best change: the answer's {strategy}" if name == "near-miss" else
                      f"; best filling: {strategy} ({shapes.STRATEGIES.get(strategy, '')})" if name == "shape-fill" else
                      f"; best field: {strategy} written where the answer goes" if name == "field-copy" else
                      f"; best copying strategy: the prompt's {strategy}")
        report.add(f"probe {name}", "fail" if bad else "warn" if name in noisy else "pass",
                   f"mean {summary.mean:.3f} ({limit})" + partly
                   + (f"; harvested {harvested}" if harvested and bad else "")
                   + (f"; best task idx {best.idx} scored {best.reward:.2f}: {quoted(best.reply, 80)}"
                      if bad and best else ""),
                   harvested=summary.harvested if bad else {}, **({"strategy": strategy} if strategy else {}),
                   **({"search": audit.search.model_dump(exclude_unset=True)} if name == "search" and audit.search
                      else {}))
    judge_channel(report, audit.channel, reference or 0.0, maximum, p.exploit_max,
                  *((low, high) if declared else (0.0, 1.0)), constant_sum=constant_sum)
    if not per_seat and constant_sum is None and oracle is None and rng.source != "declared" \
            and not (gold and gold.valid):
        floor = None if rng.source == "observed" else sum(w * (low if w > 0 else high) for w in weights.values())
        judge_earnable(report, audit, by_probe, floor, "no reference reply was scored (no oracle hook, and no "
                       "answer field the reward accepted" + tried_text(audit.oracle_formats_tried) + ")")
    if not per_seat and constant_sum is None:
        judge_ceiling(report, by_probe, weights, free.CONTENT_FREE, audit.search.focus if audit.search else [])
    if per_seat and constant_sum is not None and share:
        # a seat's gain over its fair share, as a share of the way to full marks (the oracle's self-play earns
        # exactly the fair share: no column of its own)
        each = share / (sum(weights.values()) or 1.0)
        gains = {name: [r.model_copy(update={"components": {k: (v - each) / max(1.0 - each, 1e-9)
                                                             for k, v in r.numbers().items()}})
                        for r in rs] for name, rs in by_probe.items() if name != "oracle"}
        add_matrix(report, gains, weights, p.exploit_max)
    else:
        add_matrix(report, by_probe, weights, p.exploit_max)
    free.coverage(report, summaries, by_probe, weights, untested, inapplicable)
    tested = [n for n, s in summaries.items() if n != "oracle" and s.mean is not None and n not in untested]
    exploits = [n for n in summaries if n != "oracle" and n not in inapplicable]
    thin = coverage.too_thin(len(tested), len(exploits))
    report.add("probes tested", "warn" if untested or thin else "pass",
               (coverage.untested_text(len(tested), len(exploits), untested) if thin else "")
               + f"{len(tested)} of {len(exploits)} exploit probes tested"
               + ("; not tested: " + "; ".join(f"{', '.join(n for n in untested if untested[n] == why)} ({why})"
                                              for why in dict.fromkeys(untested.values())) if untested else ""),
               tested=tested, untested=untested, **({"coverage": coverage.UNTESTED} if thin else {}))


def tried_text(tried: dict[str, float]) -> str:
    """What the answer-field oracle tried, none of which earned anything: `` (tried `answer`, `lo` in 6 formats each:
    none earned reward)``; where no data field could be the answer, that (the formats are in audit.json)."""
    if not tried:
        return " (no data field holds a string, a number or a list of them that differs between tasks)"
    fields = list(dict.fromkeys(k.split(": ", 1)[0] if ": " in k else "answer" for k in tried))
    forms = list(dict.fromkeys(k.split(": ", 1)[1] if ": " in k else k for k in tried))
    return f" (tried {', '.join(f'`{f}`' for f in fields)} in {len(forms)} formats each: none earned reward)"


def pairs_text(pairs: list[list[int | float | None]]) -> str:
    """`9 ~ 450 (0.92), 105 ~ 402 (0.92)`: near-duplicate index pairs and their similarity, for people."""
    return ", ".join(f"{p[0]} ~ {p[1]}" + (f" ({float(p[2] or 0):.2f})" if len(p) > 2 else "") for p in pairs)


def distinct_errors(errors: list[str], unprepared: list[str]) -> list[str]:
    """The errors once each, with a count; a network failure inside the sandbox said plainly, once."""
    first: dict[str, str] = {}
    count: dict[str, int] = {}
    also: dict[str, list[str]] = {}  # where else the same error was hit ("task 5 (oracle)")
    for e in errors:
        plain = blocked(e)
        where = re.match(r"^(task \d+ \([^)]*\)): ", e)
        key = plain or (e[where.end():] if where else e)
        if key in first and where and not plain:
            also.setdefault(key, []).append(where.group(1))
        first.setdefault(key, plain + (f" (not prepared beforehand: {'; '.join(unprepared[:2])})" if unprepared
                                       else "") if plain else e)
        count[key] = count.get(key, 0) + 1
    return [(f"{first[k]} (x{n} replies" + (f"; also {', '.join(also[k][:3])}" if also.get(k) else "") + ")")
            if n > 1 else first[k] for k, n in count.items()]


def _short_components(short: list[Row], weights: dict[str, float]) -> dict[str, float]:
    """Mean score of each positively weighted reward component over the oracle's short
    replies, for the components that fell below full marks (the ones to look at)."""
    out = {}
    for name, weight in weights.items():
        values = [v for r in short if weight > 0 and (v := r.score(name)) is not None]
        if values and sum(values) / len(values) < 1:
            out[name] = round(sum(values) / len(values), 3)
    return out


def audit_plan(config: Config, probes: bool = True) -> AuditPlan:
    """What the audit stage measures, from config.toml's [checks] and [probes]."""
    return AuditPlan(probes=probes, probe_sample=config.probes.sample, rollout_sample=config.probes.rollout_sample,
                     near_threshold=config.checks.near_duplicate_similarity, exploits=len(EXPLOITS))


def run_gates(config: Config, worker: Worker) -> GateReport:
    """Platform checks here, then the audit stage in the evaluation's child process, judged against config."""
    started = time.time()
    report = Gates()
    platform_checks(config.path("candidate"), report, workspace=config.candidate.workspace)
    worker.run("audit")
    out_dir = worker.job.audit_dir
    judge_audit(read_audit(out_dir / AUDIT_FILE), config, report)
    report.seconds = round(time.time() - started, 2)
    gates = report.report()
    (out_dir / "gates.json").write_text(gates.model_dump_json(indent=1))
    return gates


def add_matrix(report: Gates, by_probe: dict[str, list[Row]], weights: dict[str, float], limit: float,
               prefix: str = "") -> None:
    """Add the probes' columns to the exploit matrix; name the components harvested above their share."""
    report.matrix.limit = limit
    report.matrix.add_columns(by_probe, weights, prefix)
    added = {prefix + name for name in by_probe}
    found = [h for h in report.matrix.harvests() if h.probe in added]
    if not found and not any(not r.skipped and r.components for rs in by_probe.values() for r in rs):
        report.add(f"exploit matrix{' (derived)' if prefix else ''}", "skip", "n/a, not tested: no probe reply was "
                   "scored, so no reward component could be checked for a harvest", harvests=[])
        return
    report.add(f"exploit matrix{' (derived)' if prefix else ''}", "warn" if found else "pass",
               "; ".join(f"{h.component} harvested by {h.probe} (mean {h.score:.2f}, e.g. task idx {h.idx}: "
                         f"{quoted(h.reply, 60)})" for h in found[:6]) if found else
               f"no reward component of {len(weights)} harvested above its share by any probe",
               harvests=[h.model_dump() for h in found])


