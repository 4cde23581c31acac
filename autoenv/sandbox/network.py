"""A network failure inside the sandbox: recognised in an error's text, its host named, said once as what it is.

The sandboxed child has loopback only (autoenv.sandbox.confine). A candidate whose reward, tools or loader
reach the internet (a remote MCP server, a web API, a Hugging Face dataset or Space) fails there with a
resolver or connection error on every call. That is one fact about the environment, that it needs network
the sandbox does not give, not N errors in its reward: the gates say it once as `needs network: HOST` and
leave the probes it hit untested (autoenv.gates.rules), and a stage that fails on it says what to do
(autoenv.sandbox.rollouts). Recognised generally: resolver failures (`socket.gaierror`, "Temporary failure
in name resolution", "Name or service not known", urllib3's NameResolutionError, curl's "Could not resolve
host"), "Network is unreachable", data a library fetches on first use and then reports missing (NLTK's), and a refused or failed connection (`ConnectionRefusedError`,
`httpx.ConnectError`, aiohttp's "Cannot connect to host") when it names a host outside loopback. The host
comes from the text when it names one, else from the hosts the child saw the candidate's code reach
(autoenv.child.netwatch).
"""

from __future__ import annotations

import re

from autoenv.sandbox.confine import SANDBOX_VAR

NEEDS_NETWORK = "needs network"
"""The start of a probe's untested reason when its reply hit a network failure: `needs network: HOST`."""

RESOLVER = re.compile(r"Temporary failure in name resolution|Name or service not known|nodename nor servname|"
                      r"No address associated with hostname|getaddrinfo failed|\bgaierror\b|NameResolutionError|"
                      r"Failed to resolve '|Could not resolve host|Network is unreachable|No route to host|"
                      r"failed to lookup address|dns error", re.I)
"""Failures that only a missing network gives: a name that does not resolve, a route that does not exist."""
CONNECT = re.compile(r"ConnectionRefusedError|Connection refused|\bConnectError\b|\bConnectTimeout\b|"
                     r"Cannot connect to host|Failed to establish a new connection|ConnectionError", re.I)
"""Failures a missing network gives among others (a local server that is down): counted only with a host
outside loopback."""
HOST_PATTERNS = (
    re.compile(r"host='([^']+)'"),  # urllib3 / requests: HTTPSConnectionPool(host='huggingface.co', port=443)
    re.compile(r"Failed to resolve '([^']+)'"),  # urllib3 2's NameResolutionError
    re.compile(r"Could not resolve host:? '?([\w.-]+)"),  # curl, git
    re.compile(r"Cannot connect to host ([\w.-]+)"),  # aiohttp
    re.compile(r"getaddrinfo failed for '?([\w.-]+)"),
    re.compile(r"\b(?:https?|wss?|git)://(?:[^@/\s'\"]+@)?([\w.-]+\.[A-Za-z]{2,})(?=[:/\s'\"]|$)"),
)
NOT_HOSTS = {"errors.pydantic.dev", "docs.python.org", "github.com/python"}
"""Hosts an error's text names that are documentation, not where the code tried to go."""
HUB = re.compile(r"huggingface\.co|HF_HUB_OFFLINE|OfflineModeIsEnabled|LocalEntryNotFoundError|on the Hub\b|"
                 r"huggingface_hub", re.I)
"""A failure reaching the Hugging Face Hub (`datasets.load_dataset` offline raises `ConnectionError: Couldn't reach
'openai/gsm8k' on the Hub (LocalEntryNotFoundError)`, naming no host)."""
HUB_HOST = "huggingface.co"
UNREACHED = re.compile(r"Couldn't reach '[^']*' on the Hub|OfflineModeIsEnabled", re.I)
FETCHED_ON_USE = {re.compile(r"NLTK Downloader|Resource \S+ not found\.[\s\S]*nltk", re.I): "raw.githubusercontent.com"}
"""Data a library downloads on first use and then reports missing, naming no host (NLTK's corpora: a failed
`nltk.download` only prints, and the read after it raises `LookupError: Resource words not found. Please use the NLTK
Downloader`), with the host it downloads from."""

FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def library(path: str) -> bool:
    """Whether a traceback frame's file is an installed library or Python's own, not the candidate's code."""
    return path.startswith("<") or "site-packages" in path or "/lib/python3" in path


def loopback(host: str) -> bool:
    """Whether `host` is this machine (the sandbox's loopback still works)."""
    host = host.strip("[]").lower()
    return host in {"localhost", "::1", "0.0.0.0", "", "ip6-localhost"} or host.startswith("127.")


def host_in(text: str) -> str | None:
    """The first host outside loopback the text names as where a connection went, or None."""
    for pattern in HOST_PATTERNS:
        for found in pattern.finditer(text or ""):
            host = found.group(1).rstrip(".")
            if not loopback(host) and host not in NOT_HOSTS:
                return host
    return None


def failure(text: str | None, reached: list[str] | None = None) -> str | None:
    """The host (or "" when none can be named) when `text` is a network failure, else None. `reached`: the
    hosts outside loopback the candidate's code tried to reach, first first (autoenv.child.netwatch)."""
    text = text or ""
    named = host_in(text)
    if RESOLVER.search(text):
        return named or (HUB_HOST if hub(text) else (reached or [""])[0])
    if UNREACHED.search(text):
        return named or HUB_HOST
    if CONNECT.search(text) and named:
        return named
    for pattern, host in FETCHED_ON_USE.items():
        if pattern.search(text):
            return (reached or [host])[0]
    return None


def hub(text: str | None) -> bool:
    """Whether a network failure is the Hugging Face Hub's (a dataset, model or Space fetched by name)."""
    return bool(HUB.search(text or ""))


def reason(host: str) -> str:
    """A probe's untested reason: `needs network: HOST` (the host when it could be found)."""
    return f"{NEEDS_NETWORK}: {host or 'a host outside this machine'}"


def advice(host: str, what: str = "the environment", hub_data: bool = False) -> str:
    """What to do about a network the sandbox does not give, for people: ship it, or evaluate with the network."""
    where = host or "a host outside this machine"
    ship = ("ship the data with the package (save the split as a file the loader reads, e.g. "
            "`Dataset.to_json` then `load_dataset(\"json\", data_files=...)` on the shipped file)"
            if hub_data else "ship what it fetches with the package (data as files, a tool server as a module "
            "the env starts on loopback)")
    return (f"{what} needs network: {where}, and the sandbox gives the candidate's code loopback only. This is "
            f"not the reward being wrong: the probes that reached it are untested, neither failed nor passed. "
            f"To test it here, {ship}; or, if the env is meant to reach the network, evaluate it where the "
            f"network is allowed ({SANDBOX_VAR}=none runs the candidate's code unconfined)")
