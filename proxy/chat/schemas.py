"""OpenAI wire types for what clients send, validated just enough to fail early and clearly.

Only the fields the proxy acts on are typed; everything else is allowed through untouched
(exact pass-through). A validation error names the field as ``messages[2].role``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from ..wire.errors import InvalidRequest
from .toolschema import check_parameters

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class FunctionCall(_Open):
    name: str = Field(min_length=1)
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _object_to_text(cls, value: Any) -> Any:
        return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value


class ToolCallIn(_Open):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Open):
    role: Role
    content: str | list[Any] | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    function_call: FunctionCall | None = None


class FunctionDef(_Open):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolDef(_Open):
    type: Literal["function"] = "function"
    function: FunctionDef


class ChatRequest(_Open):
    model: str = Field(min_length=1, max_length=256)
    messages: list[Message] = Field(min_length=1)
    stream: StrictBool | None = False  # strict: "yes" would stream here but reach the upstream as text
    tools: list[ToolDef] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    functions: list[FunctionDef] | None = None
    function_call: Literal["auto", "none"] | dict[str, Any] | None = None
    stop: str | list[str] | None = None
    stream_options: dict[str, Any] | None = None
    n: int | None = Field(None, ge=1, le=128)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)


_UNION_TAGS = frozenset({"str", "int", "bool", "float", "none"})


def _field_path(loc: tuple[Any, ...]) -> str:
    """``messages[0].role`` from pydantic's loc, without union-member tags like ``list[any]``.

    Tags are exact type names or contain ``[``; a prefix test would also drop real fields
    such as ``stream`` and ``stream_options``.
    """
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif str(part) not in _UNION_TAGS and "[" not in str(part):
            path += f".{part}" if path else str(part)
    return path


def validate_chat(body: Any) -> ChatRequest:
    """Validate a chat-completions body; ``InvalidRequest`` names the first bad field."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = _field_path(tuple(err["loc"])) or None
        detail = err["msg"]
        if err["type"] == "missing":
            detail = "field required"
        raise InvalidRequest(f"Invalid value for '{param}': {detail}" if param else detail, param=param) from None
    _check_tool_schemas(request)
    return request


def _check_tool_schemas(request: ChatRequest) -> None:
    """Every tool's ``parameters`` is a usable JSON Schema (``toolschema``), checked once here."""
    for i, tool in enumerate(request.tools or ()):
        if tool.function.parameters is not None:
            check_parameters(tool.function.parameters, f"tools[{i}].function.parameters")
    for i, function in enumerate(request.functions or ()):
        if function.parameters is not None:
            check_parameters(function.parameters, f"functions[{i}].parameters")
