"""run: what a run keeps and checks, in git and beside it.

A run is a branch `autoenv/<tag>` with a run base (runbase: the rules it started under,
the tamper check), its hash-chained ledger feedback_log.jsonl (ledger), the ledger checked
against the git notes (integrity), the one wrapper around git (gitrepo), an evaluation's
clean-tree check with what the agent may do about each dirty path (cleantree), the eval cache
(cache), what a commit changed that could change a rollout (fingerprint), which environment
`--env` evaluated (envref), and starting a run or changing its rules (lifecycle, demo).

May import: core. Imported by: child, driver, evaluation, export, model, review, cli.
"""
