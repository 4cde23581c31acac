"""addition-detail: a bench/train_truth.py environment (a single-turn verifiers v1 taskset)."""

from candidate_env.taskset import DetailTaskset

__all__ = ["DetailTaskset"]
