"""The JSON work on toolshim's hot paths, timed with the json module and with orjson, in-process.

End to end (``bench/overhead.py --compare``) a JSON call is a few microseconds inside a request
of several hundred, so its gain drowns in the noise of a shared machine; here each path is timed
alone on payloads of the shapes the proxy handles, as the proxy calls it today and as it would
with orjson. Paths (and where they are in proxy/ today):

* ``read``: the client's body, ``json.loads(bytes)`` (handlers.read_json), per request;
* ``upstream dumps``: the body sent upstream, ``json.dumps(..., ensure_ascii=False,
  separators=(",", ":")).encode()`` (upstream/openai_http.py ``_post_chat``), per request;
* ``upstream loads``: a non-streamed answer, ``json.loads(bytes)`` (``complete``), per request;
* ``respond``: the non-streamed answer to the client (handlers ``_dumps`` via web.json_response);
* ``delta``: each upstream chunk of an emulated stream, ``json.loads(str)`` (emulation ``_delta``);
* ``sse``: each chunk sent to the client, ``encode(json.dumps(...))`` (sse.encode_json).

Usage: ``python bench/json_codecs.py [--repeat 7]`` (a few seconds). Needs orjson.
"""

from __future__ import annotations

import argparse
import json
import statistics
import timeit
from collections.abc import Callable
from typing import Any

try:
    import orjson
except ImportError:
    raise SystemExit("bench/json_codecs.py needs orjson: pip install orjson") from None

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "Does one thing well, described in a sentence or two for the model. " * 2,
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A file path."},
                    "mode": {"type": "string", "enum": ["read", "write", "append"]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
                "required": ["path"],
            },
        },
    }
    for i in range(8)
]


def conversation(turns: int, text: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful coding agent. " * 10}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Step {i}: " + "please look at the file ü " * (text // 25)})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i:024d}",
                        "type": "function",
                        "function": {"name": "tool_1", "arguments": json.dumps({"path": f"src/m{i}.py", "limit": 200})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i:024d}", "content": "def f():\n    return 1\n" * 20})
    return messages


REQUESTS = {
    "small": {"model": "m", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16},
    "agent 8 tools, 10 turns": {"model": "m", "tools": TOOLS, "messages": conversation(10, 200), "stream": True},
    "agent 8 tools, 100 turns": {"model": "m", "tools": TOOLS, "messages": conversation(100, 400), "stream": True},
}
COMPLETION = {
    "id": "chatcmpl-x",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello! How can I help you today?", "tool_calls": None},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18},
}
UPSTREAM_CHUNK = json.dumps(
    {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "system_fingerprint": "b1",
        "choices": [{"index": 0, "delta": {"content": " the"}, "logprobs": None, "finish_reason": None}],
    }
)
CLIENT_CHUNKS = {
    "text": {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": " the"}, "finish_reason": None}],
    },
    "tool call": {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_abc",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ],
    },
}


def sse_json(payload: Any) -> bytes:  # sse.encode_json today: the JSON never holds a raw line break
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if "\n" in data or "\r" in data:
        raise AssertionError
    return b"data: " + data.encode("utf-8") + b"\n\n"


def sse_orjson(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def dumps_utf8(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def cases() -> list[tuple[str, str, Callable[[], object], Callable[[], object]]]:
    """(path, payload, today, with orjson); each pair must give equal results."""
    out: list[tuple[str, str, Callable[[], object], Callable[[], object]]] = []
    for name, body in REQUESTS.items():
        raw = json.dumps(body).encode()
        out.append(
            (
                "read",
                f"{name} ({len(raw) / 1000:.1f} kB)",
                lambda raw=raw: json.loads(raw),
                lambda raw=raw: orjson.loads(raw),
            )
        )
        out.append(("upstream dumps", f"{name}", lambda b=body: dumps_utf8(b), lambda b=body: orjson.dumps(b)))
    raw = json.dumps(COMPLETION).encode()
    out.append(("upstream loads", f"completion ({len(raw)} B)", lambda: json.loads(raw), lambda: orjson.loads(raw)))
    out.append(
        (
            "respond",
            "completion",
            lambda: json.dumps(COMPLETION, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
            lambda: orjson.dumps(COMPLETION),
        )
    )
    out.append(
        (
            "delta",
            f"upstream chunk ({len(UPSTREAM_CHUNK)} B)",
            lambda: json.loads(UPSTREAM_CHUNK),
            lambda: orjson.loads(UPSTREAM_CHUNK),
        )
    )
    for name, chunk in CLIENT_CHUNKS.items():
        out.append(("sse", f"{name} chunk", lambda c=chunk: sse_json(c), lambda c=chunk: sse_orjson(c)))
    return out


def best_us(fn: Callable[[], object], repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat, number)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{'path':16}{'payload':34}{'json µs':>10}{'orjson µs':>11}{'saved µs':>10}{'speed-up':>10}")
    saved: dict[str, list[float]] = {}
    for path, payload, today, fast in cases():
        assert today() == fast() or json.loads(today()) == json.loads(fast()), (path, payload)  # type: ignore[arg-type]
        a, b = best_us(today, args.repeat), best_us(fast, args.repeat)
        saved.setdefault(path, []).append(a - b)
        print(f"{path:16}{payload:34}{a:10.2f}{b:11.2f}{a - b:10.2f}{a / b:9.1f}x")
    small = {path: values[0] for path, values in saved.items()}
    per_request = small["read"] + small["upstream dumps"] + small["upstream loads"] + small["respond"]
    per_chunk = small["delta"] + statistics.mean(saved["sse"])
    print(
        f"\nsaved with the small payloads: {per_request:.1f} µs per non-streamed native request "
        f"(read + upstream dumps + upstream loads + respond), {per_chunk:.1f} µs per emulated chunk (delta + sse)"
    )


if __name__ == "__main__":
    main()
