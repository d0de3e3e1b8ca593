"""Chat chunks → Responses stream events and the Response object. Sans-IO.

Every mode (native, emulated, auto) produces ``chat.completion.chunk`` dicts; the emulated ones
come from ``builder.ResponseBuilder``, so call ids, the cut, held text and re-asks are decided
there once. ``ResponseAssembler`` only re-shapes them: feed chunks, get events; ``finish`` or
``fail`` ends the stream; ``response`` is the object a non-streaming client gets (the same
events, accumulated, so the two cannot disagree).

    reasoning_content            → a ``reasoning`` item, ``response.reasoning_text.delta``
    content                      → a ``message`` item, ``response.output_text.delta``
    tool_calls[i] with an id     → a ``function_call`` item (``fc_…``, ``call_id`` = the chunk's id)
    tool_calls[i] arguments      → ``response.function_call_arguments.delta``
    finish_reason length         → status ``incomplete``, reason ``max_output_tokens``
    usage                        → ``usage`` (input/output/total tokens)

Event order per item: ``output_item.added`` [``content_part.added``] deltas … ``.done``
[``content_part.done``] ``output_item.done``; the stream opens with ``response.created`` and
``response.in_progress`` and ends with exactly one of ``response.completed`` /
``response.incomplete`` / ``response.failed`` (after an ``error`` event).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .ids import new_id

Event = dict[str, Any]
Chunk = Mapping[str, Any]


@dataclass(slots=True)
class _Open:
    """An output item being streamed."""

    index: int
    item: dict[str, Any]
    text: list[str] = field(default_factory=list)


class ResponseAssembler:
    """One Response: chat chunks in, Responses events out, ``sequence_number`` on each."""

    def __init__(
        self, model: str, echo: Mapping[str, Any], *, ids: Callable[[str], str] = new_id, created_at: int | None = None
    ) -> None:
        self._ids = ids
        self.response: dict[str, Any] = {
            "id": ids("resp"),
            "object": "response",
            "created_at": created_at or int(time.time()),
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "model": model,
            "output": [],
            "usage": None,
            **echo,
        }
        self._seq = 0
        self._open: list[_Open] = []  # open reasoning / message items, at most one each
        self._calls: dict[int, _Open] = {}  # chat tool_call index → open function_call item
        self._finish: str | None = None
        self._usage: dict[str, int] | None = None

    # ---- public -------------------------------------------------------------------------

    def start(self) -> list[Event]:
        snapshot = self._snapshot()
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=self._snapshot()),
        ]

    def feed(self, chunk: Chunk) -> list[Event]:
        out: list[Event] = []
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = {k: v for k, v in usage.items() if isinstance(v, int)}
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                self._reasoning(str(delta["reasoning_content"]), out)
            if delta.get("content"):
                self._content(str(delta["content"]), out)
            for call in delta.get("tool_calls") or ():
                self._call(call, out)
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
        return out

    def feed_all(self, chunks: Iterable[Chunk]) -> list[Event]:
        return [event for chunk in chunks for event in self.feed(chunk)]

    def finish(self) -> list[Event]:
        """Close every open item; the last event is ``response.completed`` or ``response.incomplete``."""
        out = self._close_all()
        self.response["usage"] = _usage(self._usage)
        if self._finish in ("length", "content_filter"):
            reason = "max_output_tokens" if self._finish == "length" else "content_filter"
            self.response.update(status="incomplete", incomplete_details={"reason": reason})
            out.append(self._event("response.incomplete", response=self._snapshot()))
        else:
            self.response["status"] = "completed"
            out.append(self._event("response.completed", response=self._snapshot()))
        return out

    def fail(self, code: str | None, message: str, param: str | None = None) -> list[Event]:
        """An ``error`` event, then ``response.failed``: a failed stream never ends cleanly."""
        self.response.update(status="failed", error={"code": code or "server_error", "message": message})
        return [
            self._event("error", code=code, message=message, param=param),
            self._event("response.failed", response=self._snapshot()),
        ]

    # ---- items ----------------------------------------------------------------------------

    def _reasoning(self, text: str, out: list[Event]) -> None:
        self._text_delta("reasoning", "response.reasoning_text.delta", text, out)

    def _content(self, text: str, out: list[Event]) -> None:
        self._text_delta("message", "response.output_text.delta", text, out, logprobs=[])

    def _text_delta(self, kind: str, event_type: str, text: str, out: list[Event], **extra: Any) -> None:
        """Text into the open item of ``kind`` (opened if needed), as one delta event."""
        item = self._open_item(kind, out)
        item.text.append(text)
        out.append(
            self._event(
                event_type, item_id=item.item["id"], output_index=item.index, content_index=0, delta=text, **extra
            )
        )

    def _call(self, call: Mapping[str, Any], out: list[Event]) -> None:
        index = call.get("index", 0)
        function = call.get("function") or {}
        state = self._calls.get(index)
        if state is None:
            out.extend(self._close_open())
            item = {
                "type": "function_call",
                "id": self._ids("fc"),
                "call_id": call.get("id") or self._ids("call"),
                "name": function.get("name") or "",
                "arguments": "",
                "status": "in_progress",
            }
            state = self._calls[index] = self._add(item, out)
        fragment = function.get("arguments") or ""
        if fragment:
            state.text.append(fragment)
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=state.item["id"],
                    output_index=state.index,
                    delta=fragment,
                )
            )

    def _open_item(self, kind: str, out: list[Event]) -> _Open:
        if self._open and self._open[-1].item["type"] == kind and not self._calls_after(self._open[-1]):
            return self._open[-1]
        out.extend(self._close_open())
        if kind == "reasoning":
            item = {"type": "reasoning", "id": self._ids("rs"), "summary": [], "status": "in_progress"}
            state = self._add(item, out)
        else:
            item = {
                "type": "message",
                "id": self._ids("msg"),
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            state = self._add(item, out)
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=state.index,
                    content_index=0,
                    part=_text_part(""),
                )
            )
        self._open.append(state)
        return state

    def _calls_after(self, state: _Open) -> bool:
        return any(call.index > state.index for call in self._calls.values())

    def _add(self, item: dict[str, Any], out: list[Event]) -> _Open:
        state = _Open(len(self.response["output"]), item)
        self.response["output"].append(item)
        out.append(self._event("response.output_item.added", output_index=state.index, item=copy.deepcopy(item)))
        return state

    def _close_open(self) -> list[Event]:
        out: list[Event] = []
        for state in self._open:
            item, text = state.item, "".join(state.text)
            if item["type"] == "reasoning":
                item["content"] = [{"type": "reasoning_text", "text": text}]
                out.append(
                    self._event(
                        "response.reasoning_text.done",
                        item_id=item["id"],
                        output_index=state.index,
                        content_index=0,
                        text=text,
                    )
                )
            else:
                part = _text_part(text)
                item["content"] = [part]
                out.append(
                    self._event(
                        "response.output_text.done",
                        item_id=item["id"],
                        output_index=state.index,
                        content_index=0,
                        text=text,
                        logprobs=[],
                    )
                )
                out.append(
                    self._event(
                        "response.content_part.done",
                        item_id=item["id"],
                        output_index=state.index,
                        content_index=0,
                        part=copy.deepcopy(part),
                    )
                )
            item["status"] = "completed"
            out.append(self._event("response.output_item.done", output_index=state.index, item=copy.deepcopy(item)))
        self._open.clear()
        return out

    def _close_all(self) -> list[Event]:
        out = self._close_open()
        for state in sorted(self._calls.values(), key=lambda s: s.index):
            item = state.item
            item.update(arguments="".join(state.text), status="completed")
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=state.index,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            )
            out.append(self._event("response.output_item.done", output_index=state.index, item=copy.deepcopy(item)))
        self._calls.clear()
        return out

    # ---- helpers ----------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self.response)


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _usage(usage: Mapping[str, int] | None) -> dict[str, Any] | None:
    if not usage:
        return None
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.get("total_tokens", prompt + completion),
    }
