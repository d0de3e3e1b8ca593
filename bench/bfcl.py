"""BFCL v4 questions through toolshim and the local model, scored by BFCL's own checker.

``make bench-bfcl`` (or ``python bench/bfcl.py --sample 30``) starts one llama.cpp server
(Qwen2.5-Coder-0.5B-Instruct unless ``--model smollm``) and one toolshim with a rule per
emulated mode, then asks seeded BFCL questions of the categories simple_python, multiple,
parallel, parallel_multiple and irrelevance (temperature 0, non-streaming, one at a time) in
each mode:

* ``native``: straight to the model server with BFCL's OpenAI ``tools``, ``tool_choice: "auto"`` and
  ``parallel_tool_calls: true`` (the emulated modes send the same);
* ``template``: the fair native baseline, what llama-server ``--jinja`` and Ollama do with ``tools``: the
  GGUF's own chat template renders BFCL's OpenAI tools and the messages, the prompt goes to the model
  server's raw ``/v1/completions``, and the completion is read as llama.cpp's server reads it for that
  template family (``<tool_call>`` blocks and its lenient variants; ``bench/template_mode.py``);
* ``prompt``: straight to the model server with BFCL's prompt-mode system prompt and no ``tools``
  (the answer is decoded from ``[func(a=1)]`` text, as BFCL does for prompt models);
* ``demo``: through toolshim with the shipped demo rule (``demo/rules.json5``: its format and every option
  it sets, ``--rule`` on top), what ``make demo`` and the README's quick start run;
* ``FORMAT`` (``hermes``, ``react``, ...): through toolshim with that ``tool_mode``;
* ``FORMAT+constrained``: the same rule with ``"constrained": true`` (constrained decoding);
  a toolshim that does not know the option stops the run before the model starts.

``--categories live_simple,live_multiple,...`` asks BFCL's user-contributed questions of the same five
kinds, and live_relevance, instead (questions the prompts were not tuned on).

Scoring is BFCL's (``bench/bfcl_score.py``): ``ast_checker`` per category; irrelevance (and live_irrelevance) is
correct when the answer decodes to no call, live_relevance when it decodes to one. Per mode and category, and
overall, it prints the share correct, the share whose visible content carries tool markup, repeats toolshim's
instructions, is empty, or lacks ``usage`` (``bench/hygiene.py``), and the median request latency; every
answer goes to ``--out`` as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

import json5
from openai import APIError, OpenAI

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/bfcl.py` puts bench/ on the path, not the repo root
    sys.path.insert(0, str(ROOT))

from toolshim.config.loading import load_rules  # noqa: E402
from toolshim.config.rules import RulesError  # noqa: E402
from toolshim.formats import FORMATS  # noqa: E402

from bench.bfcl_score import CATEGORIES, KNOWN_CATEGORIES, Bfcl, Question  # noqa: E402
from bench.hygiene import echoes, has_markup, has_usage, instruction_windows, invalid_args, is_empty  # noqa: E402
from bench.template_mode import ChatTemplate, TemplatePrompt, parse_hermes  # noqa: E402
from scripts import local_stack  # noqa: E402
from scripts.local_model import model_path, spec_for  # noqa: E402

DIRECT_MODES = ("native", "template", "prompt")
TEMPLATE = "template"
DEMO = "demo"  # the shipped demo rule (demo/rules.json5) with every option it sets, as users run it
DEMO_RULES = ROOT / "demo" / "rules.json5"
ROUTING_KEYS = ("match", "upstream", "upstream_model")  # what the benchmark sets itself in every rule
CONSTRAINED = "+constrained"
CONSTRAINT_OPTION = "constrained"  # the rule option that turns on constrained decoding


@dataclass(frozen=True, slots=True)
class Mode:
    """How a question is asked: straight to the server (``native``, ``template``, ``prompt``) or via a toolshim
    rule."""

    name: str
    tool_format: str | None = None
    constrained: bool = False
    options: tuple[tuple[str, Any], ...] = ()  # rule options of their own (the ``demo`` mode's), before ``--rule``

    @property
    def prompting(self) -> bool:
        """BFCL prompt mode: no ``tools``, the calls are text to decode."""
        return self.name == "prompt"

    @property
    def templated(self) -> bool:
        """The model's own chat template, rendered here and sent as a raw completion."""
        return self.name == TEMPLATE

    @property
    def exposed_model(self) -> str:
        """The model name toolshim's rule matches for this mode."""
        return "bfcl-" + self.name.replace("+", "-")


def parse_modes(text: str, formats: Iterable[str] = FORMATS) -> list[Mode]:
    """``native,prompt,hermes,hermes+constrained`` -> modes; ``ValueError`` names an unknown one."""
    known = set(formats)
    modes: list[Mode] = []
    for name in (part.strip() for part in text.split(",")):
        if not name or name in (m.name for m in modes):
            continue
        base, constrained = (name.removesuffix(CONSTRAINED), True) if name.endswith(CONSTRAINED) else (name, False)
        if name == DEMO:
            modes.append(demo_mode())
        elif base in DIRECT_MODES and not constrained:
            modes.append(Mode(name))
        elif base in known:
            modes.append(Mode(name, base, constrained))
        else:
            choices = [*DIRECT_MODES, DEMO, *sorted(known), *(f"{f}{CONSTRAINED}" for f in sorted(known))]
            raise ValueError(f"unknown mode {name!r}; expected some of: {', '.join(choices)}")
    if not modes:
        raise ValueError("no modes given")
    return modes


def demo_mode(path: Path = DEMO_RULES) -> Mode:
    """The ``demo`` mode: the first rule of the shipped demo rules, its format and every other option it sets."""
    rule = dict(json5.loads(path.read_text(encoding="utf-8"))["models"][0])
    tool_format = str(rule.pop("tool_mode"))
    options = tuple(sorted((k, v) for k, v in rule.items() if k not in ROUTING_KEYS))
    return Mode(DEMO, tool_format, options=options)


def rules_for_modes(
    modes: Sequence[Mode], upstream_url: str, upstream_model: str, options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """toolshim rules: one exact-match rule per emulated mode, ``constrained: true`` where asked, and
    ``options`` (``--rule``) in every one."""
    emulated = {m.exposed_model: m for m in modes if m.tool_format is not None}
    rules = local_stack.rules_for(
        upstream_url, upstream_model, {name: str(m.tool_format) for name, m in emulated.items()}
    )
    for rule in rules["models"]:
        rule.update(dict(emulated[rule["match"]].options))
        rule.update(options or {})
        if emulated[rule["match"]].constrained:
            rule[CONSTRAINT_OPTION] = True
    if any(m.constrained for m in emulated.values()):
        rules["upstreams"]["local"]["constraint_dialect"] = "gbnf"  # llama-cpp-python takes GBNF in `grammar`
    return rules


def check_rules(rules: dict[str, Any]) -> None:
    """Validate the rules with toolshim's own loader before any server starts; exit with its message."""
    with tempfile.TemporaryDirectory(prefix="toolshim-bfcl-rules-") as folder:
        path = Path(folder) / "rules.json5"
        path.write_text(json.dumps(rules), encoding="utf-8")
        try:
            load_rules(path)
        except RulesError as exc:
            hint = ""
            if f"{CONSTRAINT_OPTION}: extra" in str(exc) or f"{CONSTRAINT_OPTION}\n  Extra" in str(exc):
                hint = (
                    f"\nthis toolshim has no `{CONSTRAINT_OPTION}` rule option, so the {CONSTRAINED} modes "
                    "cannot run; leave them out of --modes"
                )
            raise SystemExit(f"toolshim rejects the benchmark's rules:\n{exc}{hint}") from exc


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question asked in one mode: BFCL's verdict, the raw answer, and the timing."""

    mode: str
    category: str
    id: str
    valid: bool
    leaked: bool
    seconds: float
    error_type: str
    error: str
    result: Any  # what BFCL's decoder gets: [{name: json_args}] for calls, else the content
    content: str | None
    decoded: Any
    echoed: bool = False  # content repeats toolshim's tool instructions
    empty: bool = False  # no call and no visible text
    usage: bool = True  # the answer carries usage with both token counts
    grammar: str | None = None  # toolshim's x-toolshim-grammar header: "built 12.345 ms" / "cached 0.010 ms"
    invalid_args: bool = False  # a call's arguments break its tool's JSON Schema (or it names no offered tool)
    finish: str | None = None  # finish_reason ("length": the answer hit --max-tokens)
    completion_tokens: int | None = None


def leaked(content: str | None, tool_names: Sequence[str] = (), prompting: bool = False) -> bool:
    """Whether visible content carries tool markup of any format (or a JSON call object); in prompt mode a
    ``[f(a=1)]`` list is the answer itself, not a leak."""
    return has_markup(content, tool_names, lists=not prompting)


def request_for(bfcl: Bfcl, mode: Mode, question: Question, max_tokens: int) -> dict[str, Any]:
    """The chat completion arguments BFCL's OpenAI handler would send, for this mode."""
    body: dict[str, Any] = {"temperature": 0, "max_tokens": max_tokens}
    if mode.prompting:
        return {**body, "messages": bfcl.prompt_messages(question)}
    # BFCL's parallel categories ask for several calls in one answer; like BFCL's Qwen handler (and
    # unlike toolshim's default for a request that does not say), the request allows them explicitly.
    tools = bfcl.tools(question)
    return {**body, "messages": question.messages, "tools": tools, "tool_choice": "auto", "parallel_tool_calls": True}


def completion_request(template: ChatTemplate, prompt: TemplatePrompt, max_tokens: int) -> dict[str, Any]:
    """The raw completion llama-server ``--jinja`` would run for a rendered prompt, at temperature 0; the generic
    format's grammar goes in llama-cpp-python's ``grammar`` field."""
    body: dict[str, Any] = {
        "prompt": prompt.prompt,
        "temperature": 0,
        "max_tokens": max_tokens,
        "stop": list(template.stops),
    }
    if prompt.grammar is not None:
        body["extra_body"] = {"grammar": prompt.grammar}
    return body


def template_prompt(template: ChatTemplate, bfcl: Bfcl, question: Question) -> TemplatePrompt:
    """The model's template with BFCL's tools, parallel calls allowed as the other modes ask."""
    return template.prompt_for(question.messages, bfcl.tools(question), parallel=True)


def template_message(text: str, prompt: TemplatePrompt | None = None) -> SimpleNamespace:
    """A completion as llama-server's chat answer: ``content`` and ``tool_calls`` as its parser for the prompt's
    format (Hermes unless the template needed the generic one) reads them."""
    parsed = prompt.parse(text) if prompt is not None else parse_hermes(text)
    calls = [SimpleNamespace(function=SimpleNamespace(name=n, arguments=a)) for n, a in parsed.calls]
    return SimpleNamespace(content=parsed.content, tool_calls=calls or None)


def raw_result(message: Any, prompting: bool) -> Any:
    """``OpenAICompletionsHandler._parse_query_response_*``: the calls as ``[{name: arguments}]``, else content."""
    if not prompting and message.tool_calls:
        return [{call.function.name: call.function.arguments} for call in message.tool_calls]
    return message.content


def ask(
    client: OpenAI,
    model: str,
    bfcl: Bfcl,
    mode: Mode,
    question: Question,
    max_tokens: int,
    template: ChatTemplate | None = None,
) -> Outcome:
    """One timed non-streaming request, scored (``template``: the chat template the ``template`` mode renders)."""
    if mode.templated:
        if template is None:
            raise ValueError("the template mode needs the model's chat template")
        return ask_template(client, model, bfcl, mode, question, max_tokens, template)
    began = time.monotonic()
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=model, **request_for(bfcl, mode, question, max_tokens)
        )
        response = raw.parse()
    except APIError as exc:
        seconds = time.monotonic() - began
        return Outcome(
            mode.name, question.category, question.id, False, False, seconds, "request", str(exc), None, None, None
        )
    seconds = time.monotonic() - began
    choice = response.choices[0]
    return scored(bfcl, mode, question, seconds, choice.message, response, choice.finish_reason, raw.headers)


def ask_template(
    client: OpenAI, model: str, bfcl: Bfcl, mode: Mode, question: Question, max_tokens: int, template: ChatTemplate
) -> Outcome:
    """The ``template`` mode's request: a raw completion of the rendered prompt, parsed as llama-server would."""
    prompt = template_prompt(template, bfcl, question)
    began = time.monotonic()
    try:
        response = client.completions.create(model=model, **completion_request(template, prompt, max_tokens))
    except APIError as exc:
        seconds = time.monotonic() - began
        return Outcome(
            mode.name, question.category, question.id, False, False, seconds, "request", str(exc), None, None, None
        )
    seconds = time.monotonic() - began
    choice = response.choices[0]
    message = template_message(choice.text, prompt)
    finish = "tool_calls" if message.tool_calls and choice.finish_reason == "stop" else choice.finish_reason
    return scored(bfcl, mode, question, seconds, message, response, finish)


def scored(
    bfcl: Bfcl,
    mode: Mode,
    question: Question,
    seconds: float,
    message: Any,
    response: Any,
    finish: str | None,
    headers: Mapping[str, str] | None = None,
) -> Outcome:
    """The outcome of one answered question: BFCL's verdict on ``message``, then the hygiene flags (``judged``)."""
    result = raw_result(message, mode.prompting)
    verdict = bfcl.score(question, result, mode.prompting)
    outcome = Outcome(
        mode.name,
        question.category,
        question.id,
        verdict.valid,
        False,
        seconds,
        verdict.error_type,
        verdict.error,
        result,
        message.content,
        verdict.decoded,
        empty=is_empty(message),
        usage=has_usage(response),
        grammar=headers.get("x-toolshim-grammar") if headers is not None else None,
        finish=finish,
        completion_tokens=response.usage.completion_tokens if response.usage else None,
    )
    return judged(outcome, mode, bfcl.tools(question))


def judged(outcome: Outcome, mode: Mode, tools: Sequence[dict[str, Any]]) -> Outcome:
    """``outcome`` with the hygiene flags read from its content and calls: markup, echoed instructions,
    schema-invalid arguments (``bench/hygiene.py``); one place for a live answer and a stored one."""
    names = [tool["function"]["name"] for tool in tools]
    fmt = mode.tool_format
    echoed = fmt is not None and echoes(outcome.content, instruction_windows(fmt, tools, parallel=True))
    bad_args = invalid_args(calls_of(outcome.result, mode.prompting), tools)
    markup = leaked(outcome.content, names, mode.prompting)
    return replace(outcome, leaked=markup, echoed=echoed, invalid_args=bad_args)


def calls_of(result: Any, prompting: bool) -> list[tuple[str, str]]:
    """The structured calls of an answer (none in prompt mode: its calls are text)."""
    if prompting or not isinstance(result, list):
        return []
    return [(name, arguments) for call in result for name, arguments in call.items()]


def share(count: int, total: int) -> str:
    """``7/10 (70%)``."""
    return f"{count}/{total} ({100 * count / total:.0f}%)" if total else "0/0"


Z95 = 1.959964  # the normal quantile of a two-sided 95% interval


def wilson(count: int, total: int) -> tuple[float, float]:
    """The Wilson score 95% interval of a proportion: sound at the small counts and the 0%/100% ends a
    benchmark of a few dozen questions gives, where the normal approximation is not."""
    if not total:
        return 0.0, 1.0
    p, z2 = count / total, Z95 * Z95
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = Z95 * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def share_with_interval(count: int, total: int) -> str:
    """``7/10 (70%, 40-89%)``: the share and its 95% interval."""
    if not total:
        return "0/0"
    low, high = wilson(count, total)
    return f"{count}/{total} ({100 * count / total:.0f}%, {100 * low:.0f}-{100 * high:.0f}%)"


def summary_row(mode: str, group: str, outcomes: Sequence[Outcome]) -> str:
    """One Markdown table row: correct (with its 95% interval), leaked, echoed, empty, no usage, schema-invalid
    arguments, latency, completion tokens."""
    n = len(outcomes)
    correct, leaks = sum(o.valid for o in outcomes), sum(o.leaked for o in outcomes)
    echoed, empty = sum(o.echoed for o in outcomes), sum(o.empty for o in outcomes)
    no_usage, bad_args = sum(not o.usage for o in outcomes), sum(o.invalid_args for o in outcomes)
    median = f"{statistics.median(o.seconds for o in outcomes):.1f} s" if outcomes else "-"
    tokens = [o.completion_tokens for o in outcomes if o.completion_tokens is not None]
    median_tokens = f"{statistics.median(tokens):.0f}" if tokens else "-"
    counts = " | ".join(share(k, n) for k in (leaks, echoed, empty, no_usage, bad_args))
    return f"| {mode} | {group} | {share_with_interval(correct, n)} | {counts} | {median} | {median_tokens} |"


TABLE_HEAD = (
    "| mode | category | correct (BFCL checker; 95% interval) | markup leaked | instructions echoed | empty | no usage "
    "| schema-invalid arguments | median latency | median completion tokens |"
)
TABLE_RULE = "|---|---|---|---|---|---|---|---|---|---|"


def table(outcomes: Sequence[Outcome], heading: str) -> str:
    """Per mode: a row per category, then the overall row (in the order the outcomes came)."""
    lines = [heading, "", TABLE_HEAD, TABLE_RULE]
    for mode in dict.fromkeys(o.mode for o in outcomes):
        mine = [o for o in outcomes if o.mode == mode]
        for category in dict.fromkeys(o.category for o in mine):
            lines.append(summary_row(mode, category, [o for o in mine if o.category == category]))
        lines.append(summary_row(mode, "**overall**", mine))
    return "\n".join(lines)


def grammar_costs(outcomes: Sequence[Outcome]) -> str:
    """Per constrained mode: what getting the grammar cost (first request, median built, median
    cached) next to the model's own median time per request."""
    lines = []
    for mode in dict.fromkeys(o.mode for o in outcomes if o.grammar):
        mine = [o for o in outcomes if o.mode == mode]
        costs: dict[str, list[float]] = {"built": [], "cached": []}
        for o in mine:
            if o.grammar:
                how, ms, _ = o.grammar.split()
                costs[how].append(float(ms))
        first = next(o.grammar for o in mine if o.grammar)
        model_ms = statistics.median(o.seconds for o in mine) * 1e3
        medians = {how: statistics.median(v) if v else None for how, v in costs.items()}
        parts = [f"first request {first}"]
        for how, median in medians.items():
            if median is not None:
                count, pct = len(costs[how]), 100 * median / model_ms
                parts.append(f"median {how} {median:.3f} ms ({count} requests, {pct:.3f}% of the model's median)")
        parts.append(f"model median {model_ms / 1e3:.1f} s")
        lines.append(f"grammar, {mode}: " + "; ".join(parts))
    return "\n".join(lines)


def progress(outcome: Outcome, number: int, total: int) -> None:
    """One line per question on stderr, so a long run shows where it is and why answers fail."""
    mark = "ok" if outcome.valid else "--"
    leak = " LEAK" if outcome.leaked else ""
    detail = outcome.error_type or json.dumps(outcome.result, ensure_ascii=False)
    print(
        f"  [{outcome.mode} {number}/{total} {outcome.id}] {mark} {outcome.seconds:5.1f} s{leak}  {detail[:100]}",
        file=sys.stderr,
        flush=True,
    )


def run_modes(
    modes: Sequence[Mode], questions: Sequence[Question], bfcl: Bfcl, args: argparse.Namespace, out: IO[str]
) -> list[Outcome]:
    """Start the model server and toolshim, ask every question in every mode, write each answer."""
    outcomes: list[Outcome] = []
    template = ChatTemplate.from_gguf(model_path(args.model)) if any(m.templated for m in modes) else None
    with local_stack.services_stopped_on_exit() as started:
        if args.server:
            base_url, model_id = args.server.rstrip("/"), spec_for(args.model).alias
        else:
            server = local_stack.start_model_server(args.model)
            started.append(server)
            base_url, model_id = server.base_url, server.model_id
        clients = {"direct": OpenAI(base_url=base_url, api_key="unused", timeout=600, max_retries=0)}
        if any(m.tool_format for m in modes):
            proxy = local_stack.start_toolshim(rules_for_modes(modes, base_url, model_id, args.rule))
            started.append(proxy)
            clients["toolshim"] = OpenAI(base_url=proxy.base_url, api_key="unused", timeout=600, max_retries=0)
        try:
            for mode in modes:
                client = clients["toolshim" if mode.tool_format else "direct"]
                model = mode.exposed_model if mode.tool_format else model_id
                for number, question in enumerate(questions, 1):
                    outcome = ask(client, model, bfcl, mode, question, args.max_tokens, template)
                    outcomes.append(outcome)
                    out.write(json.dumps(asdict(outcome), ensure_ascii=False) + "\n")
                    out.flush()
                    progress(outcome, number, len(questions))
        finally:
            for client in clients.values():
                client.close()
    return outcomes


def default_modes() -> str:
    """The direct modes, then every format without and with constrained decoding."""
    formats = sorted(FORMATS)
    return ",".join([*DIRECT_MODES, DEMO, *formats, *(f + CONSTRAINED for f in formats)])


def rule_option(text: str) -> tuple[str, Any]:
    """``--rule`` ``key=value``: the value read as JSON (``true``, ``3``), else kept as a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Options: model, modes, categories, sample size and seed, where the answers go."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", choices=("qwen", "smollm"), default="qwen")
    parser.add_argument("--modes", default=default_modes(), help="comma-separated; default: %(default)s")
    parser.add_argument(
        "--categories",
        default=",".join(CATEGORIES),
        help="comma-separated, of %(default)s and BFCL's live (user-contributed) kinds of them, a held-out check: "
        + ",".join(c for c in KNOWN_CATEGORIES if c not in CATEGORIES),
    )
    parser.add_argument("--sample", type=int, default=10, help="questions per category (0: all); default 10")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument(
        "--rule",
        action="append",
        type=rule_option,
        default=[],
        metavar="KEY=VALUE",
        help="a toolshim rule option for every emulated mode (VALUE as JSON, else a string), e.g. tool_order=relevance",
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        help="ask this already running model server (OpenAI base URL, serving --model) instead of starting one",
    )
    parser.add_argument("--out", type=Path, default=Path("bfcl-answers.jsonl"), help="JSON lines, one per answer")
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        metavar="ANSWERS",
        help="ask nothing: print the table of earlier runs' --out files (e.g. one run per mode)",
    )
    args = parser.parse_args(argv)
    try:
        args.mode_list = parse_modes(args.modes)
    except ValueError as exc:
        parser.error(str(exc))
    args.rule = dict(args.rule)
    args.category_list = [c.strip() for c in args.categories.split(",") if c.strip()]
    unknown = [c for c in args.category_list if c not in KNOWN_CATEGORIES]
    if unknown or not args.category_list:
        parser.error(f"unknown categories {unknown}; expected some of: {', '.join(KNOWN_CATEGORIES)}")
    if args.sample < 0 or args.max_tokens < 1:
        parser.error("--sample must be >= 0 and --max-tokens >= 1")
    return args


def load_answers(paths: Sequence[Path]) -> list[Outcome]:
    """The outcomes ``--out`` files hold, in file order."""
    outcomes = []
    for path in paths:
        with path.open(encoding="utf-8") as lines:
            outcomes += [Outcome(**json.loads(line)) for line in lines if line.strip()]
    return outcomes


def rejudged(outcomes: Sequence[Outcome], bfcl: Bfcl) -> list[Outcome]:
    """Markup, echoes and arguments judged again from the stored answers with today's ``bench/hygiene.py``."""
    tools: dict[str, list[dict[str, Any]]] = {}
    for category in dict.fromkeys(o.category for o in outcomes):
        tools.update({q.id: bfcl.tools(q) for q in bfcl.questions(category, 0, 0)})
    return [judged(o, parse_modes(o.mode)[0], tools[o.id]) for o in outcomes]


def length_cuts(outcomes: Sequence[Outcome]) -> str:
    """Per mode: how many answers ended at ``--max-tokens`` (a call list cut there loses its last call)."""
    lines = []
    for mode in dict.fromkeys(o.mode for o in outcomes):
        known = [o for o in outcomes if o.mode == mode and o.finish is not None]
        if known:
            cut = [o.id for o in known if o.finish == "length"]
            which = f" ({', '.join(cut)})" if cut else ""
            lines.append(f"cut at max_tokens, {mode}: {len(cut)} of {len(known)}{which}")
    return "\n".join(lines)


def report(outcomes: Sequence[Outcome], heading: str) -> str:
    """The table, then what the grammar cost in the constrained modes and how many answers hit the token limit."""
    extra = [part for part in (grammar_costs(outcomes), length_cuts(outcomes)) if part]
    return "\n\n".join([table(outcomes, heading), *extra])


def main(argv: Sequence[str] | None = None) -> int:
    """Load BFCL, check the rules, run every mode, print the table."""
    args = parse_args(argv)
    if args.report:
        outcomes = rejudged(load_answers(args.report), Bfcl())
        per_category = max(Counter((o.mode, o.category) for o in outcomes).values(), default=0)
        print(
            report(
                outcomes,
                f"BFCL v4, up to {per_category} questions per category, from {len(args.report)} answer file(s)",
            )
        )
        return 0
    modes: list[Mode] = args.mode_list
    if any(m.tool_format for m in modes):
        check_rules(rules_for_modes(modes, "http://127.0.0.1:1/v1", "check", args.rule))
    bfcl = Bfcl()
    questions = [q for c in args.category_list for q in bfcl.questions(c, args.sample, args.seed)]
    with args.out.open("w", encoding="utf-8") as out:
        outcomes = run_modes(modes, questions, bfcl, args, out)
    per_category = "all" if args.sample == 0 else str(args.sample)
    heading = (
        f"BFCL v4, model {spec_for(args.model).alias}, {per_category} questions per category "
        f"(seed {args.seed}), temperature 0, max_tokens {args.max_tokens}"
        + "".join(f", {key}: {json.dumps(value)}" for key, value in args.rule.items())
    )
    print(report(outcomes, heading))
    print(f"\nanswers: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
