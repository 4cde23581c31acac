"""The environment a process the candidate can reach gets: the harness's own, less every secret.

The child process, the candidate's install and the judge's CLI all start from the
harness's environment, which holds the provider keys. Whatever looks like a credential
(`*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`, `*AUTH*`, `*_KEY`) is
dropped by name, and so are the variables the config names as key holders, whatever
they are called; the caller adds back the few it means to hand over.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
# A remote runtime is driven from the child process, so its credentials must reach it
# (and with them the candidate's code): the price of running tools off this machine.
RUNTIME_KEYS = {"modal": ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"), "prime": ("PRIME_API_KEY",),
                "e2b": ("E2B_API_KEY",)}


def is_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def scrubbed(env: Mapping[str, str] | None = None, drop: Iterable[str] = (), keep: Iterable[str] = ()) -> dict[str, str]:
    """`env` (default: this process's) without secret-looking variables or those in `drop`;
    names in `keep` stay even when they look secret."""
    source = os.environ if env is None else env
    dropped, kept = set(drop), set(keep)
    return {k: v for k, v in source.items() if k in kept or not (is_secret(k) or k in dropped)}
