"""Tool-call arguments: repair sloppy JSON, resolve the tool name, coerce and validate.

Runs once per call, at the end of its block (never per chunk). Every repair applied is
reported by name so the metrics can count them.

PLACEHOLDER IMPLEMENTATION: the public API (ToolIndex, CallOutcome, finalize_call,
parse_json_lenient) is fixed; the internals are being completed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import json5

from .base import ToolSpec


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """The result of finalizing one call: either ``arguments`` (canonical JSON) or ``error``."""

    name: str
    arguments: str | None
    repairs: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ToolIndex:
    """The request's tools by name, with unambiguous fuzzy name resolution."""

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools = {t.name: t for t in tools}

    def resolve(self, name: str) -> tuple[str | None, tuple[str, ...]]:
        """Map a model-written name to a tool name: ``(name or None, repairs applied)``."""
        name = name.strip()
        if name in self.tools:
            return name, ()
        return None, ()

    def __contains__(self, name: str) -> bool:
        return self.resolve(name)[0] is not None


def canonical_json(value: Any) -> str:
    """The arguments string we hand clients: compact, UTF-8, key order kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def parse_json_lenient(raw: str) -> tuple[Any, tuple[str, ...]] | None:
    """Parse JSON, repairing when needed: ``(value, repairs)`` or ``None`` if hopeless."""
    try:
        return json.loads(raw), ()
    except ValueError:
        pass
    try:
        return json5.loads(raw), ("json5",)
    except ValueError:
        return None


def finalize_call(index: ToolIndex, name: str, raw_arguments: str | Mapping[str, Any] | None) -> CallOutcome:
    """Resolve the name, parse/repair the arguments, coerce to the schema, validate."""
    resolved, name_repairs = index.resolve(name)
    if resolved is None:
        return CallOutcome(name, None, (), f"unknown tool {name!r}")
    repairs: tuple[str, ...] = name_repairs
    if raw_arguments is None or raw_arguments == "":
        value: Any = {}
    elif isinstance(raw_arguments, str):
        parsed = parse_json_lenient(raw_arguments)
        if parsed is None:
            return CallOutcome(resolved, None, repairs, "arguments are not valid JSON")
        value, extra = parsed
        repairs += extra
    else:
        value = dict(raw_arguments)
    if not isinstance(value, dict):
        return CallOutcome(resolved, None, repairs, "arguments must be a JSON object")
    return CallOutcome(resolved, canonical_json(value), repairs)
