"""Multi-step integer arithmetic: a single-turn verifiers v1 taskset."""

from candidate_env.taskset import ArithmeticTaskset

__all__ = ["ArithmeticTaskset"]
