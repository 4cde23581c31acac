"""Shopping totals with a price catalog and credit for any lookup: a planted reward hack (see taskset.py)."""

from candidate_env.taskset import ShoppingTaskset

__all__ = ["ShoppingTaskset"]
