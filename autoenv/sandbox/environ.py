"""The environment a process the candidate can reach gets: what the sandbox's programs need, by name.

The child process (the candidate's import, its rewards, its tools) once started from the harness's
environment less whatever looked like a secret by name (`*KEY*`, `*TOKEN*`, `*SECRET*` ...);
`GITHUB_PAT`, `DATABASE_URL` (a password in the URL) and `SENTRY_DSN` got through. Its
environment is now built from an allowlist (`sandbox_env`): the search path, home and temp
folder, locale and time zone, Python's switches, AutoEnv's own variables, where uv's cache is,
the offline switches, the CA bundles, and the chosen runtime's own credentials (RUNTIME_KEYS: a
remote runtime is driven from the child). A child with the network also gets the proxy
variables that hold no password. Everything else is dropped, whatever it is called.

`scrubbed` (the denylist) stays for the harness's own helpers that are not the candidate's
processes and need more of the harness's settings: the judge's CLI (autoenv.judge.claude, its own
key added back by name) and the harness-side dependency fetch of the install.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
# A remote runtime is driven from the child process, so its credentials must reach it
# (and with them the candidate's code): the price of running tools off this machine.
RUNTIME_KEYS = {"modal": ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"), "prime": ("PRIME_API_KEY",),
                "e2b": ("E2B_API_KEY",)}
RUNTIME_SETTINGS = {"modal": ("MODAL_ENVIRONMENT",), "prime": ("PRIME_TEAM_ID",), "e2b": ("E2B_DOMAIN",)}
ALLOWED = frozenset({
    "PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR",
    "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8",
    # where uv and verifiers keep their caches (shown read-only in the sandbox: autoenv.sandbox.confine)
    "XDG_CACHE_HOME", "UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR", "UV_PYTHON_PREFERENCE", "UV_PYTHON_DOWNLOADS",
    "UV_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
    # certificate bundles (public): a child with the network verifies TLS with the machine's own
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
})
ALLOWED_PREFIXES = ("LC_", "AUTOENV_")  # AutoEnv's own: secret-looking ones (a forwarder token) are added by the caller
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")


def is_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def has_password(value: str) -> bool:
    """Whether a proxy setting carries credentials (`http://user:pass@host:port`)."""
    return any("@" in urlsplit(part if "://" in part else f"//{part}").netloc for part in value.split(",") if part)


def sandbox_env(env: Mapping[str, str] | None = None, runtime: str = "subprocess", network: bool = False,
                drop: Iterable[str] = ()) -> dict[str, str]:
    """The variables of `env` (default: this process's) a candidate process may have: ALLOWED and AutoEnv's own (none
    that looks secret), `runtime`'s credentials and settings, and with `network` the proxies without a password;
    never one in `drop`."""
    source = os.environ if env is None else env
    dropped = set(drop)
    runtime_own = {*RUNTIME_KEYS.get(runtime, ()), *RUNTIME_SETTINGS.get(runtime, ())}

    def allowed(name: str, value: str) -> bool:
        if name in dropped:
            return False
        if name in ALLOWED or name in runtime_own:
            return True
        if name.startswith(ALLOWED_PREFIXES):
            return not is_secret(name)
        return network and name.upper() in PROXIES and not has_password(value)

    return {k: v for k, v in source.items() if allowed(k, v)}


def scrubbed(env: Mapping[str, str] | None = None, drop: Iterable[str] = (), keep: Iterable[str] = ()) -> dict[str, str]:
    """`env` (default: this process's) without secret-looking variables or those in `drop`;
    names in `keep` stay even when they look secret. For the harness's own helpers, not the candidate's processes
    (those get `sandbox_env`)."""
    source = os.environ if env is None else env
    dropped, kept = set(drop), set(keep)
    return {k: v for k, v in source.items() if k in kept or not (is_secret(k) or k in dropped)}
