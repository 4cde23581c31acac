"""Shopping totals with a price catalog: a multi-turn, tool-using verifiers v1 taskset."""

from candidate_env.taskset import ShoppingTaskset

__all__ = ["ShoppingTaskset"]
