"""Single steps of agent loops, on tools and questions no loop task uses: does the first turn call a tool
when one is needed (and only then), and does the step after a result answer with what the result says?

The loop benchmark (``bench/agent_loops.py``) judges whole loops on a handful of tasks; each loop is one
sample. This asks many small, independent steps of the same two kinds, through a toolshim started here with
the demo rules (or ``--rules``/``--model``/``--set``), so a change to the prompt or to the folded results'
wording can be compared on questions it was not written for:

* ``first``: 10 questions a tool answers (a definition, a stock price, a translation, a population, ...)
  and 10 no tool does (a haiku, thanks, the capital of France, a joke, ...), each with a fitting tool and
  a distractor, or two distractors. Right: the fitting tool called first; wrong for the second kind: any call.
* ``answer``: 12 histories that end in a call's result (a menu search, flights, an on-call rota, opening
  hours, a stock level of 0, two failures, ...), a second unrelated tool offered; right: no call, and the
  answer holds the fact the result gives (a product name, a time, "not found").

Every question is asked without and with a system prompt of the kind frameworks send, ``--samples`` times
each (seeds 0, 1, ...) at the server's default sampling, non-streaming, one at a time.

``python bench/single_steps.py --upstream http://127.0.0.1:8080/v1 --upstream-model qwen2.5-coder-0.5b-instruct``
(or without ``--upstream``: the bundled model server is started).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai import OpenAI

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_loops import DEFAULT_RULES, load_rules  # noqa: E402
from scripts import local_stack  # noqa: E402

SYSTEM = (
    "You are a helpful assistant. Use a tool when it can answer the question. Once you have the tool results, "
    "answer the user in one or two short sentences."
)


def tool(name: str, description: str, **params: str) -> dict[str, Any]:
    properties = {key: {"type": "string", "description": text} for key, text in params.items()}
    schema = {"type": "object", "properties": properties, "required": list(params)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


TOOLS = {
    spec["function"]["name"]: spec
    for spec in (
        tool("define_word", "Look up the definition of an English word.", word="the word"),
        tool("calculator", "Evaluate an arithmetic expression, e.g. 2 * (3 + 4).", expression="the expression"),
        tool("get_weather", "Get the current weather in a city: temperature in Celsius.", city="City, e.g. Paris"),
        tool("get_stock_price", "Get the latest price of a stock by its ticker symbol.", symbol="ticker, e.g. MSFT"),
        tool("translate_text", "Translate text into another language.", text="the text", target_language="language"),
        tool("search_web", "Search the web and return the top results.", query="search terms"),
        tool("get_order_status", "Look up an order's status by its id.", order_id="the order id"),
        tool("send_email", "Send an email.", to="address", subject="subject", body="body"),
        tool("get_exchange_rate", "Get the exchange rate between two currencies.", base="ISO code", quote="ISO code"),
        tool("lookup_population", "Get the current population of a country or city.", place="the place"),
        tool("get_news", "Get today's top news headlines on a topic.", topic="the topic"),
        tool("list_files", "List the files in a directory.", path="the directory"),
        tool("get_local_time", "Get the current local time in a city.", city="the city"),
    )
}
# (question, tools offered: for a question a tool answers, that tool first)
NEEDS_TOOL = (
    ("What does 'ubiquitous' mean?", ("define_word", "calculator")),
    ("What's the meaning of the word serendipity?", ("define_word", "get_weather")),
    ("What is Tesla's stock price?", ("get_stock_price", "send_email")),
    ("Translate 'good morning' into Spanish.", ("translate_text", "get_weather")),
    ("How many people live in Canada?", ("lookup_population", "get_weather")),
    ("What's in the news about electric cars today?", ("get_news", "calculator")),
    ("How many euros is one US dollar worth today?", ("get_exchange_rate", "calculator")),
    ("Which files are in /tmp?", ("list_files", "send_email")),
    ("Is it raining in Dublin?", ("get_weather", "get_local_time")),
    ("What's the status of order 5521?", ("get_order_status", "send_email")),
)
NEEDS_NONE = (
    ("Write a limerick about a sleepy dog.", ("get_weather", "define_word")),
    ("Thank you, that helps a lot!", ("get_weather", "get_order_status")),
    ("What is the capital of Canada?", ("get_weather", "get_local_time")),
    ("Tell me a joke about cats.", ("get_stock_price", "get_news")),
    ("Write a Python function that reverses a string.", ("calculator", "define_word")),
    ("Hi! How are you?", ("get_weather", "send_email")),
    ("Give me three tips for better sleep.", ("search_web", "get_weather")),
    ("What is 7 plus 5?", ("get_weather", "translate_text")),
    ("Rewrite this more politely: send me the report now.", ("send_email", "translate_text")),
    ("Who wrote Romeo and Juliet?", ("get_stock_price", "get_weather")),
)


@dataclass(frozen=True)
class AnswerStep:
    question: str
    tool: dict[str, Any]
    arguments: dict[str, Any]
    result: Any  # a JSON value, or text as a framework words a failure
    expected: str  # a pattern the answer must hold (case aside)


ANSWER_STEPS = (
    AnswerStep(
        "Do you have any vegan pizzas under $15?",
        tool("search_menu", "Search the restaurant menu.", query="what to look for"),
        {"query": "vegan pizza"},
        {
            "results": [
                {"name": "Garden Delight", "vegan": True, "price_usd": 12},
                {"name": "Meat Feast", "vegan": False, "price_usd": 14},
                {"name": "Vegan Supreme", "vegan": True, "price_usd": 18},
            ]
        },
        r"garden",
    ),
    AnswerStep(
        "Is there a flight to Rome tomorrow morning?",
        tool("search_flights", "Find flights to a destination on a date.", destination="city", date="a day"),
        {"destination": "Rome", "date": "tomorrow"},
        {"flights": [{"flight": "AZ 611", "departs": "08:40"}, {"flight": "AZ 615", "departs": "19:10"}]},
        r"611|8:40",
    ),
    AnswerStep(
        "Who is on call this week?",
        tool("get_on_call", "Who is on call for a team this week.", team="team name"),
        {"team": "default"},
        {"name": "Dana Lee", "team": "SRE", "phone": "+1 555 0100"},
        r"dana",
    ),
    AnswerStep(
        "Is the Louvre open on Monday?",
        tool("get_opening_hours", "Opening hours of a museum or shop by weekday.", place="the place"),
        {"place": "Louvre"},
        {"place": "Louvre", "hours": {"monday": "09:00-18:00", "tuesday": "closed", "wednesday": "09:00-21:00"}},
        r"\byes\b|9:00|09:00|\bopen",
    ),
    AnswerStep(
        "Any hotel rooms free in Lisbon on Friday?",
        tool("search_hotels", "Find hotels with free rooms in a city on a date.", city="city", date="date"),
        {"city": "Lisbon", "date": "Friday"},
        {"hotels": [{"hotel": "Casa Azul", "price_eur": 95, "rooms_free": 2}]},
        r"casa azul",
    ),
    AnswerStep(
        "What's my account balance?",
        tool("get_balance", "The current balance of the user's account.", account="account id or 'main'"),
        {"account": "main"},
        {"balance": 1523.4, "currency": "EUR"},
        r"1[,.]?523",
    ),
    AnswerStep(
        "Can I get the blue sweater in medium?",
        tool("check_stock", "Stock of an item by size.", item="item name"),
        {"item": "blue sweater"},
        {"item": "blue sweater", "sizes": {"S": 3, "M": 0, "L": 2}},
        r"\bno\b|\bnot\b|out of stock|unavailable|sold out",
    ),
    AnswerStep(
        "Which books by Ursula K. Le Guin do you have?",
        tool("search_books", "Search the library catalogue.", author="author"),
        {"author": "Ursula K. Le Guin"},
        {"books": [{"title": "The Dispossessed", "year": 1974}, {"title": "A Wizard of Earthsea", "year": 1968}]},
        r"dispossessed|earthsea",
    ),
    AnswerStep(
        "What's the status of order Q123?",
        tool("get_order_status", "Look up an order's status by its id.", order_id="id"),
        {"order_id": "Q123"},
        {"error": "order not found: Q123"},
        r"not found|couldn|could not|unable|no order|doesn|does not|not exist|unknown|invalid",
    ),
    AnswerStep(
        "What's the weather in Atlantis?",
        tool("get_weather", "Get the current weather in a city.", city="city"),
        {"city": "Atlantis"},
        "Error: unknown city 'Atlantis'",
        r"unknown|couldn|could not|unable|\bnot\b|doesn|invalid",
    ),
    AnswerStep(
        "How long does shipping to Norway take?",
        tool("get_shipping_info", "Shipping times and costs by country.", country="country"),
        {"country": "Norway"},
        {"country": "Norway", "days_min": 5, "days_max": 8, "cost_usd": 19},
        r"\b[58]\b",
    ),
    AnswerStep(
        "Is Dr. Patel available on Thursday?",
        tool("get_availability", "A doctor's free appointment slots on a day.", doctor="name", day="weekday"),
        {"doctor": "Patel", "day": "Thursday"},
        {"doctor": "Dr. Patel", "day": "Thursday", "free_slots": ["10:30", "15:00"]},
        r"10:30|15:00|3:00",
    ),
)


def messages(system: bool, *turns: dict[str, Any]) -> list[dict[str, Any]]:
    return [*([{"role": "system", "content": SYSTEM}] if system else []), *turns]


def first_turn(client: OpenAI, model: str, question: str, names: Sequence[str], system: bool, seed: int) -> str:
    """The name of the first tool called, or "" when the model answered in text."""
    reply = client.chat.completions.create(
        model=model,
        messages=messages(system, {"role": "user", "content": question}),
        tools=[TOOLS[name] for name in names],
        max_tokens=200,
        seed=seed,
    )
    calls = reply.choices[0].message.tool_calls or []
    return calls[0].function.name if calls else ""


def answer_step(client: OpenAI, model: str, step: AnswerStep, system: bool, seed: int) -> tuple[bool, str]:
    """(right, what the client got) for the step after ``step``'s result."""
    call = {"id": "call_1", "type": "function", "function": {"name": step.tool["function"]["name"]}}
    call["function"]["arguments"] = json.dumps(step.arguments)
    result = step.result if isinstance(step.result, str) else json.dumps(step.result)
    history = messages(
        system,
        {"role": "user", "content": step.question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    )
    reply = client.chat.completions.create(
        model=model,
        messages=history,
        tools=[step.tool, TOOLS["send_email"]],
        max_tokens=200,
        seed=seed,
    )
    message = reply.choices[0].message
    if message.tool_calls:
        return False, "call " + ", ".join(c.function.name for c in message.tool_calls)
    text = message.content or ""
    return re.search(step.expected, text, re.IGNORECASE) is not None, text


def mark(right: bool, part: str, system: bool, seed: int) -> str:
    return f"  {'✓' if right else '✗'} {part:6} {'S' if system else '-'} {seed}"


def run_first(client: OpenAI, model: str, samples: int) -> dict[str, int]:
    counts = {"needs_tool": 0, "needs_tool_right": 0, "needs_none": 0, "needs_none_called": 0}
    for needed, cases in ((True, NEEDS_TOOL), (False, NEEDS_NONE)):
        for question, names in cases:
            for system in (False, True):
                for seed in range(samples):
                    called = first_turn(client, model, question, names, system, seed)
                    right = called == names[0] if needed else not called
                    if needed:
                        counts["needs_tool"] += 1
                        counts["needs_tool_right"] += right
                    else:
                        counts["needs_none"] += 1
                        counts["needs_none_called"] += not right
                    print(f"{mark(right, 'first', system, seed)} {called or '(text)':18} {question}")
    return counts


def run_answers(client: OpenAI, model: str, samples: int) -> dict[str, int]:
    counts = {"answer_steps": 0, "answer_steps_right": 0}
    for step in ANSWER_STEPS:
        for system in (False, True):
            for seed in range(samples):
                right, got = answer_step(client, model, step, system, seed)
                counts["answer_steps"] += 1
                counts["answer_steps_right"] += right
                print(f"{mark(right, 'answer', system, seed)} {step.question[:40]:40} {' '.join(got.split())[:90]}")
    return counts


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rules", type=Path, default=DEFAULT_RULES, help="rules file (default: %(default)s)")
    parser.add_argument("--model", help="the exposed model name (default: the first rule without a wildcard)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="change the rule")
    parser.add_argument("--parts", default="first,answer", help="first, answer, or both (default)")
    parser.add_argument("--samples", type=int, default=2, help="seeds per question and system prompt")
    parser.add_argument("--upstream", help="an OpenAI-compatible server already running (with --upstream-model)")
    parser.add_argument("--upstream-model", help="the model name --upstream serves")
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args(argv)
    if bool(args.upstream) != bool(args.upstream_model):
        parser.error("--upstream and --upstream-model go together")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    parts = set(args.parts.split(","))
    with local_stack.services_stopped_on_exit() as started:
        if args.upstream:
            upstream, upstream_model = args.upstream.rstrip("/"), args.upstream_model
        else:
            server = local_stack.start_model_server("qwen")
            started.append(server)
            upstream, upstream_model = server.root + "/v1", server.model_id
        rules, model, rule = load_rules(args.rules, args.model, args.set, upstream, upstream_model)
        proxy = local_stack.start_toolshim(rules)
        started.append(proxy)
        client = OpenAI(base_url=proxy.base_url, api_key="not-needed", max_retries=0, timeout=300)
        counts: dict[str, int] = {}
        if "first" in parts:
            counts |= run_first(client, model, args.samples)
        if "answer" in parts:
            counts |= run_answers(client, model, args.samples)
    print(json.dumps({"rule": {k: v for k, v in rule.items() if k != "match"}, **counts}))
    if args.json:
        args.json.write_text(json.dumps(counts, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
