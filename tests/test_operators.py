"""What operators see: misspelt settings named at start, every refusal logged and counted."""

from __future__ import annotations

from toolshim.settings import ENV_VARS, known_env_vars, unknown_env_warnings


def test_misspelt_settings_are_named_with_the_closest_known_one() -> None:
    env = {
        "TOOLSHIM_API_KEY": "k",
        "TOOLSHIM_LOGLEVEL": "debug",
        "toolshim_port": "9000",
        "TOOLSHIM_PORT": "8000",
        "TOOLSHIM_ZZZQQQ": "1",
        "PATH": "/bin",
    }
    assert unknown_env_warnings(env) == [
        "TOOLSHIM_API_KEY is not a toolshim setting; did you mean TOOLSHIM_API_KEYS?",
        "TOOLSHIM_LOGLEVEL is not a toolshim setting; did you mean TOOLSHIM_LOG_LEVEL?",
        "TOOLSHIM_ZZZQQQ is not a toolshim setting and is ignored",
        "toolshim_port is not a toolshim setting; did you mean TOOLSHIM_PORT?",
    ]


def test_every_variable_toolshim_reads_is_known() -> None:
    read_elsewhere = {"TOOLSHIM_ALLOWED_ORIGINS", "TOOLSHIM_CACHE", "TOOLSHIM_LLAMA_CMAKE_ARGS", "TOOLSHIM_DEMO_MODEL"}
    known = known_env_vars()
    assert set(ENV_VARS.values()) | read_elsewhere <= known
    assert unknown_env_warnings({name: "x" for name in known}) == []
