"""Tool schemas are data: a ``$ref`` never makes toolshim fetch a URL or read a file.

A client's ``parameters`` schema with ``$ref`` to ``http://`` (a listener standing in for an internal
host) or ``file://`` goes through a whole emulated call, whose arguments are validated against it: the
listener receives nothing, the request is answered at once, and the call reaches the client. A local
``#/$defs`` ref still validates.

The listener runs in a thread of its own, not on the test's event loop: a fetch made from the proxy's
loop (the bug) would otherwise block the only loop that could answer it, and the test would hang
instead of failing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.fakes import FakeUpstream, Reply, text_stream
from tests.test_emulation import call_text, emulated, pieces

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


class Listener(ThreadingHTTPServer):
    """Answers every GET with a schema and records the paths asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__(("127.0.0.1", 0), _Recorder)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, Listener)
        self.server.paths.append(self.path)
        body = b'{"type": "string", "definitions": {"day": {"type": "string"}}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def tool(parameters: dict[str, Any]) -> list[Any]:
    return [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]


def remote_refs(url: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "city": {"$ref": f"{url}/city.json"},
            "unit": {"$ref": "file:///etc/passwd"},
            "day": {"$ref": f"{url}/day.json#/definitions/day"},
        },
        "required": ["city"],
    }


@pytest.mark.parametrize("fmt", ["hermes", "pythonic", "react"])
async def test_a_remote_ref_in_a_tool_schema_is_never_fetched(
    start_proxy: Any, fake_upstream: FakeUpstream, listener: Listener, fmt: str
) -> None:
    fake_upstream.script(Reply(pieces=text_stream(pieces(call_text(fmt)))))
    proxy = await start_proxy(models=emulated(fmt))
    started = time.monotonic()
    async with AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0, timeout=20) as client:
        reply = await client.chat.completions.create(model="m", messages=USER, tools=tool(remote_refs(listener.url)))
    assert time.monotonic() - started < 10
    assert listener.paths == []
    calls = reply.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Paris"}]


async def test_a_local_ref_still_validates(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """``city`` must be an integer by a local ref: the model's string is refused, a re-ask follows."""
    parameters = {
        "type": "object",
        "$defs": {"code": {"type": "integer"}},
        "properties": {"city": {"$ref": "#/$defs/code"}},
        "required": ["city"],
    }
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text("hermes")))),
        Reply(pieces=text_stream(pieces(call_text("hermes", args={"city": 75})))),
    )
    proxy = await start_proxy(models=emulated("hermes"))
    async with AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0) as client:
        reply = await client.chat.completions.create(model="m", messages=USER, tools=tool(parameters))
    calls = reply.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": 75}]
    assert len(fake_upstream.requests) == 2
