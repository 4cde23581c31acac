"""The child's TLS trust as a hashed certificate folder, so that an HTTP client costs no certificate parsing.

Every httpx client (openai's, MCP's: two or more a rollout) builds an SSL context when it is made, https or not.
Given a bundle file (SSL_CERT_FILE, or OpenSSL's own when no variable names one), OpenSSL parses every certificate
in it each time: about 25 ms a client here, 40% of a tool env's audit. Given a folder of certificates named by
their subject's hash (SSL_CERT_DIR), it reads none until a handshake needs one: 0.2 ms. So the child gets the same
certificates as such a folder, built once per bundle under the cache (`openssl rehash`), and SSL_CERT_FILE is
taken out of its environment; httpx and httpcore read SSL_CERT_FILE first and SSL_CERT_DIR next. A folder the
environment already named stays trusted after ours. Where no such folder can be built (no `openssl`, a bundle
that cannot be read), the environment is left as it was: slower, the same trust.

verifiers' chat program names certifi's bundle itself (`verify=certifi.where()`), which no variable changes. So the
folder of certifi's bundle is built too and named to the child (CERTIFI_FOLDER); the in-process harness gives the
program a `certifi.where()` that returns it (autoenv.child.inprocess), once `certified_folder` has checked that it
holds the very bundle the child's certifi names (the folder is named by the bundle's hash).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from autoenv.core.cachedir import cache_root

CERTIFI_FOLDER = "AUTOENV_CERTIFI_FOLDER"
PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.+?\r?\n-----END CERTIFICATE-----", re.S)
REHASH_SECONDS = 60


def trust_root() -> Path:
    """Where the folders are kept (shown read-only in the sandbox: public certificates only)."""
    return cache_root() / "trust"


def machine_bundle(env: Mapping[str, str]) -> Path | None:
    """The bundle file an SSL context made in `env` reads: SSL_CERT_FILE, else OpenSSL's compiled-in one."""
    named = env.get("SSL_CERT_FILE")
    if named:
        return Path(named) if Path(named).is_file() else None
    default = Path(ssl.get_default_verify_paths().openssl_cafile)
    return default if default.is_file() else None


def hashed_folder(bundle: Path) -> Path | None:
    """A folder holding `bundle`'s certificates, one a file, linked by subject hash (cached by the bundle's bytes);
    None where it cannot be built."""
    try:
        data = bundle.read_bytes()
    except OSError:
        return None
    folder = trust_root() / digest(data)
    if (folder / "DONE").is_file():  # built from these very bytes, which passed the checks below then
        return folder
    certificates = PEM.findall(data)
    openssl = shutil.which("openssl")
    if not certificates or len(certificates) != data.count(b"-----BEGIN ") or openssl is None:
        return None  # a block of another kind (a TRUSTED CERTIFICATE, a CRL) would be lost: the bundle stays
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    try:
        for i, pem in enumerate(certificates):
            (partial / f"cert-{i:04d}.pem").write_bytes(pem + b"\n")
        done = subprocess.run([openssl, "rehash", str(partial)], capture_output=True, timeout=REHASH_SECONDS)
        linked = [p for p in partial.iterdir() if re.fullmatch(r"[0-9a-f]{8}\.\d+", p.name)]
        if done.returncode != 0 or not linked:
            return None
        (partial / "DONE").write_text(f"{len(certificates)} certificates of {bundle}\n")
        try:
            partial.rename(folder)
        except OSError:  # another evaluation built it meanwhile: theirs is the same
            pass
        return folder if (folder / "DONE").is_file() else None
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:20]


def certifi_bundle() -> Path | None:
    """certifi's bundle as this venv has it (the child's venv is built on this one), or None without certifi."""
    spec = importlib.util.find_spec("certifi")
    if spec is None or spec.origin is None:
        return None
    bundle = Path(spec.origin).parent / "cacert.pem"
    return bundle if bundle.is_file() else None


def certified_folder(env: Mapping[str, str], bundle: str) -> str | None:
    """In the child: the folder CERTIFI_FOLDER names when it holds exactly `bundle`'s certificates, else None."""
    folder = env.get(CERTIFI_FOLDER)
    if not folder:
        return None
    try:
        same = Path(folder).name == digest(Path(bundle).read_bytes()) and (Path(folder) / "DONE").is_file()
    except OSError:
        return None
    return folder if same else None


def folder_trust(env: dict[str, str]) -> dict[str, str]:
    """`env` with its bundle file's trust given as a hashed folder (SSL_CERT_DIR first, SSL_CERT_FILE gone); `env`
    as it is when there is no bundle or no folder can be built."""
    out = dict(env)
    certifi = certifi_bundle()
    certifi_folder = hashed_folder(certifi) if certifi else None
    if certifi_folder is not None:
        out[CERTIFI_FOLDER] = str(certifi_folder)
    bundle = machine_bundle(env)
    folder = hashed_folder(bundle) if bundle else None
    if folder is not None:
        out.pop("SSL_CERT_FILE", None)
        out["SSL_CERT_DIR"] = os.pathsep.join(p for p in (str(folder), env.get("SSL_CERT_DIR", "")) if p)
    return out
