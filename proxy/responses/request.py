"""A Responses API request body, validated, and turned into a chat-completions body.

``parse_request`` checks the wire body and names the first bad field (``input[2].call_id``,
``tools[0].type``) in an ``InvalidRequest``; ``ResponsesRequest.chat_body`` writes the
conversation (earlier stored items + this request's input) as chat ``messages`` with the tools,
``tool_choice`` and options in chat form, ready for ``ChatTurn.from_body``. Built-in tools the
proxy cannot run are refused by type. No I/O here; the store is the caller's business.

Item → chat message:

    message (user/system/developer/assistant)  → a message of that role (text parts joined;
                                                  user images kept as ``image_url`` parts)
    function_call                              → ``tool_calls`` on an assistant message
    function_call_output                       → a ``tool`` message (its ``call_id`` must match
                                                  an earlier ``function_call``)
    item_reference                             → the stored item it names (``with_references``)
    reasoning                                  → dropped (the model's own earlier thinking)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..chat.toolschema import check_parameters
from ..wire.errors import InvalidRequest
from .ids import check_id, new_id

Item = dict[str, Any]

_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text", "text")
_UNSUPPORTED_FIELDS = ("background", "conversation", "prompt")
_ITEM_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def _bad(param: str, detail: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for '{param}': {detail}", param=param)


@dataclass(frozen=True, slots=True)
class ResponsesRequest:
    """One ``POST /v1/responses`` body, validated; ``input`` normalised to items with ids."""

    raw: Mapping[str, Any]
    model: str
    input: tuple[Item, ...]
    instructions: str | None
    tools: tuple[Item, ...]  # the function tools, in Responses form (echoed in the Response)
    tool_choice: Any
    stream: bool
    store: bool
    previous_response_id: str | None

    def echo(self) -> dict[str, Any]:
        """The request fields a Response object repeats."""
        raw = self.raw
        text = raw.get("text") if isinstance(raw.get("text"), dict) else {"format": {"type": "text"}}
        return {
            "instructions": self.instructions,
            "max_output_tokens": raw.get("max_output_tokens"),
            "metadata": raw.get("metadata") or {},
            "parallel_tool_calls": raw.get("parallel_tool_calls", True),
            "previous_response_id": self.previous_response_id,
            "store": self.store,
            "temperature": raw.get("temperature", 1.0),
            "text": text,
            "tool_choice": self.tool_choice,
            "tools": list(self.tools),
            "top_p": raw.get("top_p", 1.0),
            "truncation": "disabled",
            "user": raw.get("user"),
            "reasoning": {"effort": None, "summary": None},
        }

    def references(self) -> list[str]:
        return [item["id"] for item in self.input if item["type"] == "item_reference"]

    def with_references(self, found: Mapping[str, Item]) -> ResponsesRequest:
        """``item_reference`` items replaced by the stored items; an unknown id is a 400 naming it."""
        items = []
        for i, item in enumerate(self.input):
            if item["type"] == "item_reference":
                if item["id"] not in found:
                    raise _bad(f"input[{i}].id", f"no stored item with id {item['id'][:80]!r}")
                item = found[item["id"]]
            items.append(item)
        return replace(self, input=tuple(items))

    def chat_body(self, context: Sequence[Item] = ()) -> dict[str, Any]:
        """The chat-completions body for this turn; ``context`` is the stored earlier conversation."""
        messages = to_messages(context, self.input, self.instructions)
        raw = self.raw
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": self.stream}
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.tools:
            body["tools"] = [_chat_tool(tool) for tool in self.tools]
        if "tool_choice" in raw:
            body["tool_choice"] = _chat_choice(self.tool_choice)
        for name in ("parallel_tool_calls", "temperature", "top_p", "stop", "user"):
            if raw.get(name) is not None:
                body[name] = raw[name]
        if raw.get("max_output_tokens") is not None:  # the upstream's field_dialect may write it max_tokens
            body["max_completion_tokens"] = raw["max_output_tokens"]
        response_format = _response_format(raw.get("text"))
        if response_format is not None:
            body["response_format"] = response_format
        return body


def model_of(raw: Any) -> str:
    """The body's ``model`` (needed first: the rule decides whether the body is read at all)."""
    if not isinstance(raw, dict):
        raise InvalidRequest("the request body must be a JSON object")
    model = raw.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("Missing required parameter: 'model'.", param="model")
    return model


def parse_request(raw: Any, *, drop_other_tools: bool = False) -> ResponsesRequest:
    """Validate a Responses body; ``InvalidRequest`` names the first bad field. Tools that are not
    functions are refused by type, or left out with ``drop_other_tools`` (the rule's choice)."""
    model = model_of(raw)
    for name in _UNSUPPORTED_FIELDS:
        if raw.get(name):
            raise _bad(name, "not supported by this proxy")
    previous = raw.get("previous_response_id")
    if previous is not None:
        check_id(previous, "previous_response_id")
    if raw.get("input") is None and previous is None:
        raise InvalidRequest("Missing required parameter: 'input' (or 'previous_response_id').", param="input")
    instructions = raw.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("instructions", "expected a string")
    _check_scalars(raw)
    tools = tuple(
        _function_tool(tool, f"tools[{i}]")
        for i, tool in enumerate(_list(raw, "tools"))
        if not (drop_other_tools and isinstance(tool, dict) and tool.get("type") != "function")
    )
    choice = raw.get("tool_choice", "auto")
    _chat_choice(choice)  # validates
    _response_format(raw.get("text"))  # validates
    return ResponsesRequest(
        raw=raw,
        model=model,
        input=normalise_input(raw.get("input")),
        instructions=instructions,
        tools=tools,
        tool_choice=choice,
        stream=bool(raw.get("stream")),
        store=raw.get("store") is not False,
        previous_response_id=previous,
    )


def _check_scalars(raw: Mapping[str, Any]) -> None:
    for name in ("stream", "store", "parallel_tool_calls"):
        if raw.get(name) is not None and not isinstance(raw[name], bool):
            raise _bad(name, "expected a boolean")
    for name, low, high in (("temperature", 0, 2), ("top_p", 0, 1)):
        value = raw.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high
        ):
            raise _bad(name, f"expected a number from {low} to {high}")
    tokens = raw.get("max_output_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
        raise _bad("max_output_tokens", "expected a positive integer")
    metadata = raw.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        raise _bad("metadata", "expected an object of strings")
    stop = raw.get("stop")
    if (
        stop is not None
        and not isinstance(stop, str)
        and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise _bad("stop", "expected a string or a list of strings")


def _list(raw: Mapping[str, Any], name: str) -> list[Any]:
    value = raw.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(name, "expected an array")
    return value


# ---- tools ------------------------------------------------------------------------------------


def _function_tool(tool: Any, param: str) -> Item:
    if not isinstance(tool, dict):
        raise _bad(param, "expected an object")
    kind = tool.get("type")
    if kind != "function":
        raise InvalidRequest(
            f"Tool type '{str(kind)[:60]}' is not supported here: toolshim offers only function tools to the model "
            "(built-in tools such as web search, file search, computer use and code interpreter run on OpenAI's "
            "servers).",
            param=f"{param}.type",
            code="unsupported_tool_type",
        )
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise _bad(f"{param}.name", "a function tool needs a name")
    if tool.get("parameters") is not None:
        check_parameters(tool["parameters"], f"{param}.parameters")
    return dict(tool)


def _chat_tool(tool: Mapping[str, Any]) -> Item:
    function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if tool.get(key) is not None}
    return {"type": "function", "function": function}


def _chat_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise _bad("tool_choice", "expected 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}")


def _response_format(text: Any) -> Item | None:
    if text is None:
        return None
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(text, dict) or (fmt is not None and not isinstance(fmt, dict)):
        raise _bad("text.format", "expected an object")
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict):
            raise _bad("text.format", "json_schema needs a 'name' and a 'schema' object")
        keys = ("name", "schema", "strict", "description")
        return {"type": "json_schema", "json_schema": {k: fmt[k] for k in keys if fmt.get(k) is not None}}
    raise _bad("text.format.type", "expected 'text', 'json_object' or 'json_schema'")


# ---- input items -------------------------------------------------------------------------------


def normalise_input(value: Any) -> tuple[Item, ...]:
    """``input`` as a tuple of typed items with ids; a string is one user message."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (
            {
                "type": "message",
                "id": new_id("msg"),
                "role": "user",
                "status": "completed",
                "content": [{"type": "input_text", "text": value}],
            },
        )
    if not isinstance(value, list):
        raise _bad("input", "expected a string or an array of items")
    return tuple(_item(item, f"input[{i}]") for i, item in enumerate(value))


def _item(item: Any, param: str) -> Item:
    if not isinstance(item, dict):
        raise _bad(param, "expected an object")
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        out = _message(item, param)
    elif kind == "function_call":
        out = {
            "type": kind,
            "call_id": _text(item, "call_id", param),
            "name": _text(item, "name", param),
            "arguments": _arguments(item.get("arguments"), f"{param}.arguments"),
            "status": "completed",
        }
    elif kind == "function_call_output":
        out = {
            "type": kind,
            "call_id": _text(item, "call_id", param),
            "output": _output(item.get("output"), f"{param}.output"),
            "status": "completed",
        }
    elif kind == "item_reference":  # resolved from the store before the turn is built
        return {"type": kind, "id": check_id(item.get("id"), f"{param}.id")}
    elif kind == "reasoning":
        out = {k: v for k, v in item.items() if k in ("type", "summary", "content", "encrypted_content")}
        out.setdefault("summary", [])
    else:
        raise _bad(
            f"{param}.type",
            f"unknown or unsupported item type {str(kind)[:60]!r}; expected 'message', "
            "'function_call', 'function_call_output', 'reasoning' or 'item_reference'",
        )
    out["id"] = item["id"] if isinstance(item.get("id"), str) and item["id"] else new_id(_ITEM_PREFIX[kind])
    return out


def _text(item: Mapping[str, Any], key: str, param: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{param}.{key}", "expected a non-empty string")
    return value


def _arguments(value: Any, param: str) -> str:
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        raise _bad(param, "expected a JSON string")
    return value


def _output(value: Any, param: str) -> str | list[Item]:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return [_part(part, f"{param}[{j}]", "user") for j, part in enumerate(value)]
    raise _bad(param, "expected a string or an array of content parts")


def _message(item: Mapping[str, Any], param: str) -> Item:
    role = item.get("role")
    if role not in _ROLES:
        raise _bad(f"{param}.role", f"expected one of {', '.join(_ROLES)}")
    content = item.get("content")
    if isinstance(content, str):
        part_type = "output_text" if role == "assistant" else "input_text"
        parts = [{"type": part_type, "text": content}]
    elif isinstance(content, list):
        parts = [_part(part, f"{param}.content[{j}]", str(role)) for j, part in enumerate(content)]
    else:
        raise _bad(f"{param}.content", "expected a string or an array of content parts")
    return {"type": "message", "role": role, "content": parts, "status": "completed"}


def _part(part: Any, param: str, role: str) -> Item:
    if not isinstance(part, dict):
        raise _bad(param, "expected an object")
    kind = part.get("type")
    if kind in _TEXT_PARTS or kind == "refusal":
        key = "refusal" if kind == "refusal" else "text"
        if not isinstance(part.get(key), str):
            raise _bad(f"{param}.{key}", "expected a string")
        return dict(part)
    if kind == "input_image" and role == "user":
        if not isinstance(part.get("image_url"), str):
            raise _bad(f"{param}.image_url", "expected an image URL (file ids are not supported here)")
        return dict(part)
    raise _bad(f"{param}.type", f"unsupported content part type {str(kind)[:60]!r}")


# ---- items → chat messages -----------------------------------------------------------------------


def to_messages(context: Sequence[Item], items: Sequence[Item], instructions: str | None) -> list[Item]:
    """Chat ``messages`` for the whole conversation; a result needs an earlier call with its ``call_id``."""
    messages: list[Item] = [{"role": "system", "content": instructions}] if instructions else []
    calls: set[str] = set()
    for i, item in enumerate([*context, *items]):
        param = f"input[{i - len(context)}]"
        kind = item.get("type")
        if kind == "message":
            messages.append(_chat_message(item))
        elif kind == "function_call":
            calls.add(item["call_id"])
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if item["call_id"] not in calls:
                raise _bad(
                    f"{param}.call_id", f"no function_call with call_id {item['call_id'][:80]!r} precedes this output"
                )
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": _joined(item["output"])})
    if not any(m["role"] != "system" for m in messages):
        raise _bad("input", "the conversation has no message for the model to answer")
    return messages


def _chat_message(item: Mapping[str, Any]) -> Item:
    parts = item["content"]
    if item["role"] == "user" and any(p.get("type") == "input_image" for p in parts):
        content: Any = [
            {"type": "image_url", "image_url": {"url": p["image_url"]}}
            if p["type"] == "input_image"
            else {"type": "text", "text": p.get("text", "")}
            for p in parts
        ]
    else:
        content = _joined(parts)
    return {"role": item["role"], "content": content}


def _joined(value: str | list[Item]) -> str:
    if isinstance(value, str):
        return value
    return "".join(str(p.get("text") or p.get("refusal") or "") for p in value)
