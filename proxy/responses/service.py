"""Serving one ``POST /v1/responses`` once the handler built its chat job.

The chat chunks of whichever mode applies (``modes.chat_chunks``, under the rule's deadline)
go through a ``ResponseAssembler``; the result is stored (when ``store`` is on and the answer
finished) before the client sees the final event, so a follow-up with ``previous_response_id``
always finds it. A failure before the first chunk is the handler's HTTP error; after it, the
stream ends with ``error`` and ``response.failed``. Failed responses are not stored.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from ..chat import modes
from ..chat.turn import ChatTurn
from ..observe.redact import REDACTOR
from ..wire.errors import ErrorView, InvalidRequest, NotFound
from ..wire.sse import encode_json
from .events import Event, ResponseAssembler
from .ids import check_id
from .record import StoredResponse
from .request import Item, ResponsesRequest
from .store import ResponseStore

_MAX_PAGE = 100


async def load(store: ResponseStore, owner: str, response_id: str, param: str = "response_id") -> StoredResponse:
    """``owner``'s stored response, or a 404 in OpenAI's shape (unknown, another owner's, expired,
    deleted or never stored: one answer for all); an id that cannot be one is a 400 naming ``param``."""
    check_id(response_id, param)
    record = await store.load(owner, response_id)
    if record is None:
        raise _not_found(response_id, None if param == "response_id" else param)
    return record


async def delete(store: ResponseStore, owner: str, response_id: str) -> None:
    check_id(response_id, "response_id")
    if not await store.delete(owner, response_id):
        raise _not_found(response_id, None)


def _not_found(response_id: str, param: str | None) -> NotFound:
    return NotFound(f"Response with id '{response_id}' not found.", param=param, code="response_not_found")


async def resolve_references(store: ResponseStore, owner: str, request: ResponsesRequest) -> ResponsesRequest:
    """``item_reference`` input items replaced by ``owner``'s stored output items they name."""
    ids = request.references()
    return request.with_references(await store.load_items(owner, ids)) if ids else request


async def load_context(store: ResponseStore, owner: str, previous_response_id: str | None) -> list[Item]:
    """The conversation a ``previous_response_id`` continues (empty without one)."""
    if previous_response_id is None:
        return []
    return (await load(store, owner, previous_response_id, "previous_response_id")).conversation()


def chat_turn(request: ResponsesRequest, context: Sequence[Item], max_messages: int) -> ChatTurn:
    """The typed chat turn; a chat-side error about a tool names the Responses field.

    The conversation as a whole (stored context + this input, and the chat messages it makes, the
    instructions' included) is held to ``max_messages``: a chain of ``previous_response_id`` cannot
    send more upstream than one request may, and no stored record grows past it."""
    body = request.chat_body(context)
    _check_length(len(context) + len(request.input), len(body["messages"]), bool(context), max_messages)
    try:
        return ChatTurn.from_body(body)
    except InvalidRequest as exc:
        if exc.param and exc.param.startswith("tools["):
            exc.param = exc.param.replace(".function.", ".", 1)
            exc.message = exc.message.replace(".function.", ".", 1)
        raise


def _check_length(items: int, messages: int, continued: bool, limit: int) -> None:
    if items <= limit and messages <= limit:
        return
    if continued:
        raise InvalidRequest(
            f"The conversation continued from 'previous_response_id' would have {max(items, messages)} items with "
            f"this input; the limit is {limit} (TOOLSHIM_MAX_MESSAGES). Start a new conversation, or send a "
            "shorter history as 'input'.",
            param="previous_response_id",
            code="too_many_items",
        )
    raise InvalidRequest(
        f"The conversation would have {messages} messages with the instructions; the limit is {limit} "
        "(TOOLSHIM_MAX_MESSAGES).",
        param="input",
        code="too_many_items",
    )


def input_items_page(record: StoredResponse, query: Mapping[str, str]) -> dict[str, Any]:
    """``GET /v1/responses/{id}/input_items``: ``order`` (desc), ``limit`` (20, up to 100), ``after``."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("Invalid value for 'order': expected 'asc' or 'desc'.", param="order")
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= _MAX_PAGE:
        raise InvalidRequest(f"Invalid value for 'limit': expected 1 to {_MAX_PAGE}.", param="limit")
    items = list(record.input) if order == "asc" else list(reversed(record.input))
    after = query.get("after")
    if after:
        ids = [item.get("id") for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }


class Exchange:
    """One Responses request: its assembler, what to store, and how to end it."""

    def __init__(self, request: ResponsesRequest, context: Sequence[Item], store: ResponseStore, owner: str) -> None:
        self.request = request
        self.context = list(context)
        self.store = store
        self.owner = owner
        self.assembler = ResponseAssembler(request.model, request.echo())

    async def complete(self, job: modes.ChatJob) -> dict[str, Any]:
        """The whole Response object (non-streaming clients)."""
        return await modes.within_deadline(job, self._collect)

    async def _collect(self, job: modes.ChatJob) -> dict[str, Any]:
        chunks = modes.chat_chunks(job)
        try:
            async for chunk in chunks:
                self.assembler.feed(chunk)
        finally:
            await chunks.aclose()
        self.assembler.finish()
        await self._save()
        return self.assembler.response

    async def sse(self, job: modes.ChatJob) -> AsyncGenerator[bytes, None]:
        """The Responses stream events as SSE bytes; the first upstream chunk is awaited before
        ``response.created``. Encoded here, not by a generator of its own around this one: that cost
        every event a resumption."""
        chunks = modes.bounded(job, modes.chat_chunks(job), lambda: [job.finish_chunk("length")])
        try:
            first = await anext(chunks, None)
            for event in self.assembler.start():
                yield encode(event)
            if first is not None:
                for event in self.assembler.feed(first):
                    yield encode(event)
            async for chunk in chunks:
                for event in self.assembler.feed(chunk):
                    yield encode(event)
        finally:
            await chunks.aclose()
        final = self.assembler.finish()
        await self._save()
        for event in final:
            yield encode(event)

    def error_bytes(self, view: ErrorView) -> bytes:
        """A failure after the stream started: ``error``, then ``response.failed``."""
        error = view.body["error"]
        return b"".join(
            encode(event) for event in self.assembler.fail(error.get("code"), error["message"], error.get("param"))
        )

    async def _save(self) -> None:
        if not self.request.store:
            return
        record = StoredResponse(self.assembler.response, list(self.request.input), self.context, self.owner)
        await self.store.save(record)


def encode(event: Event) -> bytes:
    data = encode_json(event, str(event["type"]))
    return REDACTOR.redact_bytes(data) if REDACTOR.active else data
