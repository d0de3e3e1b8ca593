"""The real OpenAI SDK as client, with every chat completion it reads also checked raw.

``checked_openai(base_url)`` is an ``AsyncOpenAI`` whose HTTP transport keeps a copy of the bytes of
each ``/chat/completions`` response as they came off the wire, before the SDK parses them. When the
``async with`` block ends without an error, every 2xx answer is checked: a stream with
``check_deltas`` over its raw SSE (and it must end with ``[DONE]``), a JSON body with
``check_completion`` (a stream the SDK stopped reading before ``[DONE]``, or a body cut short, fails
the check). So one request serves both the SDK's own accumulator and the raw delta rules,
and a scripted upstream sees exactly the requests the test makes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from openai import AsyncOpenAI

from tests.deltas import check_completion, check_deltas, parse_sse


@dataclass
class Recorded:
    """One ``/chat/completions`` response: status, content type and the raw body read so far."""

    status: int
    content_type: str
    body: bytearray = field(default_factory=bytearray)

    def check(self) -> None:
        if not 200 <= self.status < 300:
            return
        text = self.body.decode()
        if self.content_type.startswith("text/event-stream"):
            chunks, done = parse_sse(text)
            assert done, "the stream did not end with data: [DONE]"
            check_deltas(chunks)
        else:
            check_completion(json.loads(text))


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, record: Recorded) -> None:
        self._inner, self._record = inner, record

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            self._record.body += part
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """The default httpx transport, keeping the raw body of every chat completion response."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.recorded: list[Recorded] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if not request.url.path.endswith("/chat/completions"):
            return response
        assert "content-encoding" not in response.headers, "the recorder expects an uncompressed body"
        record = Recorded(response.status_code, response.headers.get("content-type", ""))
        self.recorded.append(record)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, record),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()

    def check(self) -> int:
        """Check every recorded response; the number of 2xx answers checked."""
        for record in self.recorded:
            record.check()
        return sum(200 <= r.status < 300 for r in self.recorded)


class CheckedOpenAI(AsyncOpenAI):
    transport: RecordingTransport


@asynccontextmanager
async def checked_openai(base_url: str, **kwargs: Any) -> AsyncIterator[CheckedOpenAI]:
    """An ``AsyncOpenAI`` client (no retries) whose chat completions are checked raw when the block ends."""
    transport = RecordingTransport()
    kwargs.setdefault("api_key", "k")
    kwargs.setdefault("max_retries", 0)
    async with (
        httpx.AsyncClient(transport=transport, timeout=60) as http,
        CheckedOpenAI(base_url=base_url, http_client=http, **kwargs) as client,
    ):
        client.transport = transport
        yield client
    transport.check()
