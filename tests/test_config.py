"""autoenv/core/config.py: the shipped config loads, and every mistake names its key and line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from autoenv.core.config import Config, load_config, locate_key
from autoenv.core.errors import AutoEnvError

SHIPPED = Path(__file__).resolve().parents[1] / "config.toml"


@pytest.fixture
def cfg(tmp_path):
    """Factory: a copy of the shipped config.toml in tmp_path, edited by `replace` pairs."""

    def make(*edits: tuple[str, str], append: str = "", name: str = "config.toml") -> Path:
        text = SHIPPED.read_text()
        for old, new in edits:
            assert old in text, f"test setup: {old!r} not in the shipped config"
            text = text.replace(old, new, 1)
        path = tmp_path / name
        path.write_text(text + append)
        return path

    return make


def load_error(path: Path) -> AutoEnvError:
    with pytest.raises(AutoEnvError) as info:
        load_config(path)
    return info.value


def at(path: Path, pattern: str) -> str:
    """The `where` expected for the first line matching `pattern`: "<path>:<line>"."""
    return f"{path}:{line_of(path, pattern)}"


def line_of(path: Path, pattern: str) -> int:
    """1-based line number of the first line matching `pattern` (regex)."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if re.search(pattern, line):
            return number
    raise AssertionError(f"{pattern!r} not in {path}")


# --- the shipped file ----------------------------------------------------------------


def test_shipped_config_loads_with_expected_values(tmp_path):
    path = tmp_path / "config.toml"
    shutil.copy(SHIPPED, path)
    c = load_config(path)
    assert isinstance(c, Config)
    assert c.seed == 20261121
    assert c.target.model == "gpt-4.1-mini"
    assert c.target.base_url == "https://api.openai.com/v1"
    assert c.target.api_key_var == "OPENAI_API_KEY"
    assert c.target.sampling.temperature == 0.7
    assert c.target.sampling.max_tokens == 1024
    assert c.target.sampling.top_p is None
    assert c.strong.model == "gpt-4.1"
    assert c.strong.sampling.max_tokens == 2048
    assert c.budget.examples == 40
    assert c.budget.rollouts_per_example == 4
    assert c.budget.max_concurrent == 8
    assert c.budget.rollout_timeout == 300.0
    assert isinstance(c.budget.rollout_timeout, float)  # int in the file, float in the object
    assert c.budget.max_turns == 10
    assert (c.bands.target_min, c.bands.target_max) == (0.2, 0.7)
    assert c.bands.strong_min == 0.7
    assert c.bands.solve_threshold == 1.0
    assert c.bands.max_env_error_rate == 0.05
    assert c.verdict.confidence == 0.97
    assert c.target.price.input == 0.0
    assert c.offline.target == "noisy-oracle:0.45"
    assert c.offline.strong == "oracle"
    assert c.paths.log_file == "feedback_log.jsonl"
    assert c.root == tmp_path.resolve()
    assert c.models() == {"target": c.target, "strong": c.strong}


def test_path_resolves_relative_to_the_config_directory(tmp_path, monkeypatch):
    sub = tmp_path / "deep" / "dir"
    sub.mkdir(parents=True)
    shutil.copy(SHIPPED, sub / "config.toml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # A relative path to the file: root must still be the file's directory, absolute.
    c = load_config(Path("../deep/dir/config.toml"))
    assert c.root == sub.resolve()
    assert c.root.is_absolute()
    assert c.path("candidate") == sub.resolve() / "candidate"
    assert c.path("log_file") == sub.resolve() / "feedback_log.jsonl"
    assert c.path("outputs") == sub.resolve() / "outputs"


def test_custom_paths_are_resolved_too(cfg):
    path = cfg(('outputs = "outputs"', 'outputs = "runs/out"'))
    c = load_config(path)
    assert c.path("outputs") == path.parent.resolve() / "runs" / "out"


# --- file and syntax errors -----------------------------------------------------------


def test_missing_file_names_the_path_and_suggests_config_flag(tmp_path):
    missing = tmp_path / "nope" / "config.toml"
    e = load_error(missing)
    assert e.where == str(missing)
    assert "--config" in e.fix
    assert str(missing) in e.what


def test_a_directory_is_not_a_config_file(tmp_path):
    e = load_error(tmp_path)
    assert e.where == str(tmp_path)


def test_invalid_toml_reports_the_broken_line(cfg):
    path = cfg(("examples = 40", "examples = 40 24"))
    e = load_error(path)
    broken = line_of(path, r"^examples = 40 24")
    assert e.where.endswith(f":{broken}")
    assert e.where.startswith(str(path))
    assert "not valid TOML" in e.what


def test_invalid_toml_unquoted_string(cfg):
    path = cfg(('model = "gpt-4.1"', "model = gpt-4.1"))
    e = load_error(path)
    assert e.where == at(path, r"^model = gpt-4.1$")


# --- unknown keys ---------------------------------------------------------------------


def test_unknown_key_is_named_located_and_corrected(cfg):
    path = cfg(("examples = 40", "exampels = 24"))
    e = load_error(path)
    assert "budget.exampels" in e.what
    assert e.where == at(path, r"^exampels = 24")
    assert "budget.examples" in e.fix


def test_unknown_key_in_a_nested_table(cfg):
    path = cfg(("max_tokens = 2048", "max_tokenz = 2048"))
    e = load_error(path)
    assert "strong.sampling.max_tokenz" in e.what
    assert e.where == at(path, r"^max_tokenz")
    assert "strong.sampling.max_tokens" in e.fix


def test_unknown_top_level_table(cfg):
    path = cfg(append="\n[extras]\nfoo = 1\n")
    e = load_error(path)
    assert "`extras`" in e.what
    assert e.where == at(path, r"^\[extras\]")
    # The known top-level keys are listed so the user sees what is allowed.
    for known in ("budget", "bands", "target", "strong", "paths", "seed"):
        assert known in e.fix


def test_unknown_key_without_a_close_match_lists_known_keys(cfg):
    path = cfg(('log_file = "feedback_log.jsonl"', 'log_file = "feedback_log.jsonl"\nzzz = 1'))
    e = load_error(path)
    assert "paths.zzz" in e.what
    assert "did you mean" not in e.fix
    assert "log_file" in e.fix


# --- types ----------------------------------------------------------------------------


def test_wrong_type_names_key_line_and_expected_type(cfg):
    path = cfg(("examples = 40", 'examples = "ten"'))
    e = load_error(path)
    assert "budget.examples" in e.what
    assert "an integer" in e.what
    assert e.where == at(path, r"^examples = .ten.")


def test_bool_is_not_accepted_as_int(cfg):
    path = cfg(("max_turns = 10", "max_turns = true"))
    e = load_error(path)
    assert "budget.max_turns" in e.what
    assert "an integer" in e.what
    assert e.where == at(path, r"^max_turns = true")


def test_bool_is_not_accepted_as_float(cfg):
    path = cfg(("strong_min = 0.7", "strong_min = false"))
    e = load_error(path)
    assert "bands.strong_min" in e.what
    assert "a number" in e.what


def test_float_is_not_accepted_as_int(cfg):
    path = cfg(("seed = 20261121", "seed = 1.5"))
    e = load_error(path)
    assert "`seed`" in e.what
    assert "an integer" in e.what
    assert e.where == at(path, r"^seed = 1.5")


def test_int_is_accepted_for_float(cfg):
    path = cfg(("solve_threshold = 1.0", "solve_threshold = 1"), ("temperature = 0.7", "temperature = 1"))
    c = load_config(path)
    assert c.bands.solve_threshold == 1.0 and isinstance(c.bands.solve_threshold, float)
    assert c.target.sampling.temperature == 1.0 and isinstance(c.target.sampling.temperature, float)


def test_optional_float_accepts_a_number(cfg):
    path = cfg(("max_tokens = 1024", "max_tokens = 1024\ntop_p = 0.9"))
    assert load_config(path).target.sampling.top_p == 0.9


def test_a_scalar_where_a_table_belongs(cfg):
    path = cfg(append="")
    text = path.read_text()
    # Replace the whole [budget] table by a scalar top-level key `budget = 3`.
    text = re.sub(r"(?ms)^\[budget\].*?(?=^\[bands\])", "", text)
    path.write_text("budget = 3\n" + text)
    e = load_error(path)
    assert "budget" in e.what and "table" in e.what
    assert e.where == f"{path}:1"


# --- ranges ---------------------------------------------------------------------------


def test_examples_zero_is_rejected(cfg):
    path = cfg(("examples = 40", "examples = 0"))
    e = load_error(path)
    assert "budget.examples" in e.what and "at least 1" in e.what
    assert e.where == at(path, r"^examples = 0")


def test_rollout_timeout_must_be_positive(cfg):
    e = load_error(cfg(("rollout_timeout = 300", "rollout_timeout = 0")))
    assert "budget.rollout_timeout" in e.what


def test_target_min_must_be_below_target_max(cfg):
    e = load_error(cfg(("target_min = 0.2", "target_min = 0.7")))  # equal to target_max
    assert "bands.target_min" in e.what
    assert "target_max" in e.what


def test_target_min_above_target_max(cfg):
    e = load_error(cfg(("target_min = 0.2", "target_min = 0.9")))
    assert "bands.target_min" in e.what


def test_temperature_out_of_range(cfg):
    path = cfg(("temperature = 0.7", "temperature = 3"))
    e = load_error(path)
    assert "target.sampling.temperature" in e.what
    assert "between 0 and 2" in e.what
    assert e.where == at(path, r"^temperature = 3")


def test_top_p_zero_is_rejected(cfg):
    e = load_error(cfg(("max_tokens = 2048", "max_tokens = 2048\ntop_p = 0")))
    assert "strong.sampling.top_p" in e.what


def test_base_url_needs_a_scheme(cfg):
    e = load_error(cfg(('base_url = "https://api.openai.com/v1"', 'base_url = "api.openai.com/v1"')))
    assert "target.base_url" in e.what
    assert "http" in e.what


def test_blank_model_is_rejected(cfg):
    e = load_error(cfg(('model = "gpt-4.1"', 'model = "  "')))
    assert "strong.model" in e.what


# --- api_key_var ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "sk-abc123DEF456ghi789JKL",
        "sk_live_abcdef0123456789",
        "ghp_0123456789abcdefABCDEF0123456789abcd",
        "AKIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9.payload.sig",
        "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7",  # 34 chars of random-looking token
    ],
)
def test_a_secret_in_api_key_var_is_rejected_without_echoing_it(cfg, secret):
    path = cfg(('api_key_var = "OPENAI_API_KEY"', f'api_key_var = "{secret}"'))
    e = load_error(path)
    assert "target.api_key_var" in e.what
    assert "secret" in e.what
    for text in (str(e), e.what, e.where or "", e.fix or "", repr(e), repr(e.args)):
        assert secret not in text
    # Nor a recognisable chunk of it.
    assert secret[:12] not in str(e)


def test_empty_api_key_var_is_allowed(cfg):
    c = load_config(cfg(('api_key_var = "OPENAI_API_KEY"', 'api_key_var = ""')))
    assert c.target.api_key_var == ""
    assert c.strong.api_key_var == "OPENAI_API_KEY"


def test_api_key_var_must_be_a_variable_name(cfg):
    e = load_error(cfg(('api_key_var = "OPENAI_API_KEY"', 'api_key_var = "MY KEY"')))
    assert "target.api_key_var" in e.what
    assert "environment variable name" in e.what


def test_a_long_upper_snake_variable_name_is_not_a_secret(cfg):
    name = "AZURE_OPENAI_API_KEY_PRODUCTION_EU"
    assert len(name) >= 32
    c = load_config(cfg(('api_key_var = "OPENAI_API_KEY"', f'api_key_var = "{name}"')))
    assert c.target.api_key_var == name


# --- required keys --------------------------------------------------------------------


def test_missing_required_target_model(cfg):
    path = cfg(('model = "gpt-4.1-mini"\n', ""))
    e = load_error(path)
    assert "target.model" in e.what
    assert "[target]" in e.where
    assert "model = " in e.fix


def test_missing_required_strong_table(cfg):
    path = cfg(append="")
    text = re.sub(r"(?ms)^\[strong\].*?(?=^\[budget\])", "", path.read_text())
    path.write_text(text)
    e = load_error(path)
    assert "`strong`" in e.what


def test_optional_tables_fall_back_to_defaults(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[target]\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
        '[strong]\nmodel = "s"\nbase_url = "http://127.0.0.1:1/v1"\n'
    )
    c = load_config(path)
    assert c.seed == 0
    assert c.budget.examples == 40
    assert c.target.api_key_var == ""
    assert c.offline.strong == "oracle"


# --- locate_key and line numbers of the shipped layout -------------------------------


def test_locate_key_finds_keys_and_table_headers():
    lines = [
        "seed = 1",
        "[budget]",
        "examples = 3",
        "[target.sampling]",
        "temperature = 0.5",
        "[strong]",
        "sampling.temperature = 0.1",
    ]
    assert locate_key(lines, "seed") == 1
    assert locate_key(lines, "budget") == 2
    assert locate_key(lines, "budget.examples") == 3
    assert locate_key(lines, "target.sampling") == 4
    assert locate_key(lines, "target.sampling.temperature") == 5
    assert locate_key(lines, "strong.sampling.temperature") == 7
    assert locate_key(lines, "budget.max_turns") is None
    assert locate_key(lines, "examples") is None  # a key of [budget], not a top-level key


def test_errors_in_tables_with_commented_headers_carry_the_line(cfg):
    path = cfg(("target_min = 0.2", "target_min = 0.9"))
    e = load_error(path)
    assert e.where == at(path, r"^target_min = 0.9")


def test_locate_key_with_a_commented_table_header():
    lines = ["[target]   # the model", 'model = "m"']
    assert locate_key(lines, "target.model") == 2


def test_one_rollout_per_example_is_rejected_with_the_reason(tmp_path):
    path = tmp_path / "config.toml"
    text = SHIPPED.read_text()
    path.write_text(text.replace("rollouts_per_example = 4", "rollouts_per_example = 1"))
    with pytest.raises(AutoEnvError) as caught:
        load_config(path)
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if l.startswith("rollouts_per_example"))
    assert caught.value.where.endswith(f":{line}")
    assert "at least 2" in str(caught.value) and "GRPO" in str(caught.value)


def test_price_table_is_validated(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(SHIPPED.read_text().replace("[target.sampling]", "[target.price]\ninput = -1\n\n[target.sampling]"))
    with pytest.raises(AutoEnvError, match="target.price.input"):
        load_config(path)
