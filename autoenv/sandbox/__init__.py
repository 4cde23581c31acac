"""sandbox: the processes the harness starts for the candidate, and how they are confined.

The bubblewrap sandbox or its unconfined fallback (confine), the environment a candidate
process gets, less every secret (environ), the evaluation's child seen from the harness
(rollouts) and its warm fork server's harness side (warmchild), the loopback forwarder that
holds the real key (forwarder), the candidate's install (install), PEP 723 scripts (scripts), a
network failure inside the sandbox recognised and its host named (network), the machine's
certificates as a hashed folder that HTTP clients load lazily (trust),
OpenEnv servers' own venvs (serverenv) and the readable verifiers/ copy (vendor).

May import: core. Imported by: gates, judge, child, review, export, evaluation, cli.
"""
