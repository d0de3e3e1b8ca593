"""The toolshim demo: a small local model, which has no tool-calling API, calls tools through toolshim.

``python demo/agent.py`` (or ``make demo``) starts the llama.cpp server with Qwen2.5-Coder-0.5B
(fetched and verified by ``make model``), starts toolshim with ``demo/rules.json5`` (the model is
spoken to in the ``hermes`` text format with folded tool results, the best measured for it on agent
loops; ``--format`` picks another),
then runs a short agent loop with the OpenAI SDK: the model asks for tools as structured ``tool_calls``,
this script runs them (a fake weather lookup, a real safe calculator) and sends the results back until
the model answers.
Every process it starts is stopped at the end, on errors and on Ctrl-C too.

Use another model server instead of the bundled one (Ollama, LM Studio, vLLM, llama.cpp's own):

    TOOLSHIM_DEMO_UPSTREAM=http://127.0.0.1:11434/v1 TOOLSHIM_DEMO_MODEL=qwen2.5-coder:0.5b python demo/agent.py

(``TOOLSHIM_DEMO_API_KEY`` is sent upstream as the bearer key if the server needs one.)

Exit status: 0 when at least one structured tool call went through and the loop ended; 1 if the
model never made one; 2 on a setup or API failure; 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import json5
from openai import APIError, OpenAI

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python demo/agent.py` puts demo/ on the path, not the repo root
    sys.path.insert(0, str(ROOT))

from demo.tools import TOOLS, execute  # noqa: E402
from scripts.local_model import LocalModelError, spec_for  # noqa: E402
from scripts.local_stack import Service, services_stopped_on_exit, start_model_server, start_toolshim  # noqa: E402

FORMATS = ("hermes", "react", "xml", "caret", "qwen3_xml", "morph_xml", "pythonic")
DEMO_MODEL = "demo-model"
DEFAULT_QUESTIONS = ("What is the weather in Paris right now?", "What is 17 * 23 + 4?")
SYSTEM = (
    "You are a helpful assistant. Use a tool when it can answer the question. "
    "Once you have the tool result, answer the user in one short sentence."
)


def parse_args() -> argparse.Namespace:
    """The demo's options; every one has a sensible default."""
    parser = argparse.ArgumentParser(description="A local model calls tools through toolshim.")
    parser.add_argument("--format", choices=FORMATS, default="hermes", help="tool format toolshim speaks")
    parser.add_argument("--model", choices=("qwen", "smollm"), default="qwen", help="bundled model to serve")
    parser.add_argument(
        "--question", action="append", help="what the user asks (repeatable; each is its own conversation)"
    )
    parser.add_argument("--max-turns", type=int, default=6, help="model turns before giving up")
    parser.add_argument("--max-tokens", type=int, default=256, help="token cap per model turn")
    parser.add_argument("--no-responses", action="store_true", help="skip the Responses API round")
    return parser.parse_args()


def say(prefix: str, text: str) -> None:
    """One readable line of the transcript."""
    print(f"{prefix} {text}", flush=True)


def load_rules(fmt: str, upstream_url: str, upstream_model: str, api_key_env: str | None) -> dict[str, Any]:
    """``demo/rules.json5`` with the live upstream address, model name and format filled in."""
    rules: dict[str, Any] = json5.loads((ROOT / "demo" / "rules.json5").read_text(encoding="utf-8"))
    upstream = rules["upstreams"]["local"]
    upstream["base_url"] = upstream_url
    if api_key_env:
        upstream["api_key_env"] = api_key_env
    for rule in rules["models"]:
        rule.update(tool_mode=fmt, upstream_model=upstream_model)
    return rules


def start_upstream(args: argparse.Namespace, started: list[Service]) -> tuple[str, str, str | None]:
    """The model server to use: ``$TOOLSHIM_DEMO_UPSTREAM`` if set, else our own llama.cpp server."""
    external = os.environ.get("TOOLSHIM_DEMO_UPSTREAM")
    if external:
        model = os.environ.get("TOOLSHIM_DEMO_MODEL")
        if not model:
            raise LocalModelError("TOOLSHIM_DEMO_UPSTREAM needs TOOLSHIM_DEMO_MODEL (the model name that server uses)")
        key_env = "TOOLSHIM_DEMO_API_KEY" if os.environ.get("TOOLSHIM_DEMO_API_KEY") else None
        say("[setup]", f"using the model server at {external} (model {model!r})")
        return external.rstrip("/"), model, key_env
    say("[setup]", f"starting the llama.cpp server with {spec_for(args.model).filename} (CPU)")
    last = [0.0]

    def progress(elapsed: float) -> None:
        if elapsed - last[0] >= 3:
            last[0] = elapsed
            say("[setup]", f"  loading the model... {elapsed:.0f} s")

    began = time.monotonic()
    server = start_model_server(args.model, on_wait=progress)
    started.append(server)
    say("[setup]", f"model server ready on {server.base_url} in {time.monotonic() - began:.1f} s")
    return server.base_url, server.model_id, None


def run_agent(client: OpenAI, args: argparse.Namespace) -> int:
    """Each question in its own conversation; the number of structured tool calls made in all."""
    return sum(run_question(client, question, args) for question in args.question or DEFAULT_QUESTIONS)


def run_question(client: OpenAI, question: str, args: argparse.Namespace) -> int:
    """The agent loop: ask, run each structured tool call, send results back, until a text answer.

    One guard, as agents commonly have: a call repeated with the same arguments is not run again;
    the model is asked once more with ``tool_choice: "none"`` to answer from the results it has
    (small models tend to repeat a call instead of reading its result).
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    say("\nuser:", question)
    done: set[tuple[str, str]] = set()
    tool_choice = "auto"
    calls = 0
    for turn in range(1, args.max_turns + 1):
        began = time.monotonic()
        response = client.chat.completions.create(
            model=DEMO_MODEL,
            messages=messages,
            tools=TOOLS,
            temperature=0,
            max_tokens=args.max_tokens,
            tool_choice=tool_choice,
        )
        message, took = response.choices[0].message, time.monotonic() - began
        if not message.tool_calls:
            say("assistant:", (message.content or "").strip() or "(empty answer)")
            say("  ", f"[{calls} tool call(s), {turn} model turn(s), last one {took:.1f} s]")
            return calls
        wanted = [(c.function.name, normalized(c.function.arguments)) for c in message.tool_calls]
        if all(key in done for key in wanted):
            say("  ·", f"repeated {wanted[0][0]} call, not run again; asking for the answer (tool_choice none)")
            tool_choice = "none"
            continue
        messages.append(
            {
                "role": "assistant",
                "content": message.content or "",
                "tool_calls": [call.model_dump() for call in message.tool_calls],
            }
        )
        for call, key in zip(message.tool_calls, wanted, strict=True):
            calls += 1
            done.add(key)
            say("  →", f"{call.function.name}({call.function.arguments})   [model turn {turn}, {took:.1f} s]")
            result = execute(call.function.name, json.loads(call.function.arguments))
            say("  ←", result)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    say("assistant:", f"(no final answer within {args.max_turns} model turns)")
    return calls


RESPONSES_QUESTION = "What is the weather in Tokyo right now?"


def run_responses_round(client: OpenAI, args: argparse.Namespace) -> int:
    """The same loop through ``/v1/responses``: a ``function_call`` item, its result sent back with
    ``previous_response_id`` (toolshim keeps the conversation), then the answer (tool_choice none)."""
    tools: list[Any] = [{"type": "function", **tool["function"]} for tool in TOOLS]
    say("\nuser (Responses API):", RESPONSES_QUESTION)
    began = time.monotonic()
    first = client.responses.create(
        model=DEMO_MODEL,
        instructions=SYSTEM,
        input=RESPONSES_QUESTION,
        tools=tools,
        temperature=0,
        max_output_tokens=args.max_tokens,
    )
    calls = [item for item in first.output if item.type == "function_call"]
    if not calls:
        say("assistant:", first.output_text.strip() or "(empty answer)")
        return 0
    results: list[Any] = []
    for call in calls:
        say("  →", f"{call.name}({call.arguments})   [function_call {call.id}, {time.monotonic() - began:.1f} s]")
        result = execute(call.name, json.loads(call.arguments))
        say("  ←", result)
        results.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    answer = client.responses.create(
        model=DEMO_MODEL,
        instructions=SYSTEM,
        previous_response_id=first.id,
        input=results,
        tools=tools,
        tool_choice="none",
        temperature=0,
        max_output_tokens=args.max_tokens,
    )
    say("assistant:", answer.output_text.strip() or "(empty answer)")
    say("  ", f"[{len(calls)} function_call item(s); continued with previous_response_id={first.id[:16]}…]")
    return len(calls)


def normalized(arguments: str) -> str:
    """Arguments as canonical JSON, so the same call spelled differently is recognised as a repeat."""
    return json.dumps(json.loads(arguments), sort_keys=True)


def main() -> int:
    """Start what is needed, run the agent, stop everything this process started."""
    args = parse_args()
    began = time.monotonic()
    try:
        with services_stopped_on_exit() as started:
            upstream_url, upstream_model, key_env = start_upstream(args, started)
            proxy = start_toolshim(load_rules(args.format, upstream_url, upstream_model, key_env))
            started.append(proxy)
            say("[setup]", f"toolshim ready on {proxy.base_url}: model {DEMO_MODEL!r} -> {args.format} format")
            with OpenAI(base_url=proxy.base_url, api_key="unused", timeout=300, max_retries=0) as client:
                calls = run_agent(client, args)
                if not args.no_responses:
                    calls += run_responses_round(client, args)
    except KeyboardInterrupt:
        say("[stopped]", "interrupted; every process the demo started has been stopped")
        return 130
    except (LocalModelError, APIError) as exc:
        say("[error]", str(exc))
        return 2
    say("\n[done]", f"{calls} structured tool call(s); all processes stopped; total {time.monotonic() - began:.1f} s")
    if not calls:
        say("[fail]", "the model made no structured tool call")
    return 0 if calls else 1


if __name__ == "__main__":
    sys.exit(main())
