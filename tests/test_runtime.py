"""autoenv/child/runtime.py and config.toml's [runtime]: verifiers' runtimes validated, harness chosen, missing parts named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from test_config import at, cfg, load_error  # noqa: F401  (cfg is a fixture)

from autoenv.child import runtime
from autoenv.core import runtimes
from autoenv.core.config import check_runtime_ready, load_config
from autoenv.core.errors import AutoEnvError


def with_runtime(cfg, body: str) -> Path:
    """The shipped config with its [runtime] table replaced by `body`."""
    text = Path(cfg()).read_text()
    start = text.index("[runtime]")
    end = text.index("\n[", start + 1)
    path = Path(cfg())
    path.write_text(text[:start] + body.strip() + "\n" + text[end:])
    return path


def test_shipped_runtime_is_subprocess_with_the_inprocess_harness(cfg):
    config = load_config(cfg())
    assert (config.runtime.type, config.runtime.harness) == ("subprocess", "inprocess")
    assert config.runtime.job() == {"type": "subprocess", "harness": "inprocess", "settings": {}, "warm_seconds": 600}


def test_docker_settings_pass_through_to_the_job(cfg):
    path = with_runtime(cfg, '[runtime]\ntype = "docker"\nharness = "stock"\n[runtime.docker]\nimage = "python:3.12-slim"\ncpu = 2.0\n')
    job = load_config(path).runtime.job()
    assert job == {"type": "docker", "harness": "stock", "settings": {"image": "python:3.12-slim", "cpu": 2.0},
                   "warm_seconds": 600}
    assert runtime.seat_runtime(job) == {"type": "docker", "image": "python:3.12-slim", "cpu": 2.0}


@pytest.mark.parametrize("kind, key, value, words", [
    ("docker", "imagee", '"x"', "not a setting of verifiers' docker runtime"),
    ("modal", "cpu", '"two"', "valid number"),
    ("prime", "memroy", "4", "not a setting of verifiers' prime runtime"),
    ("e2b", "bogus", "1", "not a setting of verifiers' e2b runtime"),
])
def test_a_bad_runtime_setting_names_its_line(cfg, kind, key, value, words):
    path = with_runtime(cfg, f'[runtime]\ntype = "{kind}"\n[runtime.{kind}]\n{key} = {value}\n')
    e = load_error(path)
    assert f"runtime.{kind}.{key}" in e.what and words in e.what
    assert e.where == at(path, rf"^{key} = ")


def test_unknown_runtime_type_and_harness_are_rejected(cfg):
    e = load_error(with_runtime(cfg, '[runtime]\ntype = "kubernetes"\n'))
    assert "runtime.type" in e.what and "subprocess, docker, podman, modal, prime, e2b" in e.what
    path = with_runtime(cfg, '[runtime]\nharness = "fast"\n')
    e = load_error(path)
    assert "inprocess, stock" in e.what and e.where == at(path, r'^harness = "fast"')


def test_settings_for_the_subprocess_runtime_are_rejected():
    assert runtimes.settings_problems("subprocess", {"image": "x"}) == [
        ("image", "is not a setting of the subprocess runtime (it has none)")]


def test_a_settings_table_must_be_a_table(cfg):
    path = with_runtime(cfg, '[runtime]\ndocker = 3\n')
    assert "must be a table" in load_error(path).what


def test_harness_choice():
    assert runtime.choose_harness(None) == ("autoenv-inprocess", None)
    assert runtime.choose_harness({"type": "subprocess", "harness": "stock"}) == ("null", None)
    harness, note = runtime.choose_harness({"type": "docker", "harness": "inprocess"})
    assert harness == "null" and "subprocess runtime" in note and "docker" in note


def test_missing_chat_program_falls_back_to_stock_with_one_line(monkeypatch):
    from autoenv.child import inprocess

    monkeypatch.setattr(inprocess, "unavailable_reason", lambda: "the installed verifiers has no null harness")
    harness, note = runtime.choose_harness({"type": "subprocess", "harness": "inprocess"})
    assert harness == "null" and "\n" not in note and "no null harness" in note


@pytest.mark.parametrize("kind, env, words", [
    ("modal", {}, "modal"), ("e2b", {}, "e2b"), ("prime", {}, "prime"),
])
def test_missing_client_library_or_credentials_say_what_where_fix(tmp_path, monkeypatch, kind, env, words):
    for var in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "E2B_API_KEY", "PRIME_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.modal.toml, no prime login
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "none.toml"))
    config = tmp_path / "config.toml"
    config.write_text(f'seed = 1\n[runtime]\ntype = "{kind}"\n')
    with pytest.raises(AutoEnvError) as info:
        check_runtime_ready(kind, config)
    e = info.value
    assert words in e.what and e.where == f"{config}:3 (runtime.type)" and e.fix
    library = {"modal": "modal", "e2b": "e2b", "prime": "prime_sandboxes"}[kind]
    if importlib.util.find_spec(library) is None:
        assert "not installed" in e.what and "pip install" in e.fix
    else:
        assert "not installed" not in e.what


def test_docker_without_its_cli_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    config = tmp_path / "config.toml"
    config.write_text('[runtime]\ntype = "docker"\n')
    with pytest.raises(AutoEnvError) as info:
        check_runtime_ready("docker", config)
    assert "`docker` CLI" in info.value.what and "subprocess" in info.value.fix


def test_subprocess_is_always_ready(tmp_path):
    check_runtime_ready("subprocess", tmp_path / "config.toml")
