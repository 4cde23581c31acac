"""What the driver says to the coding agent: the start, continue and nudge prompts.

Short on purpose: program.md holds the loop and the rules; a prompt only says where the run
stands (the last verdict) and what the driver just did.
"""

from __future__ import annotations

from autoenv.core.record import Entry


def start(tag: str) -> str:
    return (f"You are the coding agent of the AutoEnv run autoenv/{tag}, launched by `autoenv run`. Read program.md "
            "(the loop, the rules, and 'Under autoenv run': what the driver does) and spec.md, then start the loop: "
            "edit candidate/, commit, run `bash evaluate.sh --description \"...\"` (add --offline when no model key "
            "is set), read the result block that ends its output and the feedback file it names, go again. "
            "Never stop to ask.")


def verdict_line(entry: Entry | None) -> str:
    if entry is None:
        return "No evaluation yet: commit a candidate and run `bash evaluate.sh --description \"baseline\"`."
    reason = entry.verdict.reason.strip().replace("\n", " ")
    return (f"The last evaluation: commit {entry.commit[:12]}, verdict {entry.verdict.verdict}: {reason[:600]} "
            f"(feedback/{entry.commit}.md).")


def resume(tag: str, last: Entry | None) -> str:
    return (f"`autoenv run` relaunched you on autoenv/{tag} (same session). {verdict_line(last)} "
            "Continue the loop of program.md from where you are.")


def nudge(tag: str, last: Entry | None, minutes: float) -> str:
    return (f"`autoenv run` ended your last launch: no commit and no evaluation for {minutes:g} minutes on "
            f"autoenv/{tag}. {verdict_line(last)} Make one small change now: commit it and run "
            "`bash evaluate.sh --description \"...\"`, or revert what does not work (`git revert --no-edit HEAD`).")
