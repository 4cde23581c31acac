"""evaluation: one evaluation's stages, top to bottom, and the verdict they end in.

pipeline reads as the design (preflight, install, gates, rollouts, stats, verdict, judge,
record); each stage's body lives in a module of its own here or in the part it serves.
Statistics per model (stats), the verdict against the last kept iteration (verdict), a
reward-only change rescored from stored traces (rescore, rescore_table), the report
feedback/<commit>.md (report), the endpoints asked in preflight (provider), and the commands
that reuse the stages (commands: recompute, rejudge, the gates alone).

May import: core, run, sandbox, containers, gates, driver, endpoint, judge, review. Imported by: model, cli.
"""
