"""addition-format: a bench/train_truth.py environment (a single-turn verifiers v1 taskset)."""

from candidate_env.taskset import FormatTaskset

__all__ = ["FormatTaskset"]
