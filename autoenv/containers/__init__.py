"""containers: container engines for verifiers' docker (and podman) runtime: where the engine's API is (engine);
a private daemon for setup and CI (daemon); a local base image built from Debian's packages (image);
and the guard that gives a sandboxed child the engine's API with only its own containers in reach
(policy, guard).

May import: core. Imported by: review, evaluation, cli.
"""
