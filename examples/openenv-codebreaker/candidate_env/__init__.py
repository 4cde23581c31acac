"""Codebreaker, an OpenEnv environment, as a verifiers v1 candidate (verifiers' openenv taskset)."""

from candidate_env.taskset import CodebreakerEnv, CodebreakerTaskset

__all__ = ["CodebreakerEnv", "CodebreakerTaskset"]
