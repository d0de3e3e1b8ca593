"""Choosing how to serve a chat request: native pass-through, emulation, or ``auto``.

``auto`` tries native first; when the upstream rejects the tools (Ollama's "does not support
tools", vLLM's "--enable-auto-tool-choice", a 400/422/500 that names tools) it retries emulated
with the rule's ``fallback_format`` and remembers that model for ``auto_fallback_ttl`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..config.rules import Resolved
from ..constrain.grammars import GRAMMARS, Constraining, body_fields
from ..formats import get_format
from ..observe.context import RequestInfo
from ..observe.dumps import DEFAULT_DUMP_DIR, DumpWriter
from ..observe.metrics import Metrics
from ..upstream import Upstream
from ..upstream import relay as native
from ..upstream.delta import well_formed
from ..wire.errors import DeadlineExceeded, UpstreamHTTPError, UpstreamProtocolError
from ..wire.sse import DONE_BYTES, encode_json
from .chunks import ChunkFactory, accumulate, split_completion
from .emulation import Emulator
from .rewrite import EmulationPlan, build_plan
from .turn import ChatTurn

log = logging.getLogger(__name__)
_TOOLS_REJECTED = re.compile(r"tool|function[ _-]?call", re.IGNORECASE)
_MAX_REMEMBERED = 10_000
T = TypeVar("T")
R = TypeVar("R")


def rejects_tools(err: UpstreamHTTPError) -> bool:
    """Does this upstream error say the model or server cannot take ``tools``?"""
    return err.status in (400, 404, 422, 500, 501) and bool(_TOOLS_REJECTED.search(err.message))


@dataclass(slots=True)
class ChatJob:
    """One chat request with everything needed to serve it in any mode."""

    turn: ChatTurn
    resolved: Resolved
    upstream: Upstream
    info: RequestInfo
    metrics: Metrics
    auto_memory: dict[str, float]
    dump_dir: Path | None = None
    log_content: bool = False
    constraint_dialect: str = "none"  # the upstream's (rules.UpstreamConfig.constraint_dialect)
    emulator: Emulator | None = None  # once the emulated path started

    @property
    def upstream_model(self) -> str:
        return self.resolved.upstream_model(self.turn.model)

    def native_body(self) -> dict[str, Any]:
        return self.turn.native_body(self.upstream_model)

    def start_emulator(self, format_name: str) -> Emulator:
        rule = self.resolved.rule
        plan = build_plan(self.turn, rule, get_format(format_name), self.upstream_model)
        folder = self.dump_dir or (DEFAULT_DUMP_DIR if rule.dump_raw_output else None)
        self.emulator = Emulator(
            self.upstream,
            plan,
            rule,
            self.turn.model,
            self.info,
            self.metrics,
            self.turn.include_usage,
            DumpWriter(folder) if folder else None,
            self.log_content,
            buffered=not self.turn.stream,
            constraint=self._constraint(plan),
        )
        return self.emulator

    def _constraint(self, plan: EmulationPlan) -> Constraining | None:
        """The decoding constraint for this plan: where the rule asks for one, the upstream takes
        one, it has not refused one lately, and the format and tools have a grammar."""
        if self.resolved.rule.constrained is False or self.constraint_dialect == "none":
            return None
        if self.auto_memory.get(self._constraint_key(), 0.0) > time.monotonic():
            return None
        grammar = GRAMMARS.get(plan.format.name, plan.tools, plan.tool_choice, plan.prompted_calls, plan.lenient)
        if grammar is None:
            return None
        self.metrics.record_grammar(plan.format.name, grammar.cached, grammar.build_seconds)
        self.info.grammar = f"{'cached' if grammar.cached else 'built'} {grammar.build_seconds * 1e3:.3f} ms"
        log.debug(
            "grammar: %d chars, built in %.1f ms (cached: %s)",
            len(grammar.text),
            grammar.build_seconds * 1e3,
            grammar.cached,
        )
        return Constraining(body_fields(self.constraint_dialect, grammar.text), self._remember_constraint_refused)

    def _constraint_key(self) -> str:
        return f"constraint\0{self.resolved.upstream_name}"

    def _remember_constraint_refused(self) -> None:
        """The upstream refused a constraint: none goes to it for ``auto_fallback_ttl`` seconds."""
        if len(self.auto_memory) >= _MAX_REMEMBERED:
            self.auto_memory.clear()
        self.auto_memory[self._constraint_key()] = time.monotonic() + self.resolved.rule.auto_fallback_ttl
        self.note_policy("constraint_refused")

    def finish_chunk(self, reason: str) -> dict[str, Any]:
        """A finish chunk that belongs to the stream already sent (same id, model, created)."""
        if self.emulator is not None:
            return self.emulator.builder.deadline_finish()
        return ChunkFactory.continuing(self.info.stream_head or {}, self.turn.model).finish(reason)

    def note_policy(self, action: str) -> None:
        self.metrics.record_policies(self.info.model, [action])
        self.info.policies.append(action)

    def emulation_format(self) -> str | None:
        """The format to emulate with now, or ``None`` to go native."""
        rule = self.resolved.rule
        if not self.turn.uses_tools:  # an emulated rule reads <think> and counts usage with or without tools
            return rule.tool_mode if rule.emulated and not self.turn.relay_only else None
        if rule.emulated:
            return rule.tool_mode
        if rule.tool_mode == "auto" and self.auto_memory.get(self._memory_key(), 0.0) > time.monotonic():
            return rule.fallback_format
        return None

    def _memory_key(self) -> str:
        return f"{self.resolved.label}\0{self.turn.model}"

    def remember_fallback(self) -> None:
        if len(self.auto_memory) >= _MAX_REMEMBERED:
            self.auto_memory.clear()
        self.auto_memory[self._memory_key()] = time.monotonic() + self.resolved.rule.auto_fallback_ttl
        self.metrics.record_fallback(self.info.model)

    def can_fall_back(self, err: UpstreamHTTPError) -> bool:
        return self.resolved.rule.tool_mode == "auto" and self.turn.uses_tools and rejects_tools(err)

    def can_retry_without_tools(self, err: UpstreamHTTPError) -> bool:
        """Native rules with ``retry_without_tools``: the upstream failed because of the tools."""
        rule = self.resolved.rule
        return (
            rule.retry_without_tools and rule.tool_mode == "native" and bool(self.turn.tool_defs) and rejects_tools(err)
        )

    def without_tools_body(self) -> dict[str, Any]:
        self.note_policy("retry_without_tools")
        return self.turn.without_tools().native_body(self.upstream_model)


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
    return accumulate([chunk async for chunk in job.start_emulator(fmt).chunks()])


def stream(job: ChatJob) -> AsyncGenerator[bytes, None]:
    """SSE bytes in whichever mode applies; falls back before anything was sent. A request emulated
    from the start gets the emulator's own stream: no layer between it and the handler."""
    fmt = job.emulation_format()
    if fmt is not None:
        return _emulator(job, fmt).sse()
    limit = job.resolved.rule.first_token_timeout
    return _serve(job, lambda body: native.stream(job.upstream, body, job.info, limit), Emulator.sse)


def chat_chunks(job: ChatJob) -> AsyncGenerator[dict[str, Any], None]:
    """Chat chunk dicts in whichever mode applies: the input of another front end (Responses).

    Native answers are decoded (streamed) or split into chunks (not streamed); the fallbacks
    (``auto``, ``retry_without_tools``) happen before the first chunk, as in ``stream``."""
    fmt = job.emulation_format()
    if fmt is not None:
        return _emulator(job, fmt).chunks()
    return _serve(job, lambda body: _native_chunks(job, body), Emulator.chunks)


def _emulator(job: ChatJob, fmt: str) -> Emulator:
    """The request's emulator in format ``fmt`` (an ``auto`` rule's request names it its tool mode)."""
    job.info.tool_mode = fmt if job.resolved.rule.tool_mode == "auto" else job.info.tool_mode
    return job.start_emulator(fmt)


_NOT_PULLED: Any = object()  # the native source's first item has not been read yet
_EXHAUSTED: Any = object()  # the native source ended before its first item


async def _serve(
    job: ChatJob,
    open_native: Callable[[dict[str, Any]], AsyncGenerator[T, None]],
    emulated: Callable[[Emulator], AsyncGenerator[T, None]],
) -> AsyncGenerator[T, None]:
    """Items in whichever mode applies. Native first (for native and remembered-``auto`` rules); an
    upstream that rejects the tools before the first item is retried without them
    (``retry_without_tools``) or, for ``auto``, emulated with the fallback format."""
    fmt = job.emulation_format()
    if fmt is None:
        source = open_native(job.native_body())
        try:
            first = await anext(source, _EXHAUSTED)
        except UpstreamHTTPError as err:
            await source.aclose()
            if job.can_retry_without_tools(err):
                source, first = open_native(job.without_tools_body()), _NOT_PULLED
            elif job.can_fall_back(err):
                job.remember_fallback()
                fmt = job.resolved.rule.fallback_format
            else:
                raise
        if fmt is None:
            try:  # the native source's items, the first one already read (or not); always closed
                if first is not _NOT_PULLED and first is not _EXHAUSTED:
                    yield first
                if first is not _EXHAUSTED:
                    async for item in source:
                        yield item
            finally:
                await source.aclose()
            return
    items = emulated(_emulator(job, fmt))
    try:  # closed however the consumer stops (the upstream with it)
        async for item in items:
            yield item
    finally:
        await items.aclose()


async def _native_chunks(job: ChatJob, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
    if not job.turn.stream:
        completion = await native.complete(job.upstream, body, job.info)
        if not isinstance(completion.get("choices"), list):  # read as an empty answer otherwise
            raise UpstreamProtocolError(f"upstream '{job.upstream.name}' returned a body that is not a chat completion")
        for chunk in split_completion(well_formed(completion)):
            yield chunk
        return
    async for chunk in native.chunks(job.upstream, body, job.info, job.resolved.rule.first_token_timeout):
        yield chunk


def with_deadline(job: ChatJob, chunks: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    """Bound a whole stream: before the first byte expiry is a 504; after it, a clean finish."""
    return bounded(job, chunks, lambda: [encode_json(job.finish_chunk("length")), DONE_BYTES])


def bounded(job: ChatJob, items: AsyncGenerator[T, None], on_expiry: Callable[[], list[T]]) -> AsyncGenerator[T, None]:
    """Bound a stream of any items by the rule's deadline: before the first item expiry is a 504;
    after it, ``on_expiry()`` ends the stream (a finish with reason ``length``). Without a deadline
    ``items`` themselves: a layer that only passes items on costs every item a resumption."""
    seconds = job.resolved.rule.max_request_seconds
    return items if seconds is None else _bounded(job, items, on_expiry, seconds)


async def _bounded(
    job: ChatJob, items: AsyncGenerator[T, None], on_expiry: Callable[[], list[T]], seconds: float
) -> AsyncGenerator[T, None]:
    deadline = asyncio.get_running_loop().time() + seconds
    sent = False
    try:
        while True:
            scope = asyncio.timeout_at(deadline)
            try:
                async with scope:
                    item = await anext(items)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if not scope.expired():
                    raise  # an upstream timeout (also a TimeoutError), not the deadline
                job.note_policy("max_request_seconds")
                if not sent:
                    raise DeadlineExceeded(f"The request took longer than its limit of {seconds:g} seconds.") from None
                for last in on_expiry():
                    yield last
                return
            sent = True
            yield item
    finally:
        await items.aclose()


async def complete_within(job: ChatJob) -> dict[str, Any]:
    return await within_deadline(job, complete)


async def within_deadline(job: ChatJob, run: Callable[[ChatJob], Awaitable[R]]) -> R:
    """A whole answer (``complete``, or another front end's) within the rule's deadline."""
    seconds = job.resolved.rule.max_request_seconds
    if seconds is None:
        return await run(job)
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await run(job)
    except TimeoutError:
        if not scope.expired():
            raise  # an upstream timeout (also a TimeoutError), not the deadline
        job.note_policy("max_request_seconds")
        raise DeadlineExceeded(f"The request took longer than its limit of {seconds:g} seconds.") from None
