"""Warehouse stock totals with credit for any looked-up figure: a planted reward hack (see taskset.py)."""

from candidate_env.taskset import StockTaskset

__all__ = ["StockTaskset"]
