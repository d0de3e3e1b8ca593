"""Rules files: loading one file or a folder, resolution, and errors that name file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolshim.config import rules as rules_module
from toolshim.config.loading import describe, load_rules
from toolshim.config.rules import MissingExtra, RulesError
from toolshim.config.settings import DEFAULT_RULES, Settings

UPSTREAMS = (
    '{ local: { base_url: "http://127.0.0.1:11434/v1", api_key_env: "LOCAL_KEY" },\n'
    '  claude: { provider: "litellm", api_key_env: "ANTHROPIC_API_KEY" } }'
)

VALID = f"""// the issue's example, comments and trailing commas included
{{
  upstreams: {UPSTREAMS},
  models: [
    {{ match: "qwen2.5*", upstream: "local", tool_mode: "hermes" }},
    {{ match: "claude-*", upstream: "claude", tool_mode: "native", upstream_model: "anthropic/claude-sonnet-4-5" }},
    {{ match: "gpt-4o", upstream: "local", expose: ["gpt-4o-mini"] }},
    {{ match: "*", upstream: "local", tool_mode: "react", }},
  ],
}}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_file_resolves_first_match(tmp_path: Path) -> None:
    rules = load_rules(write(tmp_path / "r.json5", VALID))
    assert set(rules.upstreams) == {"local", "claude"}
    assert rules.upstreams["claude"].provider == "litellm"
    assert rules.upstreams["local"].provider == "openai"
    qwen = rules.resolve("qwen2.5-coder:7b")
    assert qwen is not None and qwen.rule.tool_mode == "hermes" and qwen.upstream_name == "local"
    assert qwen.upstream_model("qwen2.5-coder:7b") == "qwen2.5-coder:7b"
    claude = rules.resolve("claude-3")
    assert claude is not None and claude.upstream_model("claude-3") == "anthropic/claude-sonnet-4-5"
    other = rules.resolve("mistral")
    assert other is not None and other.rule.tool_mode == "react" and other.label == "*"
    assert rules.exposed_models() == ["gpt-4o", "gpt-4o-mini"]


def test_glob_is_case_sensitive_and_unmatched_is_none(tmp_path: Path) -> None:
    text = '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "gpt-?", upstream: "u"}]}'
    rules = load_rules(write(tmp_path / "r.json5", text))
    assert rules.resolve("gpt-4") is not None
    assert rules.resolve("GPT-4") is None
    assert rules.resolve("gpt-4o") is None


@pytest.mark.parametrize(
    "mode", ["native", "react", "xml", "hermes", "caret", "qwen3_xml", "morph_xml", "pythonic", "auto"]
)
def test_every_tool_mode_is_accepted(tmp_path: Path, mode: str) -> None:
    text = json.dumps(
        {
            "upstreams": {"u": {"base_url": "http://x/v1"}},
            "models": [{"match": "*", "upstream": "u", "tool_mode": mode}],
        }
    )
    assert load_rules(write(tmp_path / "r.json5", text)).models[0].tool_mode == mode


def test_folder_merges_files_in_name_order(tmp_path: Path) -> None:
    write(tmp_path / "10-upstreams.json5", f"{{ upstreams: {UPSTREAMS} }}")
    write(tmp_path / "20-models.json5", '{ models: [{ match: "qwen*", upstream: "local", tool_mode: "hermes" }] }')
    write(
        tmp_path / "30-more.json",
        '{"upstreams": {"vllm": {"base_url": "http://127.0.0.1:8001/v1"}},'
        ' "models": [{"match": "*", "upstream": "vllm"}]}',
    )
    write(tmp_path / "notes.txt", "not a rules file")
    rules = load_rules(tmp_path)
    assert set(rules.upstreams) == {"local", "claude", "vllm"}
    assert [m.match for m in rules.models] == ["qwen*", "*"]
    assert [p.name for p in rules.sources] == ["10-upstreams.json5", "20-models.json5", "30-more.json"]
    resolved = rules.resolve("anything")
    assert resolved is not None and resolved.upstream_name == "vllm"


def test_shipped_default_rules_are_valid() -> None:
    rules = load_rules(Path(__file__).parent.parent / "rules" / "default.json5")
    assert rules.models and rules.upstreams
    assert "qwen2.5" in describe(rules)


def test_packaged_default_rules_are_the_repositorys_and_need_no_extra() -> None:
    """``toolshim serve`` without rules loads the package's copy: rules/default.json5 itself (a symlink here,
    a copy in the wheel), served by OpenAI-compatible upstreams only, so a bare ``pip install`` starts."""
    shipped = Path(__file__).parent.parent / "rules" / "default.json5"
    assert Settings().rules_path == DEFAULT_RULES
    assert DEFAULT_RULES.read_bytes() == shipped.read_bytes()
    rules = load_rules(DEFAULT_RULES)
    assert {u.provider for u in rules.upstreams.values()} == {"openai"}
    local = rules.resolve("local-coder")
    assert local is not None and rules.upstreams[local.upstream_name].base_url == "http://127.0.0.1:8080/v1"


BAD = [
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1", api_key: "sk-x"}}, models: [{match: "*", upstream: "u"}]}',
        ["upstreams.u.api_key", "Extra inputs are not permitted"],
        id="unknown-upstream-key",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "*", upstream: "u", toolmode: "x"}]}',
        ["models[0].toolmode", "Extra inputs are not permitted"],
        id="unknown-model-key",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "*", upstream: "u"}], extra: 1}',
        ["extra", "Extra inputs are not permitted"],
        id="unknown-top-level-key",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "a", upstream: "u"},'
        ' {match: "*", upstream: "u", tool_mode: "json"}]}',
        ["models[1].tool_mode", "'native'", "'hermes'"],
        id="bad-tool-mode",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "*", upstream: "nope"}]}',
        ["models[0].upstream", "unknown upstream 'nope'", "known: u"],
        id="unknown-upstream-reference",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "*", upstream: "u"}',
        ["not valid JSON5"],
        id="invalid-json5",
    ),
    pytest.param(
        '{upstreams: {u: {api_key_env: "K"}}, models: [{match: "*", upstream: "u"}]}',
        ["upstreams.u", "base_url is required"],
        id="missing-base-url",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "127.0.0.1:8080"}}, models: [{match: "*", upstream: "u"}]}',
        ["upstreams.u", "http://"],
        id="base-url-without-scheme",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1", read_timeout: 0}}, models: [{match: "*", upstream: "u"}]}',
        ["upstreams.u.read_timeout", "greater than 0"],
        id="bad-timeout",
    ),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{upstream: "u"}]}',
        ["models[0].match", "Field required"],
        id="missing-match",
    ),
    pytest.param('{upstreams: {u: {base_url: "http://x/v1"}}, models: []}', ["no model rules"], id="no-models"),
    pytest.param("[1, 2]", ["(top)"], id="not-an-object"),
    pytest.param(
        '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "*", upstream: "u",'
        ' tool_error_pattern: "(unclosed"}]}',
        ["models[0].tool_error_pattern", "regular expression"],
        id="bad-regex",
    ),
]


@pytest.mark.parametrize(("text", "fragments"), BAD)
def test_bad_rules_name_file_field_and_problem(tmp_path: Path, text: str, fragments: list[str]) -> None:
    path = write(tmp_path / "bad.json5", text)
    with pytest.raises(RulesError) as info:
        load_rules(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_provider_whose_package_is_missing_is_refused_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """litellm is installed for the tests: stand in a module name that is not, as a bare install lacks litellm.
    (tests/test_release.py runs the real case: the wheel in a venv without litellm.)"""
    path = write(tmp_path / "rules.json5", VALID)
    assert load_rules(path).upstreams["claude"].provider == "litellm"  # found: accepted
    monkeypatch.setitem(rules_module.PROVIDER_PACKAGES, "litellm", ("toolshim_test_absent_module", "litellm"))
    with pytest.raises(MissingExtra) as caught:
        load_rules(path)
    message = str(caught.value)
    assert "\n" not in message  # one line
    assert message.startswith(f"{path}: upstreams.claude: provider 'litellm' needs the toolshim_test_absent_module")
    assert "pip install 'toolshim[litellm]'" in message
    local_only = write(
        tmp_path / "local.json5", '{upstreams: {u: {base_url: "http://x/v1"}}, models: [{match: "*", upstream: "u"}]}'
    )
    assert load_rules(local_only).upstreams["u"].provider == "openai"  # only rules that use the provider fail


def test_duplicate_upstream_across_files(tmp_path: Path) -> None:
    write(tmp_path / "a.json5", '{upstreams: {u: {base_url: "http://a/v1"}}}')
    write(tmp_path / "b.json5", '{upstreams: {u: {base_url: "http://b/v1"}}, models: [{match: "*", upstream: "u"}]}')
    with pytest.raises(RulesError, match=r"b\.json5: upstreams\.u: already defined in .*a\.json5"):
        load_rules(tmp_path)


def test_bad_file_in_folder_is_named(tmp_path: Path) -> None:
    write(tmp_path / "a.json5", '{upstreams: {u: {base_url: "http://a/v1"}}, models: [{match: "*", upstream: "u"}]}')
    write(tmp_path / "b.json5", '{models: [{match: "x", upstream: "u", tool_mode: "smoke"}]}')
    with pytest.raises(RulesError, match=r"b\.json5: models\[0\]\.tool_mode"):
        load_rules(tmp_path)


def test_missing_path_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match="no such file or folder"):
        load_rules(tmp_path / "missing.json5")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RulesError, match=r"no \*\.json5 or \*\.json rules files"):
        load_rules(tmp_path / "empty")


def test_api_key_only_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = load_rules(write(tmp_path / "r.json5", VALID))
    monkeypatch.delenv("LOCAL_KEY", raising=False)
    assert rules.upstreams["local"].api_key() is None
    monkeypatch.setenv("LOCAL_KEY", "from-env")
    assert rules.upstreams["local"].api_key() == "from-env"


def test_describe_prints_the_resolved_table(tmp_path: Path) -> None:
    table = describe(load_rules(write(tmp_path / "r.json5", VALID)))
    lines = table.splitlines()
    assert lines[0].split() == ["match", "tool", "mode", "upstream", "provider", "upstream", "model"]
    assert lines[1].split()[:3] == ["qwen2.5*", "hermes", "local"]
    assert "http://127.0.0.1:11434/v1" in lines[1]
    assert "anthropic/claude-sonnet-4-5" in lines[2] and "litellm" in lines[2]
    assert "(as requested)" in lines[4]
