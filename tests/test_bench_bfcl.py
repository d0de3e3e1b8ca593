"""bench/bfcl.py's own logic, without bfcl-eval or a model: modes, rules, raw answers, leaks, the table.

BFCL's data and checker (bench/bfcl_score.py) need the optional ``bfcl-eval`` package and are
exercised by ``make bench-bfcl``; nothing here imports them.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import json5
import pytest
from toolshim.config.loading import load_rules

from bench.bfcl import (
    ROOT,
    TABLE_HEAD,
    TABLE_RULE,
    Mode,
    Outcome,
    ask,
    check_rules,
    default_modes,
    demo_mode,
    grammar_costs,
    leaked,
    length_cuts,
    load_answers,
    parse_args,
    parse_modes,
    raw_result,
    report,
    rules_for_modes,
    table,
    wilson,
)
from bench.bfcl_score import Bfcl, Question, Verdict
from bench.template_mode import ChatTemplate

FORMATS = ("hermes", "react")


def test_modes_parse_direct_formats_and_constrained_variants() -> None:
    modes = parse_modes(" native, prompt,hermes,react+constrained,hermes ", FORMATS)
    assert modes == [
        Mode("native"),
        Mode("prompt"),
        Mode("hermes", "hermes", False),
        Mode("react+constrained", "react", True),
    ]
    assert [m.prompting for m in modes] == [False, True, False, False]
    assert modes[3].exposed_model == "bfcl-react-constrained"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hermes,yaml", "unknown mode 'yaml'"),
        ("prompt+constrained", "unknown mode 'prompt+constrained'"),  # constraint is a toolshim rule option
        ("native+constrained", "unknown mode 'native+constrained'"),
        (" , ", "no modes given"),
    ],
)
def test_unknown_modes_are_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_modes(text, FORMATS)


def test_categories_take_the_live_held_out_ones_and_refuse_others_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["--categories", "live_simple, live_irrelevance,multiple"])
    assert args.category_list == ["live_simple", "live_irrelevance", "multiple"]
    with pytest.raises(SystemExit):
        parse_args(["--categories", "live_simple,simple_java"])
    assert "unknown categories ['simple_java']" in capsys.readouterr().err


def test_rules_have_one_rule_per_emulated_mode_and_mark_constrained_ones(tmp_path: Path) -> None:
    modes = parse_modes("native,prompt,hermes,hermes+constrained", FORMATS)
    rules = rules_for_modes(modes, "http://127.0.0.1:9/v1", "qwen")
    assert [(r["match"], r["tool_mode"], r.get("constrained")) for r in rules["models"]] == [
        ("bfcl-hermes", "hermes", None),
        ("bfcl-hermes-constrained", "hermes", True),
    ]
    assert rules["upstreams"]["local"]["constraint_dialect"] == "gbnf"
    assert "constraint_dialect" not in rules_for_modes(modes[:3], "http://127.0.0.1:9/v1", "qwen")["upstreams"]["local"]
    path = tmp_path / "rules.json5"
    path.write_text(json.dumps(rules), encoding="utf-8")
    loaded = load_rules(path)  # toolshim accepts what the bench writes, constrained modes included
    assert loaded.resolve("bfcl-hermes") is not None and loaded.resolve("bfcl-hermes-constrained") is not None


def test_rule_options_go_into_every_emulated_rule_and_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["--modes", "prompt,pythonic,pythonic+constrained", "--rule", "tool_order=relevance"])
    assert args.rule == {"tool_order": "relevance"}
    assert parse_args(["--rule", "max_tool_calls=3", "--rule", "lenient=false"]).rule == {
        "max_tool_calls": 3,
        "lenient": False,
    }
    rules = rules_for_modes(args.mode_list, "http://127.0.0.1:9/v1", "qwen", args.rule)
    assert [r["tool_order"] for r in rules["models"]] == ["relevance", "relevance"]
    check_rules(rules)
    with pytest.raises(SystemExit, match="tool_order"):
        check_rules(rules_for_modes(args.mode_list, "http://127.0.0.1:9/v1", "qwen", {"tool_order": "alphabetical"}))
    with pytest.raises(SystemExit):
        parse_args(["--rule", "tool_order"])
    assert "KEY=VALUE" in capsys.readouterr().err


def test_the_demo_mode_runs_the_shipped_demo_rule_with_every_option_it_sets(tmp_path: Path) -> None:
    shipped = json5.loads((ROOT / "demo" / "rules.json5").read_text(encoding="utf-8"))["models"][0]
    (mode,) = parse_modes("demo", FORMATS)
    assert mode.tool_format == shipped["tool_mode"]
    rules = rules_for_modes([mode], "http://127.0.0.1:9/v1", "qwen", {"lenient": False})
    (rule,) = rules["models"]
    for key, value in shipped.items():
        if key not in ("match", "upstream", "upstream_model"):
            assert rule[key] == value
    assert rule["lenient"] is False and rule["upstream_model"] == "qwen"
    check_rules(rules)
    other = tmp_path / "rules.json5"
    other.write_text('{models: [{match: "x", upstream: "u", tool_mode: "react", max_tool_calls: 2}]}', encoding="utf-8")
    assert demo_mode(other) == Mode("demo", "react", options=(("max_tool_calls", 2),))


def test_rules_toolshim_rejects_stop_the_run_with_its_message() -> None:
    rules = rules_for_modes(parse_modes("hermes", FORMATS), "http://127.0.0.1:9/v1", "qwen")
    rules["models"][0]["no_such_option"] = True
    with pytest.raises(SystemExit, match="no_such_option"):
        check_rules(rules)
    check_rules(rules_for_modes(parse_modes("hermes", FORMATS), "http://127.0.0.1:9/v1", "qwen"))


def call(name: str, arguments: str) -> SimpleNamespace:
    return SimpleNamespace(function=SimpleNamespace(name=name, arguments=arguments))


def test_raw_result_is_what_bfcl_decodes() -> None:
    with_calls = SimpleNamespace(content=None, tool_calls=[call("a_b", '{"x": 1}'), call("c", "{}")])
    assert raw_result(with_calls, prompting=False) == [{"a_b": '{"x": 1}'}, {"c": "{}"}]
    text = SimpleNamespace(content="[f(x=1)]", tool_calls=None)
    assert raw_result(text, prompting=False) == "[f(x=1)]"
    assert raw_result(SimpleNamespace(content="[f(x=1)]", tool_calls=[call("f", "{}")]), prompting=True) == "[f(x=1)]"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('<tool_call>{"name": "f"}</tool_call>', True),
        ('{ "name" : "f", "arguments": {}}', True),
        ("Action: f\nAction Input: {}", True),
        ("^^^f", True),
        ("<tool:f>", True),
        ("[f(x=1)]", False),  # BFCL's prompt-mode syntax is the expected answer there, not leaked markup
        ("The answer is 42.", False),
        (None, False),
    ],
)
def test_leaked_markup(content: str | None, expected: bool) -> None:
    assert leaked(content) is expected


def outcome(mode: str, category: str, valid: bool, is_leaked: bool, seconds: float) -> Outcome:
    bad = mode == "hermes"  # the hermes rows also echo the instructions and miss usage
    return Outcome(
        mode, category, f"{category}_0", valid, is_leaked, seconds, "", "", None, None, None, bad, False, not bad
    )


def row(*cells: object) -> str:
    """A table row without tokens: the last cell is the median latency in seconds."""
    *texts, seconds = cells
    return "| " + " | ".join(map(str, texts)) + f" | {float(seconds):.1f} s | - |"  # type: ignore[arg-type]


HERMES_ROW = ("0/1 (0%, 0-79%)", "1/1 (100%)", "1/1 (100%)", "0/1 (0%)", "1/1 (100%)", "0/1 (0%)", 4)


def test_table_rows_per_category_then_overall_per_mode() -> None:
    outcomes = [
        outcome("prompt", "simple_python", True, False, 1.0),
        outcome("prompt", "simple_python", False, False, 3.0),
        outcome("prompt", "irrelevance", True, True, 2.0),
        outcome("hermes", "simple_python", False, True, 4.0),
    ]
    assert table(outcomes, "HEAD").splitlines() == [
        "HEAD",
        "",
        TABLE_HEAD,
        TABLE_RULE,
        row(
            "prompt", "simple_python", "1/2 (50%, 9-91%)", "0/2 (0%)", "0/2 (0%)", "0/2 (0%)", "0/2 (0%)", "0/2 (0%)", 2
        ),
        row("prompt", "irrelevance", "1/1 (100%, 21-100%)", "1/1 (100%)", *["0/1 (0%)"] * 4, 2),
        row("prompt", "**overall**", "2/3 (67%, 21-94%)", "1/3 (33%)", *["0/3 (0%)"] * 4, 2),
        row("hermes", "simple_python", *HERMES_ROW),
        row("hermes", "**overall**", *HERMES_ROW),
    ]


@pytest.mark.parametrize(
    ("count", "total", "interval"),
    [(0, 10, (0.0, 0.2775)), (10, 10, (0.7225, 1.0)), (50, 100, (0.4038, 0.5962)), (3, 37, (0.0279, 0.2128))],
)
def test_the_correct_share_carries_its_wilson_95_interval(
    count: int, total: int, interval: tuple[float, float]
) -> None:
    low, high = wilson(count, total)
    assert low == pytest.approx(interval[0], abs=5e-4) and high == pytest.approx(interval[1], abs=5e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_the_table_gives_the_median_completion_tokens() -> None:
    rows = [replace(outcome("prompt", "simple_python", True, False, 1.0), completion_tokens=n) for n in (10, 30, 20)]
    assert table(rows, "H").splitlines()[4].endswith("| 1.0 s | 20 |")


def test_grammar_costs_per_constrained_mode() -> None:
    def timed(mode: str, seconds: float, grammar: str | None) -> Outcome:
        return replace(outcome(mode, "simple_python", True, False, seconds), grammar=grammar)

    outcomes = [
        timed("hermes", 1.0, None),
        timed("hermes+constrained", 2.0, "built 4.000 ms"),
        timed("hermes+constrained", 4.0, "cached 0.010 ms"),
        timed("hermes+constrained", 6.0, "built 6.000 ms"),
    ]
    assert grammar_costs(outcomes) == (
        "grammar, hermes+constrained: first request built 4.000 ms; median built 5.000 ms (2 requests, 0.125% of "
        "the model's median); median cached 0.010 ms (1 requests, 0.000% of the model's median); model median 4.0 s"
    )
    assert grammar_costs(outcomes[:1]) == ""


def test_answers_cut_at_the_token_limit_are_counted_per_mode() -> None:
    def ended(mode: str, number: int, finish: str | None) -> Outcome:
        return replace(outcome(mode, "parallel", True, False, 1.0), id=f"parallel_{number}", finish=finish)

    outcomes = [ended("pythonic", 1, "stop"), ended("pythonic", 2, "length"), ended("prompt", 3, "tool_calls")]
    assert length_cuts(outcomes).splitlines() == [
        "cut at max_tokens, pythonic: 1 of 2 (parallel_2)",
        "cut at max_tokens, prompt: 0 of 1",
    ]
    assert length_cuts([ended("old", 4, None)]) == ""  # answer files written before finish was recorded


def test_report_reads_answer_files_back(tmp_path: Path) -> None:
    outcomes = [
        replace(outcome("hermes+constrained", "simple_python", True, False, 2.0), grammar="built 3.000 ms"),
        outcome("prompt", "simple_python", False, False, 1.0),
    ]
    files = []
    for i, one in enumerate(outcomes):
        files.append(tmp_path / f"{i}.jsonl")
        files[-1].write_text(json.dumps(asdict(one)) + "\n", encoding="utf-8")
    assert load_answers(files) == outcomes
    text = report(load_answers(files), "HEAD")
    assert text.startswith(table(outcomes, "HEAD"))
    assert "grammar, hermes+constrained: first request built 3.000 ms" in text


def test_the_template_mode_is_direct_and_listed_by_default() -> None:
    modes = parse_modes("native,template,prompt,hermes", FORMATS)
    assert modes[1] == Mode("template") and modes[1].templated and not modes[1].prompting
    assert [m.templated for m in modes] == [False, True, False, False]
    assert [r["match"] for r in rules_for_modes(modes, "http://127.0.0.1:9/v1", "qwen")["models"]] == ["bfcl-hermes"]
    assert default_modes().startswith("native,template,prompt,")
    with pytest.raises(ValueError, match="unknown mode 'template\\+constrained'"):
        parse_modes("template+constrained", FORMATS)


class FakeBfcl:
    """The two things ``ask`` needs of BFCL: the question's tools and a verdict (here: the result echoed)."""

    def tools(self, question: Question) -> list[dict[str, object]]:
        return [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]

    def score(self, question: Question, result: object, prompting: bool) -> Verdict:
        return Verdict(isinstance(result, list), "" if isinstance(result, list) else "no call", "", result)


class FakeCompletions:
    def __init__(self, text: str, finish: str = "stop") -> None:
        self.text, self.finish = text, finish
        self.sent: dict[str, object] = {}

    def create(self, **body: object) -> SimpleNamespace:
        self.sent = body
        choice = SimpleNamespace(text=self.text, finish_reason=self.finish)
        return SimpleNamespace(choices=[choice], usage=SimpleNamespace(prompt_tokens=5, completion_tokens=7))


@pytest.mark.parametrize(
    ("text", "finish", "result", "content", "finish_reason"),
    [
        (
            '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>',
            "stop",
            [{"f": '{"x":1}'}],
            None,
            "tool_calls",
        ),
        ("No tool fits.", "stop", "No tool fits.", "No tool fits.", "stop"),
        (
            '<tool_call>\n{"name": "f", "arguments": {"x": 1}}',
            "length",
            '<tool_call>\n{"name": "f", "arguments": {"x": 1}}',
            '<tool_call>\n{"name": "f", "arguments": {"x": 1}}',
            "length",
        ),
    ],
)
def test_the_template_mode_sends_the_rendered_prompt_raw_and_reads_the_answer_as_llama_server(
    text: str, finish: str, result: object, content: str | None, finish_reason: str
) -> None:
    template = ChatTemplate.with_stops(
        "{% for t in tools %}{{ t.function.name }};{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant{% endif %}",
        eos_token="<|endoftext|>",
    )
    question = Question("simple_python", "simple_python_0", [{"role": "user", "content": "hi"}], [], [])
    completions = FakeCompletions(text, finish)
    client = SimpleNamespace(completions=completions)
    got = ask(client, "qwen", FakeBfcl(), Mode("template"), question, 64, template)  # type: ignore[arg-type]
    assert completions.sent == {
        "model": "qwen",
        "prompt": "f;hi<|im_start|>assistant",
        "temperature": 0,
        "max_tokens": 64,
        "stop": ["<|endoftext|>"],  # and <|im_end|> where the template ends turns with it
    }
    assert (got.mode, got.result, got.content, got.finish, got.completion_tokens) == (
        "template",
        result,
        content,
        finish_reason,
        7,
    )
    assert got.valid is isinstance(result, list) and got.usage
    assert got.leaked is (finish == "length")  # an unfinished call stays in the content, as llama-server leaves it
    with pytest.raises(ValueError, match="chat template"):
        ask(client, "qwen", FakeBfcl(), Mode("template"), question, 64)  # type: ignore[arg-type]


def scorer_without_bfcl() -> Bfcl:
    """A ``Bfcl`` whose two BFCL helpers the relevance verdict uses are stand-ins (``bfcl-eval`` is optional)."""
    bfcl = object.__new__(Bfcl)
    bfcl._utils = SimpleNamespace(  # type: ignore[attr-defined]
        is_empty_output=lambda decoded: not decoded or decoded == [{}]
    )
    return bfcl


@pytest.mark.parametrize(
    ("category", "result", "valid"),
    [
        ("live_relevance", [{"generate_image": '{"prompt": "a portrait"}'}], True),
        ("live_relevance", "I cannot draw.", False),  # text does not decode: no call
        ("live_relevance", [], False),
        ("live_irrelevance", "I cannot draw.", True),
        ("live_irrelevance", [{"generate_image": "{}"}], False),
        ("irrelevance", [], True),
    ],
)
def test_relevance_kinds_are_judged_by_whether_a_call_was_made(category: str, result: object, valid: bool) -> None:
    question = Question(category, f"{category}_0", [], [], None)
    verdict = scorer_without_bfcl().score(question, result, prompting=False)
    assert verdict.valid is valid
    assert verdict.error_type == (
        ""
        if valid
        else "relevance_error:decoder_failed"
        if category == "live_relevance"
        else "irrelevance_error:decoder_success"
    )
