"""One stored response: its owner, the Response object, its input items and the conversation before them.
No I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..wire.jsoncodec import dumps
from .ids import ANONYMOUS_OWNER

Item = dict[str, Any]


def json_text(value: Any) -> str:
    """Compact JSON text every store can encode: a lone surrogate from a request goes out as a
    ``\\ud800`` escape (``jsoncodec``), where ``ensure_ascii=False`` text cannot be written as UTF-8."""
    return dumps(value).decode("utf-8")


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """``context`` is the whole conversation before ``input`` (a copy, not a link to the earlier record):
    each record can be continued alone, whatever happened to the ones before it. Its length is held to
    ``TOOLSHIM_MAX_MESSAGES`` when it is continued (``service.chat_turn``), so a record stays bounded."""

    response: dict[str, Any]
    input: list[Item]
    context: list[Item]
    owner: str = ANONYMOUS_OWNER  # ``ids.owner_of_key`` of the client key that made it

    @property
    def id(self) -> str:
        return str(self.response["id"])

    def conversation(self) -> list[Item]:
        """The items a continuation starts from: earlier context, this input, this output."""
        return [*self.context, *self.input, *self.response.get("output", [])]

    def output_items(self) -> list[Item]:
        """The output items with ids (what an ``item_reference`` can name)."""
        return [item for item in self.response.get("output", []) if isinstance(item.get("id"), str)]

    def dumps(self) -> str:
        return json_text({"response": self.response, "input": self.input, "context": self.context, "owner": self.owner})

    @classmethod
    def loads(cls, raw: str | bytes) -> StoredResponse:
        doc = json.loads(raw)
        return cls(doc["response"], doc["input"], doc["context"], doc.get("owner", ANONYMOUS_OWNER))
