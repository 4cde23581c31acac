"""The hand-off: a kept candidate exported as an OpenEnv package (`openenv`, checked by `check`) or for GRPO (`grpo`).

May import: core, run, sandbox, gates, child. Imported by: model, cli.
"""
