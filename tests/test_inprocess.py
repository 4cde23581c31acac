"""autoenv/child/inprocess.py: how the in-process chat program ends becomes the ProgramResult a process would give."""

from __future__ import annotations

import asyncio
import os
import socket

import harness_pair
import pytest

from autoenv.child import inprocess
from autoenv.core.messages import Reply
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class _Fixed:
    def next_message(self, messages, key=None):
        return Reply(content="<answer>7</answer>")

    def task_key(self, messages, key=None):
        return "k"


def test_the_installed_verifiers_has_what_it_needs():
    assert inprocess.unavailable_reason() is None
    from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE

    assert inprocess.program().__name__ == "autoenv_chat_program"
    assert "async def main()" in CHAT_PROGRAM_SOURCE  # the very text the stock harness runs


def test_a_verifiers_lacking_the_chat_program_is_reported(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "verifiers.v1.harnesses.utils.launch", None)
    assert "no null harness chat program" in inprocess.unavailable_reason()


def hold_clients(monkeypatch) -> list:
    return harness_pair.hold_clients(monkeypatch.setattr)


def test_a_normal_end_is_exit_0_and_every_client_is_closed(monkeypatch):
    held = hold_clients(monkeypatch)

    async def go():
        async with Endpoint(Policies(_Fixed())) as ep:
            before = open_fds()
            results = await asyncio.gather(*(inprocess.run_program(
                [f"--base-url={ep.base_url}", "--api-key=x", "--model=oracle", f"--prompt=q{i}"]) for i in range(20)))
            await asyncio.sleep(0.2)
            return results, before, open_fds()

    results, before, after = asyncio.run(go())
    assert [r.exit_code for r in results] == [0] * 20 and all(r.stderr == "" for r in results)
    assert len(held) == 20 and all(client.is_closed() for client in held)
    assert after <= before


def test_an_unreachable_model_is_exit_97_with_the_transport_traceback():
    result = asyncio.run(inprocess.run_program(
        [f"--base-url=http://127.0.0.1:{closed_port()}/v1", "--api-key=x", "--model=m", "--prompt=hi"]))
    assert result.exit_code == 97
    assert "Traceback" in result.stderr and "APIConnectionError" in result.stderr


def test_an_uncaught_error_is_exit_1_with_its_traceback(tmp_path):
    missing = tmp_path / "no-such-messages.json"
    result = asyncio.run(inprocess.run_program(
        ["--base-url=http://127.0.0.1:9/v1", "--api-key=x", "--model=m", f"--initial-messages-file={missing}"]))
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback") and "FileNotFoundError" in result.stderr


def test_bad_arguments_exit_2_like_argparse_and_leave_sys_argv_alone():
    import sys

    saved = list(sys.argv)
    result = asyncio.run(inprocess.run_program(["--api-key=x"]))
    assert result.exit_code == 2 and sys.argv == saved


def test_each_rollout_parses_its_own_argv():
    seen = []

    async def go():
        async with Endpoint(Policies(_Fixed())) as ep:
            await asyncio.gather(*(inprocess.run_program(
                [f"--base-url={ep.base_url}", "--api-key=x", f"--model=model-{i}", "--prompt=p"]) for i in range(5)))
            seen.extend(sorted(k for k in ep.counts if k.startswith("model:")))

    asyncio.run(go())
    assert seen == [f"model:model-{i}" for i in range(5)]


def test_a_relative_initial_messages_file_is_read_from_the_runtime_workdir(tmp_path):
    import json

    (tmp_path / "m.json").write_text(json.dumps([{"role": "user", "content": "hello"}]))

    async def go():
        async with Endpoint(Policies(_Fixed())) as ep:
            return await inprocess.run_program(
                [f"--base-url={ep.base_url}", "--api-key=x", "--model=oracle", "--initial-messages-file=m.json"], tmp_path)

    assert asyncio.run(go()).exit_code == 0
    assert not (tmp_path / "m.json").exists()  # the program consumes it, as it does as a process


@pytest.mark.parametrize("code, expected", [(None, 0), (3, 3), ("bye", 1)])
def test_system_exit_codes_map_like_the_interpreter(monkeypatch, code, expected):
    module = inprocess.program()

    async def exits():
        raise SystemExit(code)

    monkeypatch.setattr(module, "main", exits)
    result = asyncio.run(inprocess.run_program([]))
    assert result.exit_code == expected and (("bye" in result.stderr) == (code == "bye"))
