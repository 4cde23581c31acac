"""AutoEnv: an autonomous research loop that builds verifiers RL environments."""

__version__ = "0.1.0"
