"""One stored response: the Response object, its input items and the conversation before them. No I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Item = dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredResponse:
    response: dict[str, Any]
    input: list[Item]
    context: list[Item]

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
        return json.dumps(
            {"response": self.response, "input": self.input, "context": self.context},
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def loads(cls, raw: str | bytes) -> StoredResponse:
        doc = json.loads(raw)
        return cls(doc["response"], doc["input"], doc["context"])
