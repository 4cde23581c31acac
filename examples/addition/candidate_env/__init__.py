"""Two-number addition: a single-turn verifiers v1 taskset."""

from candidate_env.taskset import AdditionTaskset

__all__ = ["AdditionTaskset"]
