"""The Responses API front end (``/v1/responses``), served through the chat pipeline.

``request``: a Responses body → validated ``ResponsesRequest`` → a chat-completions body for
``ChatTurn.from_body``. ``events``: the chat chunks any mode produces → Responses stream events
and the final Response object (sans-IO). ``store``: stored responses for ``previous_response_id``
and the GET / DELETE endpoints (embedded SQLite, or Redis for several replicas).
"""

from .request import ResponsesRequest, model_of, parse_request
from .service import Exchange, chat_turn, delete, input_items_page, load, load_context, resolve_references

__all__ = [
    "Exchange",
    "ResponsesRequest",
    "chat_turn",
    "delete",
    "input_items_page",
    "load",
    "load_context",
    "model_of",
    "parse_request",
    "resolve_references",
]
