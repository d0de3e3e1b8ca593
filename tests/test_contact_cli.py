"""The CLI and config speak plainly (issue 17): version, one-line errors naming what to set, rules hints."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from toolshim import __version__
from toolshim.config.loading import lint, load_rules
from toolshim.config.rules import RulesError
from toolshim.config.settings import Settings, SettingsError, load_settings
from toolshim.server.workers import start_line

from tests.test_core_cli import run

UP = '{upstreams: {u: {base_url: "http://x/v1"%s}}, models: [%s]}'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.json5"
    path.write_text(text)
    return path


def rules_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(RulesError) as caught:
        load_rules(write(tmp_path, text))
    return str(caught.value)


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"toolshim {__version__}"


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--log-level", "verbose"], {}, "--log-level: unknown log level 'verbose'"),
        ([], {"TOOLSHIM_LOG_LEVEL": "chatty"}, "TOOLSHIM_LOG_LEVEL (or --log-level): unknown log level"),
        ([], {"TOOLSHIM_PORT": "eighty"}, "TOOLSHIM_PORT (or --port): "),
        (["--workers", "0"], {}, "--workers: "),
        (["--rules", "nope.json5"], {}, "--rules or TOOLSHIM_RULES"),
    ],
)
def test_operator_mistakes_are_one_line_and_exit_2(args: list[str], env: dict[str, str], says: str) -> None:
    result = run("serve", *args, env=env)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert (
        "Traceback" not in result.stderr and "pydantic" not in result.stderr and "validation error" not in result.stderr
    )


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    rules = write(tmp_path, UP % ("", '{match: "*", upstream: "u"}'))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--rules", str(rules), "--port", str(port))
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr and "--port (TOOLSHIM_PORT)" in result.stderr
    assert "Traceback" not in result.stderr


def test_settings_error_names_the_variable() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(env={"TOOLSHIM_MAX_BODY_BYTES": "12"})
    assert str(caught.value).startswith("TOOLSHIM_MAX_BODY_BYTES: ")


def test_unknown_key_suggests_the_closest(tmp_path: Path) -> None:
    message = rules_error(tmp_path, UP % ("", '{match: "*", upstream: "u", tool_mod: "hermes"}'))
    assert "models[0].tool_mod" in message and "did you mean `tool_mode`?" in message
    message = rules_error(tmp_path, UP % (", read_timout: 3", '{match: "*", upstream: "u"}'))
    assert "did you mean `read_timeout`?" in message


def test_api_key_points_to_api_key_env(tmp_path: Path) -> None:
    message = rules_error(tmp_path, UP % (', api_key: "sk-secret"', '{match: "*", upstream: "u"}'))
    assert "upstreams.u.api_key" in message and "api_key_env" in message
    assert "sk-secret" not in message


@pytest.mark.parametrize(
    ("option", "field"),
    [
        ('stream_arguments: "yes"', "stream_arguments"),
        ('max_repair_retries: "3"', "max_repair_retries"),
        ('max_request_seconds: "30"', "max_request_seconds"),
    ],
)
def test_types_are_strict(tmp_path: Path, option: str, field: str) -> None:
    message = rules_error(tmp_path, UP % ("", '{match: "*", upstream: "u", ' + option + "}"))
    assert f"models[0].{field}" in message


def test_env_vars_are_substituted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_TEST_HOST", "10.1.2.3")
    rules = load_rules(
        write(
            tmp_path,
            '{upstreams: {u: {base_url: "http://${TS_TEST_HOST}:8080/v1"}}, models: [{match: "*", upstream: "u"}]}',
        )
    )
    assert rules.upstreams["u"].base_url == "http://10.1.2.3:8080/v1"
    monkeypatch.delenv("TS_TEST_HOST")
    message = rules_error(
        tmp_path, '{upstreams: {u: {base_url: "http://${TS_TEST_HOST}/v1"}}, models: [{match: "*", upstream: "u"}]}'
    )
    assert "upstreams.u.base_url: environment variable TS_TEST_HOST is not set" in message


def test_check_rules_warns_about_shadowed_duplicate_and_unset_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TS_UNSET_KEY", raising=False)
    path = write(
        tmp_path,
        UP
        % (
            ', api_key_env: "TS_UNSET_KEY"',
            '{match: "qwen*", upstream: "u"}, {match: "qwen2.5*", upstream: "u"},'
            '{match: "a", upstream: "u"}, {match: "a", upstream: "u"},'
            '{match: "*", upstream: "u"}',
        ),
    )
    found = lint(load_rules(path))
    assert any("models[1] ('qwen2.5*') is shadowed by models[0] ('qwen*')" in w for w in found)
    assert any("models[3] ('a') duplicates models[2]" in w for w in found)
    assert any("TS_UNSET_KEY is not set" in w for w in found)
    result = run("check-rules", str(path))
    assert result.returncode == 0 and result.stderr.count("warning: ") == 3


def test_start_line_names_rules_counts_and_listener(tmp_path: Path) -> None:
    path = write(tmp_path, UP % ("", '{match: "*", upstream: "u"}'))
    line = start_line(Settings(rules_path=path, host="127.0.0.1", port=8123, workers=3))
    assert str(path) in line and "1 model rules, 1 upstreams" in line
    assert "http://127.0.0.1:8123" in line and "3 workers" in line
