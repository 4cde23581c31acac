"""Reviewing a run: `autoenv log`, `show`, `plot`, `compare` and `report`.

Everything here reads: the ledger through `autoenv.run.ledger.read_entries` (typed entries,
older schema versions upgraded), the git notes when the ledger is missing, and the traces
under outputs/<commit>/. Nothing here writes results except figures and the report page.

May import: core, run, sandbox, containers, driver, endpoint. Imported by: evaluation, model, cli.
"""
