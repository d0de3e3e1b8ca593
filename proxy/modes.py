"""Choosing how to serve a chat request: native pass-through, emulation, or ``auto``.

``auto`` tries native first; when the upstream rejects the tools (Ollama's "does not support
tools", vLLM's "--enable-auto-tool-choice", a 400/422/500 that names tools) it retries emulated
with the rule's ``fallback_format`` and remembers that model for ``auto_fallback_ttl`` seconds.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import native
from .context import RequestInfo
from .emulation import Emulator
from .errors import DeadlineExceeded, UpstreamHTTPError
from .formats import get_format
from .metrics import Metrics
from .pipeline import ChunkFactory, accumulate
from .rewrite import TOOL_FIELDS, build_plan, uses_tools
from .rules import EMULATED_MODES, Resolved
from .sse import DONE_BYTES, encode_json
from .upstream import Upstream

_TOOLS_REJECTED = re.compile(r"tool|function[ _-]?call", re.IGNORECASE)
_MAX_REMEMBERED = 10_000
DEFAULT_DUMP_DIR = Path("toolshim-dumps")  # used when a rule sets dump_raw_output and TOOLSHIM_DUMP_DIR is unset


def rejects_tools(err: UpstreamHTTPError) -> bool:
    """Does this upstream error say the model or server cannot take ``tools``?"""
    return err.status in (400, 404, 422, 500, 501) and bool(_TOOLS_REJECTED.search(err.message))


@dataclass(slots=True)
class ChatJob:
    """One chat request with everything needed to serve it in any mode."""

    raw: dict[str, Any]
    requested_model: str
    resolved: Resolved
    upstream: Upstream
    info: RequestInfo
    metrics: Metrics
    auto_memory: dict[str, float]
    dump_dir: Path | None = None
    factory: ChunkFactory | None = None  # the emulated stream's chunk factory, once it exists

    @property
    def stream(self) -> bool:
        return bool(self.raw.get("stream"))

    def native_body(self) -> dict[str, Any]:
        return {**self.raw, "model": self.resolved.upstream_model(self.requested_model)}

    def emulator(self, format_name: str) -> Emulator:
        rule = self.resolved.rule
        plan = build_plan(self.raw, rule, get_format(format_name), self.resolved.upstream_model(self.requested_model))
        include_usage = bool((self.raw.get("stream_options") or {}).get("include_usage")) or not self.stream
        dump = self.dump_dir or (DEFAULT_DUMP_DIR if rule.dump_raw_output else None)
        emulator = Emulator(self.upstream, plan, rule, self.requested_model, self.info, self.metrics,
                            include_usage, dump)
        self.factory = emulator.factory
        return emulator

    def finish_chunk(self, reason: str) -> dict[str, Any]:
        """A finish chunk that belongs to the stream already sent (same id, model, created)."""
        if self.factory is not None:
            return self.factory.finish(reason)
        head = self.info.stream_head or {}
        factory = ChunkFactory(model=str(head.get("model") or self.requested_model))
        if isinstance(head.get("id"), str):
            factory.id = head["id"]
        if isinstance(head.get("created"), int):
            factory.created = head["created"]
        return factory.finish(reason)

    def note_deadline(self) -> None:
        self.metrics.policy_actions.labels(self.info.model, "max_request_seconds").inc()
        self.info.extra.setdefault("policies", []).append("max_request_seconds")

    def emulation_format(self) -> str | None:
        """The format to emulate with now, or ``None`` to go native."""
        mode = self.resolved.rule.tool_mode
        if not uses_tools(self.raw):
            return None
        if mode in EMULATED_MODES:
            return mode
        if mode == "auto" and self.auto_memory.get(self._memory_key(), 0.0) > time.monotonic():
            return self.resolved.rule.fallback_format
        return None

    def _memory_key(self) -> str:
        return f"{self.resolved.label}\0{self.requested_model}"

    def remember_fallback(self) -> None:
        if len(self.auto_memory) >= _MAX_REMEMBERED:
            self.auto_memory.clear()
        self.auto_memory[self._memory_key()] = time.monotonic() + self.resolved.rule.auto_fallback_ttl
        self.metrics.auto_fallbacks.labels(self.info.model).inc()

    def can_fall_back(self, err: UpstreamHTTPError) -> bool:
        return self.resolved.rule.tool_mode == "auto" and uses_tools(self.raw) and rejects_tools(err)

    def can_retry_without_tools(self, err: UpstreamHTTPError) -> bool:
        """Native rules with ``retry_without_tools``: the upstream failed because of the tools."""
        rule = self.resolved.rule
        return (rule.retry_without_tools and rule.tool_mode == "native" and bool(self.raw.get("tools") or
                self.raw.get("functions")) and rejects_tools(err))

    def without_tools_body(self) -> dict[str, Any]:
        self.metrics.policy_actions.labels(self.info.model, "retry_without_tools").inc()
        self.info.extra.setdefault("policies", []).append("retry_without_tools")
        body = {k: v for k, v in self.native_body().items() if k not in TOOL_FIELDS}
        return body


async def complete(job: ChatJob) -> dict[str, Any]:
    """A non-streaming answer in whichever mode applies."""
    fmt = job.emulation_format()
    if fmt is None:
        try:
            return await native.complete(job.upstream, job.native_body(), job.info)
        except UpstreamHTTPError as err:
            if job.can_retry_without_tools(err):
                return await native.complete(job.upstream, job.without_tools_body(), job.info)
            if not job.can_fall_back(err):
                raise
            job.remember_fallback()
            fmt = job.resolved.rule.fallback_format
    job.info.tool_mode = fmt if job.resolved.rule.tool_mode == "auto" else job.info.tool_mode
    return accumulate([chunk async for chunk in job.emulator(fmt).chunks()])


async def stream(job: ChatJob) -> AsyncIterator[bytes]:
    """SSE bytes in whichever mode applies; falls back before anything was sent."""
    fmt = job.emulation_format()
    if fmt is None:
        relay = native.stream(job.upstream, job.native_body(), job.info)
        try:
            first = await anext(relay, None)
        except UpstreamHTTPError as err:
            await relay.aclose()
            if job.can_retry_without_tools(err):
                async for piece in native.stream(job.upstream, job.without_tools_body(), job.info):
                    yield piece
                return
            if not job.can_fall_back(err):
                raise
            job.remember_fallback()
            fmt = job.resolved.rule.fallback_format
        else:
            if first is not None:
                yield first
            async for piece in relay:
                yield piece
            return
    chunks = job.emulator(fmt).chunks()
    try:
        async for chunk in chunks:
            yield encode_json(chunk)
    finally:
        await chunks.aclose()
    yield DONE_BYTES


async def with_deadline(job: ChatJob, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Bound a whole stream: before the first byte expiry is a 504; after it, a clean finish."""
    seconds = job.resolved.rule.max_request_seconds
    if seconds is None:
        async for piece in chunks:
            yield piece
        return
    deadline = asyncio.get_running_loop().time() + seconds
    sent = False
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    piece = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                job.note_deadline()
                if not sent:
                    raise DeadlineExceeded(f"The request took longer than its limit of {seconds:g} seconds.") \
                        from None
                yield encode_json(job.finish_chunk("length"))
                yield DONE_BYTES
                return
            sent = True
            yield piece
    finally:
        await chunks.aclose()


async def complete_within(job: ChatJob) -> dict[str, Any]:
    seconds = job.resolved.rule.max_request_seconds
    if seconds is None:
        return await complete(job)
    try:
        async with asyncio.timeout(seconds):
            return await complete(job)
    except TimeoutError:
        job.note_deadline()
        raise DeadlineExceeded(f"The request took longer than its limit of {seconds:g} seconds.") from None
