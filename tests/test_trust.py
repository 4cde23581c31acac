"""The child's TLS trust as a hashed folder (autoenv.sandbox.trust): the same certificates, verified the same way,
without parsing a bundle for every HTTP client. Real certificates made with `openssl`, real handshakes on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from autoenv.sandbox import trust

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl here to make certificates with")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def authority(folder: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout",
            f"{name}.key", "-out", f"{name}.pem", cwd=folder)


def server_cert(folder: Path, ca: str, name: str) -> None:
    """A certificate for 127.0.0.1 signed by the authority `ca`."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", cwd=folder)
    (folder / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=folder)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("certs")
    for name in ("trusted-ca", "other-ca", "unknown-ca"):
        authority(folder, name)
    server_cert(folder, "trusted-ca", "good")
    server_cert(folder, "unknown-ca", "bad")
    (folder / "bundle.pem").write_text((folder / "trusted-ca.pem").read_text() + (folder / "other-ca.pem").read_text())
    return folder


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def https(certs):
    """`serve(name)`: an HTTPS server on 127.0.0.1 with the certificate `name`; its URL."""
    servers = []

    def serve(name: str) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certs / f"{name}.pem", certs / f"{name}.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"https://127.0.0.1:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


CLIENT = """
import json, sys, httpx, httpx2
out = {}
for name, module in (("httpx", httpx), ("httpx2", httpx2)):
    try:
        out[name] = module.get(sys.argv[1], timeout=20).text
    except Exception as e:
        out[name] = "CERTIFICATE_VERIFY_FAILED" if "CERTIFICATE_VERIFY_FAILED" in repr(e) else repr(e)
print(json.dumps(out))
"""


def fetch(url: str, env: dict[str, str]) -> dict[str, str]:
    """What httpx and httpx2 (the chat program's and MCP's clients) get from `url` in a process with `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SSL_CERT_")}
    proc = subprocess.run([sys.executable, "-c", CLIENT, url], env={**base, **env}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_folder_holds_the_bundles_certificates_linked_by_hash_and_is_built_once(certs, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    folder = trust.hashed_folder(certs / "bundle.pem")
    assert folder is not None and folder.parent == tmp_path / "cache" / "trust"
    linked = sorted(p.name for p in folder.iterdir() if p.is_symlink())
    assert len(linked) == 2 and all(name.endswith(".0") for name in linked), linked
    assert (folder / "DONE").read_text().startswith("2 certificates of ")
    stamp = (folder / "DONE").stat().st_mtime_ns
    assert trust.hashed_folder(certs / "bundle.pem") == folder and (folder / "DONE").stat().st_mtime_ns == stamp
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no partial folder left behind


@pytest.mark.slow
def test_a_client_given_the_folder_trusts_exactly_what_the_bundle_trusted(certs, https, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    bundle_env = {"SSL_CERT_FILE": str(certs / "bundle.pem")}
    folder_env = trust.folder_trust(dict(bundle_env))
    assert "SSL_CERT_FILE" not in folder_env
    assert folder_env["SSL_CERT_DIR"] == str(trust.hashed_folder(certs / "bundle.pem"))
    good, bad = https("good"), https("bad")
    for env in (bundle_env, folder_env):
        assert fetch(good, env) == {"httpx": "ok", "httpx2": "ok"}, env
        assert fetch(bad, env) == {"httpx": "CERTIFICATE_VERIFY_FAILED", "httpx2": "CERTIFICATE_VERIFY_FAILED"}, env


def test_a_folder_the_environment_named_stays_trusted_after_ours(certs, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    env = trust.folder_trust({"SSL_CERT_FILE": str(certs / "bundle.pem"), "SSL_CERT_DIR": str(theirs)})
    assert env["SSL_CERT_DIR"] == f"{trust.hashed_folder(certs / 'bundle.pem')}{os.pathsep}{theirs}"


def test_without_openssl_or_a_readable_bundle_the_environment_is_left_as_it_was(certs, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    env = {"SSL_CERT_FILE": str(certs / "bundle.pem"), "PATH": "/usr/bin"}
    assert trust.folder_trust(dict(env)) == env
    monkeypatch.undo()
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    missing = {"SSL_CERT_FILE": str(tmp_path / "nowhere.pem")}
    assert "SSL_CERT_DIR" not in trust.folder_trust(dict(missing))
    (tmp_path / "empty.pem").write_text("no certificate here\n")
    assert trust.hashed_folder(tmp_path / "empty.pem") is None
    trusted = (certs / "trusted-ca.pem").read_text().replace("CERTIFICATE-----", "TRUSTED CERTIFICATE-----")
    (tmp_path / "mixed.pem").write_text((certs / "other-ca.pem").read_text() + trusted)
    assert trust.hashed_folder(tmp_path / "mixed.pem") is None  # its trusted block would be lost in a folder


def test_the_child_takes_certifis_folder_only_when_it_holds_certifis_own_bundle(certs, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOENV_CACHE", str(tmp_path / "cache"))
    env = trust.folder_trust({})
    bundle = trust.certifi_bundle()
    assert bundle is not None and env[trust.CERTIFI_FOLDER] == str(trust.hashed_folder(bundle))
    assert trust.certified_folder(env, str(bundle)) == env[trust.CERTIFI_FOLDER]
    assert trust.certified_folder(env, str(certs / "bundle.pem")) is None  # another bundle: not its folder
    assert trust.certified_folder({}, str(bundle)) is None


@pytest.mark.slow
def test_the_in_process_chat_program_verifies_with_certifis_folder(tmp_path):
    """The in-process harness's program (verifiers' own source) sees `certifi.where()` name the folder."""
    cache = tmp_path / "cache"
    script = (
        "import os, json\n"
        "from autoenv.sandbox import trust\n"
        "os.environ.update(trust.folder_trust({}))\n"
        "from autoenv.child.inprocess import program\n"
        "module = program()\n"
        "print(json.dumps({'where': module.certifi.where(), 'folder': os.environ[trust.CERTIFI_FOLDER]}))\n")
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "AUTOENV_CACHE": str(cache)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    assert said["where"] == said["folder"] and Path(said["where"]).parent == cache / "trust"
