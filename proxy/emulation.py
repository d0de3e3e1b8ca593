"""Emulated tool calling: drive the upstream, the format's parser and the re-asks for one request.

The upstream is always read as a stream (also for non-streaming clients), so the cut at a tool
block over the limit can close the connection at once and the model server stops generating.

Flow per attempt: open the upstream stream → feed each content delta to a fresh parser →
turn its events into OpenAI chunks → on ``SecondToolStarted`` close the upstream. After an
attempt without a valid call, re-ask once (bounded by the rule) when the block was malformed
and nothing of it reached the client, or when ``tool_choice`` demanded a call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .context import RequestInfo
from .errors import UpstreamHTTPError
from .formats import (
    Event,
    Malformed,
    Reasoning,
    SecondToolStarted,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from .metrics import Metrics
from .pipeline import ChunkFactory, new_call_id
from .rewrite import EmulationPlan
from .rules import ModelRule
from .upstream import Upstream

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Attempt:
    """What one upstream round produced."""

    raw: list[str] = field(default_factory=list)  # the model's text, for re-asks and the dump
    calls: int = 0
    malformed: list[Malformed] = field(default_factory=list)
    cut: bool = False
    abandoned_call: bool = False  # a call was partly streamed, then failed: end the turn
    finish: str | None = None
    chunks: int = 0
    can_repair: bool = False  # a repair re-ask is still allowed for this attempt


@dataclass(slots=True)
class _CallState:
    client_index: int
    sent: str = ""  # argument text already streamed (stream_arguments)


class Emulator:
    """One emulated request. ``chunks()`` yields OpenAI chunk dicts, ending with finish (and usage)."""

    def __init__(self, upstream: Upstream, plan: EmulationPlan, rule: ModelRule, model: str, info: RequestInfo,
                 metrics: Metrics, include_usage: bool, dump_dir: Path | None = None) -> None:
        self.upstream = upstream
        self.plan = plan
        self.rule = rule
        self.info = info
        self.metrics = metrics
        self.include_usage = include_usage
        self.dump_dir = dump_dir
        self.factory = ChunkFactory(model=model, legacy_functions=plan.legacy_functions)
        self.calls_sent = 0
        self.usage: dict[str, int] = {}
        self._open: dict[int, _CallState] = {}
        self._held_text: list[str] = []  # text held while a call is demanded (tool_choice required/named)
        self._label = (info.model, plan.format.name)

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        extra: list[dict[str, Any]] = []
        repairs_left, required_left = self.rule.max_repair_retries, self.rule.max_required_retries
        started = False
        attempt_no = 0
        while True:
            attempt = _Attempt(can_repair=repairs_left > 0)
            body = {**self.plan.body, "messages": [*self.plan.body["messages"], *extra], "stream": True,
                    "stream_options": {"include_usage": True}}
            upstream_stream = await self.upstream.stream(body)
            try:
                if not started:
                    started = True
                    yield self.factory.role()
                async for chunk in self._read(upstream_stream, attempt):
                    yield chunk
            finally:
                await upstream_stream.aclose()
            self._dump(attempt_no, attempt)
            reask = self._reask(attempt, repairs_left > 0, required_left > 0)
            if reask is None:
                break
            reason, message = reask
            repairs_left -= reason == "repair"
            required_left -= reason == "required"
            self.metrics.reasks.labels(self.info.model, reason).inc()
            extra += [{"role": "assistant", "content": "".join(attempt.raw)}, {"role": "user", "content": message}]
            attempt_no += 1
        for chunk in self._finish(attempt):
            yield chunk

    async def _read(self, upstream_stream: Any, attempt: _Attempt) -> AsyncIterator[dict[str, Any]]:
        parser = self.plan.format.new_parser(list(self.plan.parse_tools), self.plan.max_calls)
        async for data in upstream_stream:
            content, reasoning = self._delta(data, attempt)
            if reasoning:
                self.info.mark_first_token()
                yield self.factory.reasoning(reasoning)
            if content:
                attempt.raw.append(content)
                attempt.chunks += 1
                for chunk in self._translate(parser.feed(content), attempt):
                    yield chunk
            if attempt.cut or self._stop_reading(attempt):
                return
        for chunk in self._translate(parser.close(attempt.finish or "stop"), attempt):
            yield chunk

    def _delta(self, data: str, attempt: _Attempt) -> tuple[str, str]:
        """Content and reasoning text of one upstream chunk; notes finish reason and usage."""
        try:
            chunk = json.loads(data)
        except ValueError:
            return "", ""
        if not isinstance(chunk, dict):
            return "", ""
        if isinstance(chunk.get("error"), dict | str):
            err = chunk["error"]
            message = err.get("message", "upstream error") if isinstance(err, dict) else err
            raise UpstreamHTTPError(502, f"upstream failed mid-stream: {message}")
        if isinstance(chunk.get("usage"), dict):
            self._add_usage(chunk["usage"])
        choices = chunk.get("choices") or ()
        if not choices or not isinstance(choices[0], dict):
            return "", ""
        choice = choices[0]
        attempt.finish = choice.get("finish_reason") or attempt.finish
        delta = choice.get("delta") or choice.get("message") or {}
        content = delta.get("content") if isinstance(delta.get("content"), str) else ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        return content, reasoning if isinstance(reasoning, str) else ""

    def _add_usage(self, usage: dict[str, Any]) -> None:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if isinstance(usage.get(key), int):
                self.usage[key] = self.usage.get(key, 0) + usage[key]

    def _stop_reading(self, attempt: _Attempt) -> bool:
        """Stop early when this attempt can only end in a re-ask or an abandoned call."""
        if attempt.abandoned_call:
            return True
        return bool(attempt.malformed) and attempt.can_repair and self.calls_sent == 0 and not attempt.calls

    def _translate(self, events: list[Event], attempt: _Attempt) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for event in events:
            if isinstance(event, Text):
                self._text(event.text, out)
            elif isinstance(event, Reasoning):
                self.info.mark_first_token()
                out.append(self.factory.reasoning(event.text))
            elif isinstance(event, ToolCallStart):
                self._start(event, out)
            elif isinstance(event, ToolCallArgs):
                self._args(event, out)
            elif isinstance(event, ToolCallEnd):
                self._end(event, attempt, out)
            elif isinstance(event, Malformed):
                self._malformed(event, attempt)
            elif isinstance(event, SecondToolStarted):
                attempt.cut = True
                self.metrics.stream_cuts.labels(*self._label).inc()
                self._count_saved_tokens(attempt)
        return out

    def _text(self, text: str, out: list[dict[str, Any]]) -> None:
        if not text:
            return
        if self.plan.wants_call and self.calls_sent == 0:
            self._held_text.append(text)
            return
        self.info.mark_first_token()
        out.append(self.factory.content(text))

    def _release_held(self, out: list[dict[str, Any]]) -> None:
        if self._held_text:
            self.info.mark_first_token()
            out.append(self.factory.content("".join(self._held_text)))
            self._held_text.clear()

    def _start(self, event: ToolCallStart, out: list[dict[str, Any]]) -> None:
        if not self.rule.stream_arguments or self._calls_withdrawn:
            return
        self._release_held(out)
        state = _CallState(self.calls_sent + len(self._open))
        self._open[event.index] = state
        self.info.mark_first_token()
        out.append(self.factory.call_header(state.client_index, new_call_id(), event.name))

    def _args(self, event: ToolCallArgs, out: list[dict[str, Any]]) -> None:
        state = self._open.get(event.index)
        if state is not None and event.fragment:
            state.sent += event.fragment
            out.append(self.factory.call_arguments(state.client_index, event.fragment))

    @property
    def _calls_withdrawn(self) -> bool:
        return self.plan.tool_choice.mode == "none"

    def _end(self, event: ToolCallEnd, attempt: _Attempt, out: list[dict[str, Any]]) -> None:
        if self._calls_withdrawn:  # tool_choice "none": a call written anyway is kept out of the content
            self.metrics.markup_sanitized.labels(*self._label).inc()
            return
        self._release_held(out)
        state = self._open.pop(event.index, None)
        if state is None:
            index = self.calls_sent
            self.info.mark_first_token()
            out.append(self.factory.call_header(index, new_call_id(), event.name))
            out.append(self.factory.call_arguments(index, event.arguments))
        elif not _same_json(state.sent, event.arguments):
            if event.arguments.startswith(state.sent):
                out.append(self.factory.call_arguments(state.client_index, event.arguments[len(state.sent):]))
            else:
                log.warning("streamed arguments of call %d differ from the repaired ones", state.client_index)
        self.calls_sent += 1
        attempt.calls += 1
        self.info.tool_calls += 1
        self.metrics.tool_calls.labels(*self._label).inc()
        outcome = "repaired" if event.repairs else "clean"
        self.metrics.tool_parse.labels(*self._label, outcome).inc()
        for kind in event.repairs:
            self.metrics.tool_repairs.labels(*self._label, kind).inc()
        self.info.parse_outcome = self.info.parse_outcome if self.info.parse_outcome == "repaired" else outcome

    def _malformed(self, event: Malformed, attempt: _Attempt) -> None:
        attempt.malformed.append(event)
        self.metrics.tool_parse.labels(*self._label, "malformed").inc()
        self.metrics.markup_sanitized.labels(*self._label).inc()
        self.info.parse_outcome = "malformed"
        if event.index is not None and self._open.pop(event.index, None) is not None:
            attempt.abandoned_call = True  # part of this call already reached the client
        log.info("malformed tool block: %s", event.reason)

    def _count_saved_tokens(self, attempt: _Attempt) -> None:
        max_tokens = self.plan.body.get("max_completion_tokens") or self.plan.body.get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens > attempt.chunks:
            self.metrics.tokens_saved.labels(self.info.model).inc(max_tokens - attempt.chunks)

    def _reask(self, attempt: _Attempt, repair_ok: bool, required_ok: bool) -> tuple[str, str] | None:
        """``(reason, corrective message)`` when another attempt is due, else ``None``."""
        if self.calls_sent or attempt.abandoned_call:
            return None
        if attempt.malformed and repair_ok:
            reason = attempt.malformed[0].reason
            return "repair", (f"Your tool call could not be used: {reason}. Write the tool call again, "
                              "correctly, in exactly the format described in the instructions.")
        if self.plan.wants_call and required_ok:
            self._held_text.clear()
            target = (f"the tool `{self.plan.tool_choice.name}`" if self.plan.tool_choice.mode == "named"
                      else "one of the tools")
            return "required", (f"You must call {target} now. Reply with only the tool call, in exactly the "
                                "format described in the instructions.")
        return None

    def _finish(self, attempt: _Attempt) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self._release_held(out)
        if self.calls_sent:
            reason = "tool_calls"
        else:
            reason = "length" if attempt.finish == "length" else "stop"
        out.append(self.factory.finish(reason))
        self.info.note_usage(self.usage)
        if self.include_usage and self.usage:  # never invent numbers the upstream did not report
            usage = dict(self.usage)
            usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
            out.append(self.factory.usage(usage))
        return out

    def _dump(self, attempt_no: int, attempt: _Attempt) -> None:
        if self.dump_dir is None:
            return
        try:
            self.dump_dir.mkdir(parents=True, exist_ok=True)
            path = self.dump_dir / f"{self.info.request_id}-{attempt_no}.txt"
            notes = [f"# model={self.info.model} format={self.plan.format.name} finish={attempt.finish} "
                     f"calls={attempt.calls} cut={attempt.cut}"]
            notes += [f"# malformed: {m.reason}" for m in attempt.malformed]
            path.write_text("\n".join(notes) + "\n" + "".join(attempt.raw), encoding="utf-8")
        except OSError as exc:
            log.warning("could not write the raw-output dump: %s", exc)


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False
