"""A network failure inside the sandbox is one infrastructure outcome, `needs network: HOST`, not N reward errors.

The real shapes: a reward that asks a service on the internet (tests/data/remote-check, verifiers' deepwiki
design) probed through the real CLI in the bubblewrap sandbox, which has loopback only; a loader that fetches
its data from the Hugging Face Hub (tests/data/hub-loader, verifiers' reverse_text design). And the error
excerpt: a traceback cut for a finding keeps its last lines, where it says what finally went wrong.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoenv.core.formats import excerpt
from autoenv.core.paths import PROJECT, shown
from autoenv.evaluation.verdict import decide
from autoenv.gates.rules import Gates, judge_probes
from autoenv.sandbox.confine import _probe
from autoenv.sandbox.network import failure
from tests.audits import probe_records, rec
from tests.conftest import autoenv, small_config
from tests.test_gates import CONFIG
from tests.test_verdict import BANDS, counts, entry, stats

DATA = PROJECT / "tests" / "data"
needs_bwrap = pytest.mark.skipif(_probe().kind != "bwrap", reason=f"no bubblewrap sandbox here: {_probe().reason}")

# what verifiers recorded for deepwiki's rollouts in the sandbox: the harness's stderr, cut by verifiers to its
# tail, so the message starts mid-traceback; the old excerpt kept its first 500 characters and lost the last line
HARNESS_FAILED = (
    "HarnessError: harness 'autoenv-inprocess' exited 1: te-packages/mcp/client/streamable_http.py\", line 323, in "
    "_handle_post_request\n    |     async with ctx.client.stream(\n"
    + "".join(f"    |   File \"/venv/lib/python3.11/site-packages/httpx/_client.py\", line {1600 + i}, in send\n"
              f"    |     response = await self._send_handling_auth(\n    |                ^^^^^^^^^^^^^^^^^^^^^\n"
              for i in range(8))
    + "    |     raise mapped_exc(message) from exc\n"
    "    | httpx.ConnectError: [Errno -3] Temporary failure in name resolution\n    +------------------------------------\n")


def test_an_excerpt_keeps_the_first_line_and_the_last_lines_whole():
    cut = excerpt(HARNESS_FAILED, 500)
    assert len(cut) <= 520
    assert cut.startswith("HarnessError: harness 'autoenv-inprocess' exited 1")
    assert cut.endswith("httpx.ConnectError: [Errno -3] Temporary failure in name resolution")
    assert "raise mapped_exc(message) from exc" in cut and "\n…\n" in cut and "+----" not in cut
    assert "Temporary failure" not in HARNESS_FAILED[:500]  # what the old cut kept
    assert excerpt("ValueError: short", 500) == "ValueError: short"
    one_line = "RuntimeError: " + " ".join(f"word{i}" for i in range(200)) + " the end"
    assert excerpt(one_line, 200).endswith("the end") and excerpt(one_line, 200).startswith("RuntimeError: word0")


def test_network_failures_are_recognised_and_their_host_named():
    assert failure("ConnectError: [Errno -3] Temporary failure in name resolution", ["api.example.invalid"]) == \
        "api.example.invalid"  # httpx names no host: the one the child saw the code reach
    assert failure("socket.gaierror: [Errno -2] Name or service not known") == ""  # a failure, no host to name
    assert failure("OSError: [Errno 101] Network is unreachable") == ""
    assert failure("ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded "
                   "(Caused by NameResolutionError(\"Failed to resolve 'huggingface.co'\"))") == "huggingface.co"
    assert failure("ConnectionError: Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)") == \
        "huggingface.co"
    assert failure("aiohttp.ClientConnectorError: Cannot connect to host mcp.deepwiki.com:443 ssl:default "
                   "[Connection refused]") == "mcp.deepwiki.com"
    # a refused connection on this machine (a local tool server that is down) is the env's own error
    assert failure("ConnectionRefusedError: [Errno 111] Connection refused (http://127.0.0.1:8000/mcp)") is None
    assert failure("httpx.ConnectError: All connection attempts failed", ["localhost"]) is None
    assert failure("ValueError: bad move") is None and failure(None) is None
    # data a library downloads on first use: a failed nltk.download only prints, and the read after it says missing
    nltk = ("LookupError: \n  Resource words not found.\n  Please use the NLTK Downloader to obtain the resource:\n"
            "  >>> import nltk\n  >>> nltk.download('words')")
    assert failure(nltk) == "raw.githubusercontent.com" and failure(nltk, ["nltk.example"]) == "nltk.example"
    assert failure("LookupError: no such key 'words'") is None


def test_probe_replies_cut_off_by_the_network_are_untested_not_reward_errors():
    cut = "ConnectError: [Errno -3] Temporary failure in name resolution"
    records = [rec(r["probe"], r["idx"], {}, {}, error=cut) for r in probe_records()]
    report = Gates()
    judge_probes({"probes": records, "reached_hosts": ["languages.example.invalid"]}, CONFIG, report)
    findings = {f.name: f for f in report.findings}
    assert not report.failed and "reward errors" not in findings
    network = findings["network"]
    assert network.status == "warn" and network.data["coverage"] == "untested"
    assert "needs network: languages.example.invalid" in network.message and "AUTOENV_SANDBOX=none" in network.message
    assert findings["oracle"].status == "skip" and "needs network: languages.example.invalid" in findings["oracle"].message
    assert any("needs network" in why for why in findings["probes tested"].data["untested"].values())
    untested = report.report().untested
    assert untested  # no keep on evidence the sandbox kept from the gates
    gain = decide(stats(counts(0.45)), BANDS, entry("k" * 40, stats(counts(0.05))), gates_untested=untested)
    assert gain.verdict == "inconclusive" and "not kept: the gates are untested" in gain.reason
    first = decide(stats(counts(0.45)), BANDS, None, run="autoenv/x", gates_untested=untested)
    assert first.verdict == "baseline" and "needs network" in first.reason  # the reference says it rests on nothing
    assert "rests on no model-free evidence" in first.reason
    mixed = [rec(r["probe"], r["idx"], {}, {}, error=cut if r["idx"] == 0 else "KeyError: 'answer'")
             for r in probe_records()]
    report = Gates()
    judge_probes({"probes": mixed}, CONFIG, report)
    assert any(f.startswith("reward errors") for f in report.failed)  # the env's own errors still fail
    assert "needs network: a host outside this machine" in {f.name: f for f in report.findings}["network"].message


def test_warnings_show_paths_under_the_run_root_or_the_project_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = f"{tmp_path}/outputs/x/audit.log and {PROJECT}/tests/data/env/README.md, not /etc/hosts"
    assert shown(text) == "outputs/x/audit.log and tests/data/env/README.md, not /etc/hosts"
    assert shown(f"/elsewhere{PROJECT}/a") == f"/elsewhere{PROJECT}/a"  # only a path that starts there


def probe_env(env: Path, cwd: Path, *args: str, **budget) -> tuple[dict, dict, str]:
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "config.toml").write_text(small_config(**budget))
    result = autoenv("probe", "--env", str(env), *args, cwd=cwd, env={"COLUMNS": "200"})
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-2000:]
    gates = max((cwd / "outputs" / "scratch").glob("*/gates/gates.json"), key=lambda p: p.stat().st_mtime)
    findings = {f["name"]: f for f in json.loads(gates.read_text())["findings"]}
    return findings, json.loads((gates.parent / "audit.json").read_text()), result.stdout


@needs_bwrap
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_reward_that_reaches_the_internet_needs_network_and_fails_nothing(tmp_path):
    """verifiers' deepwiki design: the env reaches a server on the internet. In the sandbox every call fails to
    resolve: one `network` finding naming the host, the probes untested, no reward error, no failed gate."""
    findings, audit, out = probe_env(DATA / "remote-check", tmp_path / "run", sample=4)
    assert "languages.example.invalid" in audit["reached_hosts"]
    assert not [f for f in findings.values() if f["status"] == "fail"], findings
    assert "reward errors" not in findings
    network = findings["network"]
    assert network["status"] == "warn" and network["data"]["hosts"] == ["languages.example.invalid"]
    assert network["message"].startswith("the env needs network: languages.example.invalid")
    assert findings["oracle"]["status"] == "skip" and findings["probes tested"]["data"]["coverage"] == "untested"
    assert "UNTESTED network: the env needs network: languages.example.invalid" in out
    assert str(PROJECT) + "/" not in out  # paths under the project are shown relative to it


@needs_bwrap
@pytest.mark.slow
def test_a_loader_that_needs_the_hub_says_so_and_what_to_do(tmp_path):
    """verifiers' reverse_text design: load() calls the Hub through `datasets` (or, without it installed, raises
    what `datasets.load_dataset` raises offline; tests/data/hub-loader)."""
    tmp_path.joinpath("config.toml").write_text(small_config())
    result = autoenv("check", "--env", str(DATA / "hub-loader"), cwd=tmp_path, env={"COLUMNS": "300"})
    said = " ".join(result.stderr.split())
    assert result.returncode != 0 and "the audit stage failed" not in said, said
    assert "the dataset needs the Hugging Face Hub (huggingface.co)" in said, said
    assert "fix: ship the data with the package" in said and "AUTOENV_SANDBOX=none" in said
    assert "where: tests/data/hub-loader/hub_loader/__init__.py:" in said


def test_the_host_a_connection_went_to_is_seen_from_inside():
    """The child's audit hook (autoenv.child.netwatch) keeps the hosts outside loopback the code tried to resolve
    or connect to, first first; the events are raised as the socket module raises them, so nothing is looked up."""
    code = ("import sys\nfrom autoenv.child import netwatch\nnetwatch.watch()\n"
            "sys.audit('socket.getaddrinfo', 'localhost', 443, 0, 0, 0)\n"
            "sys.audit('socket.getaddrinfo', 'api.example.invalid', 443, 0, 0, 0)\n"
            "sys.audit('socket.connect', None, ('127.0.0.1', 9))\n"
            "sys.audit('socket.connect', None, ('203.0.113.7', 443))\n"
            "sys.audit('socket.connect', None, '/tmp/forwarder.sock')\n"
            "print(netwatch.reached())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT,
                         env={**os.environ, "PYTHONPATH": str(PROJECT)}, timeout=60)
    assert out.stdout.strip() == "['api.example.invalid', '203.0.113.7']", out.stderr
