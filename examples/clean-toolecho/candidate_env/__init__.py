"""Warehouse stock totals with a stock tool: a multi-turn, tool-using verifiers v1 taskset."""

from candidate_env.taskset import StockTaskset

__all__ = ["StockTaskset"]
