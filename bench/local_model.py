"""How well a real local model calls tools through toolshim, per tool format, against native ``tools``.

``python bench/local_model.py`` starts the llama.cpp server (Qwen2.5-Coder-0.5B-Instruct unless
``--model smollm``) and a toolshim with one rule per emulated format, then sends 20 varied
single-tool prompts at temperature 0 (six tools offered each time) through toolshim in each
format (hermes, react, xml, caret, qwen3_xml, morph_xml, pythonic), and once straight to the model server
with native ``tools`` and ``tool_choice: "auto"``. Per mode it prints:

* correct: the answer is a structured call to the expected tool whose arguments are valid
  against that tool's JSON Schema (``jsonschema``);
* leaked: the visible content carries tool markup (``<tool_call``, ``Action:``, ``<tool:``,
  ``^^^``, ``<function=``, ``<parameter=``, a tag named after an offered tool, or a ``{"name": ...``
  call object, however spaced);
* echoed: the visible content repeats toolshim's tool instructions (``bench/hygiene.py``);
* empty: no call and no visible text;
* no usage: the answer lacks ``usage`` (prompt and completion tokens);
* median latency of the whole request.

Non-streaming requests, one at a time (the server generates one request at a time anyway).
``--modes qwen3_xml,morph_xml`` runs a subset (``native`` is the direct mode).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jsonschema
from openai import APIError, OpenAI

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/local_model.py` puts bench/ on the path, not the repo root
    sys.path.insert(0, str(ROOT))

from bench.hygiene import echoes, has_markup, has_usage, instruction_windows, is_empty  # noqa: E402
from scripts import local_stack  # noqa: E402

FORMATS = ("hermes", "react", "xml", "caret", "qwen3_xml", "morph_xml", "pythonic")
SYSTEM = "You are a helpful assistant. Use a tool when it can answer the question."


def tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An OpenAI function tool."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOLS = [
    tool(
        "get_weather",
        "Get the current weather in a city.",
        {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        ["city"],
    ),
    tool("calculator", "Evaluate an arithmetic expression.", {"expression": {"type": "string"}}, ["expression"]),
    tool(
        "web_search",
        "Search the web and return the top results.",
        {"query": {"type": "string"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 10}},
        ["query"],
    ),
    tool(
        "send_email",
        "Send an email.",
        {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
        ["to", "subject", "body"],
    ),
    tool(
        "create_event",
        "Add an event to the user's calendar.",
        {
            "title": {"type": "string"},
            "date": {"type": "string", "description": "YYYY-MM-DD"},
            "time": {"type": "string", "description": "HH:MM, 24-hour"},
        },
        ["title", "date"],
    ),
    tool(
        "convert_currency",
        "Convert an amount of money between currencies.",
        {
            "amount": {"type": "number"},
            "from_currency": {"type": "string", "description": "ISO code, e.g. USD"},
            "to_currency": {"type": "string", "description": "ISO code"},
        },
        ["amount", "from_currency", "to_currency"],
    ),
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
PROMPTS: list[tuple[str, str]] = [
    ("What's the weather like in Berlin today?", "get_weather"),
    ("Is it raining in Seattle right now? Give me the temperature in fahrenheit.", "get_weather"),
    ("I'm flying to Tokyo tomorrow; what's the weather there at the moment?", "get_weather"),
    ("How cold is it in Reykjavik?", "get_weather"),
    ("What is 1234 * 5678?", "calculator"),
    ("Compute (17.5 + 2.25) / 3.", "calculator"),
    ("What's 2 to the power of 20, minus 1?", "calculator"),
    ("Search the web for the latest Python release notes.", "web_search"),
    ("Find me three articles about sourdough baking.", "web_search"),
    ("Look up who won the 2022 FIFA World Cup.", "web_search"),
    ("Send an email to alice@example.com with subject 'Lunch' saying I'll be 10 minutes late.", "send_email"),
    ("Email bob@example.org: subject 'Report', body 'The Q3 report is attached.'", "send_email"),
    ("Write to carol@example.net that the meeting moved to Friday; subject: Meeting moved.", "send_email"),
    ("Put 'Dentist' in my calendar on 2025-03-14 at 09:30.", "create_event"),
    ("Schedule a team offsite called 'Planning day' on 2025-06-02.", "create_event"),
    ("Add my mother's birthday dinner to the calendar for 2025-11-08 at 19:00.", "create_event"),
    ("How much is 250 US dollars in euros?", "convert_currency"),
    ("Convert 1000 JPY to GBP.", "convert_currency"),
    ("I have 75.5 Swiss francs; how many Canadian dollars is that?", "convert_currency"),
    ("Convert 12 EUR into USD please.", "convert_currency"),
]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One prompt's result in one mode."""

    correct: bool
    leaked: bool
    seconds: float
    detail: str
    echoed: bool = False
    empty: bool = False
    usage: bool = True


def judge(expected: str, message: Any) -> tuple[bool, str]:
    """Right tool, arguments a JSON object valid against its schema; else why not."""
    calls = message.tool_calls or []
    if not calls:
        return False, f"no call; content {str(message.content or '')[:60]!r}"
    call = calls[0].function
    if call.name != expected:
        return False, f"called {call.name}, expected {expected}"
    try:
        jsonschema.validate(json.loads(call.arguments), SCHEMAS[expected])
    except (json.JSONDecodeError, jsonschema.ValidationError) as exc:
        return False, f"bad arguments {call.arguments!r}: {str(exc).splitlines()[0]}"
    return True, call.arguments


def ask(client: OpenAI, model: str, fmt: str | None, prompt: str, expected: str, max_tokens: int) -> Outcome:
    """One timed non-streaming request (``fmt``: the emulated format, ``None`` for native)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    began = time.monotonic()
    try:
        response = client.chat.completions.create(
            model=model, messages=messages, tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=max_tokens
        )
    except APIError as exc:
        return Outcome(False, False, time.monotonic() - began, f"error: {exc}")
    seconds = time.monotonic() - began
    message = response.choices[0].message
    correct, detail = judge(expected, message)
    echoed = fmt is not None and echoes(message.content, instruction_windows(fmt, TOOLS, parallel=False))
    return Outcome(
        correct,
        has_markup(message.content, SCHEMAS),
        seconds,
        detail,
        echoed=echoed,
        empty=is_empty(message),
        usage=has_usage(response),
    )


def run_mode(client: OpenAI, model: str, label: str, args: argparse.Namespace) -> list[Outcome]:
    """Every prompt through one mode, with a progress line per prompt."""
    outcomes = []
    for i, (prompt, expected) in enumerate(PROMPTS[: args.limit], 1):
        outcome = ask(client, model, None if label == "native" else label, prompt, expected, args.max_tokens)
        outcomes.append(outcome)
        mark = "ok " if outcome.correct else "-- "
        leak = " LEAK" if outcome.leaked else ""
        print(
            f"  [{label} {i:2}] {mark}{outcome.seconds:5.1f} s{leak}  {outcome.detail[:90]}",
            file=sys.stderr,
            flush=True,
        )
    return outcomes


def table(results: dict[str, list[Outcome]], model_name: str) -> str:
    """The summary as a Markdown table (ready for the README)."""
    lines = [
        f"Model: {model_name}, {len(next(iter(results.values())))} prompts, temperature 0, 6 tools offered",
        "",
        "| mode | correct structured call | markup leaked into content | instructions echoed | empty | no usage "
        "| median latency |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, outs in results.items():
        n = len(outs)
        counts = [
            sum(o.correct for o in outs),
            sum(o.leaked for o in outs),
            sum(o.echoed for o in outs),
            sum(o.empty for o in outs),
            sum(not o.usage for o in outs),
        ]
        median = statistics.median(o.seconds for o in outs)
        cells = " | ".join(f"{k}/{n} ({100 * k / n:.0f}%)" for k in counts)
        lines.append(f"| {mode} | {cells} | {median:.1f} s |")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    """Options: which model, which modes, how many prompts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("qwen", "smollm"), default="qwen")
    parser.add_argument("--modes", default=",".join([*FORMATS, "native"]), help="comma-separated subset")
    parser.add_argument("--limit", type=int, default=len(PROMPTS), help="use only the first N prompts")
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--json", type=Path, help="also write every outcome to this file")
    return parser.parse_args()


def main() -> int:
    """Start the stack, run every mode, print the table, stop everything."""
    args = parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results: dict[str, list[Outcome]] = {}
    with local_stack.services_stopped_on_exit() as started:
        server = local_stack.start_model_server(args.model)
        started.append(server)
        rules = local_stack.rules_for(server.base_url, server.model_id, {f"bench-{f}": f for f in FORMATS})
        proxy = local_stack.start_toolshim(rules)
        started.append(proxy)
        with (
            OpenAI(base_url=proxy.base_url, api_key="unused", timeout=300, max_retries=0) as via,
            OpenAI(base_url=server.base_url, api_key="unused", timeout=300, max_retries=0) as direct,
        ):
            for mode in modes:
                client, model = (direct, server.model_id) if mode == "native" else (via, f"bench-{mode}")
                label = "native (direct, tools + tool_choice auto)" if mode == "native" else f"{mode} (toolshim)"
                results[label] = run_mode(client, model, mode, args)
    print(table(results, server.model_id))
    if args.json:
        args.json.write_text(json.dumps({k: [asdict(o) for o in v] for k, v in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
