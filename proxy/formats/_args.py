"""Tool-call arguments: resolve the tool name, repair the JSON, coerce and validate.

Runs once per call, at the end of its block (never per chunk). ``finalize_call`` is the one
entry point the formats use; it never raises. Steps, each reporting what it repaired:

1. Name: exact, else an unambiguous near miss (surrounding whitespace/backticks/quotes, a
   ``functions.`` style prefix, ``-``/``_``/space, case, another or no namespace before the same
   action of two words or more). Two candidates -> not resolved.
2. Arguments: ``parse_json_lenient`` (see ``_jsonrepair``); a JSON string holding an object
   is unwrapped (``double_encoded``).
3. Arguments the schema does not declare are dropped (``unknown_arguments``): a key outside the
   top level's ``properties`` (and ``required``), unless ``additionalProperties`` allows more (``true`` or a schema)
   or a ``patternProperties`` pattern matches it. A client's function takes the parameters it
   declares (pydantic-ai and LangChain tools fail on an unexpected keyword, a strict schema rejects
   it): the model's extra ``result: 270`` is no argument. A schema without ``properties`` keeps all.
4. Lossless coercion to the schema's types (``_coerce``): ``"5"`` -> 5, ``"true"`` -> true,
   5.0 -> 5, 12 -> ``"12"`` for strings, a JSON string for an object/array parameter, one value
   -> a one-item array, a case-insensitive enum match.
5. Validation with ``jsonschema`` (the schema's declared draft, else 2020-12). An invalid
   tool schema is logged, remembered on the index and only its ``required`` list checked. When every
   error is an optional parameter's value outside its ``enum`` (``"show_type": "any"``), that parameter is
   left out and the rest validated again (``invalid_optional_dropped``): the tool's default stands for it.
6. Canonical JSON.

Repair names (stable; metrics count them): name_quotes, name_prefix, name_namespace, name_separator,
name_case, name_plural, control_chars, code_fence, leading_text, trailing_text, comments, single_quotes,
invalid_escapes, unquoted_keys, python_literals, trailing_commas, unclosed_brackets, json5,
double_encoded, unknown_arguments, coerce_types, embedded_json, wrap_array, enum_case,
invalid_optional_dropped, inner_quotes and trailing_backslash (only when the repaired arguments validate:
they guess which quotes close a string). The formats add their own (``_calls``: json_as_string; react:
plain_input, name_next_line, partial_stop; hermes: plain_input, cut_after_arguments; lenient:
cut_after_arguments).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from typing import Any

# jsonschema ships no type information; `unused-ignore` keeps this quiet where types-jsonschema is installed
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry

from ._coerce import Coercer
from ._jsonrepair import guessed_parses, parse_json_lenient
from .base import ToolSpec

__all__ = ["CallOutcome", "ToolIndex", "canonical_json", "finalize_call", "parse_json_lenient"]

# Schemas are the client's data: a ``$ref`` resolves only inside the schema itself (``#/$defs/...``).
# jsonschema's default registry fetches any other ``$ref`` (``http://``, ``file://``) with urllib, with no
# timeout, on the event loop; an empty registry that retrieves nothing makes such a ref unresolvable,
# which ``validate`` treats as an unusable schema (arguments then checked for ``required`` only).
_NO_RETRIEVAL: Registry[Any] = Registry()
logger = logging.getLogger(__name__)

_NAME_WRAPPERS = "`'\""
NAME_PREFIXES = ("functions.", "function.", "tools.", "tool.", "default_api.")
_MAX_SHOWN_TOOLS = 20
_MAX_SHOWN_PARAMETERS = 8
# a name written with the parameter names a re-ask showed (``_signature``): ``name(a, b)``, never values
_PARAMETER_LIST = re.compile(r"\s*\(\s*[A-Za-z_][\w.-]{0,80}(?:\s*,\s*[A-Za-z_][\w.-]{0,80}){0,15}\s*\)\s*$")
_MAX_ERRORS = 3
_MAX_DROP_ERRORS = 20  # validation errors read to find the optional parameters to drop (bounded work)


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


# ---- names -------------------------------------------------------------------------------


def _unify_separators(name: str) -> str:
    return name.replace("-", "_").replace(" ", "_").replace(".", "_")


def _fold(name: str) -> str:
    return _unify_separators(name).casefold()


_PLURAL = re.compile(r"(?<=[^\Ws_]{3})s(?=_|$)")  # a word's plural "s" (``flights``, not ``class`` or ``bus``)


def _singular(name: str) -> str:
    """The folded name with each word's plural ``s`` dropped: ``book_flights`` is ``book_flight``."""
    return _PLURAL.sub("", _fold(name))


# a tool name's namespace: everything up to its last ``.``, ``/``, ``:``, ``__`` or ``_<digits>_``
# (``Travel_1_FindAttractions``, ``github.create_issue``, ``mcp__files__read_file``)
_NAMESPACED = re.compile(r"(?:.*(?:[./:]|__|_\d+_))?(?P<action>[^\W_][\w-]*)")
_ACTION_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_MIN_ACTION_WORDS = 2  # "FindAttractions", "create_issue": a verb and what it acts on
_MAX_ACTION_NAME = 200  # characters; a longer name is no tool's (and the match stays cheap)


def _action(name: str) -> str | None:
    """The part of a tool name after its namespace, folded, when it names an action of two words or more
    (the verb kept): what a model that wrote another tool's namespace still means."""
    found = _NAMESPACED.fullmatch(name) if len(name) <= _MAX_ACTION_NAME else None
    if found is None:
        return None
    words = _ACTION_WORD.findall(found.group("action"))
    return "_".join(words).casefold() if len(words) >= _MIN_ACTION_WORDS else None


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_SCHEMA_CACHE_SIZE = 256  # distinct tool schemas kept compiled per process
_MAX_CACHED_SCHEMA = 64 * 1024  # characters of a schema's JSON; a larger one is compiled each time


def compiled_schema(schema: Mapping[str, Any]) -> Validator | str:
    """A validator for ``schema``, or why it is unusable; kept per distinct schema (bounded in count and key
    size): checking a schema costs milliseconds, and a client sends the same tools with every request."""
    try:
        key = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return _compile_schema(schema)
    if len(key) > _MAX_CACHED_SCHEMA:
        return _compile_schema(schema)
    return _compiled_from_key(key)


@lru_cache(maxsize=_SCHEMA_CACHE_SIZE)
def _compiled_from_key(key: str) -> Validator | str:
    """The schema whose canonical JSON is ``key``, compiled from its own copy: nothing shared with a request."""
    return _compile_schema(json.loads(key))


def _compile_schema(schema: Mapping[str, Any]) -> Validator | str:
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(dict(schema))
        return cls(dict(schema), registry=_NO_RETRIEVAL)
    # The schema comes from the client and jsonschema's failure modes are open-ended
    # (SchemaError, TypeError on odd "$schema" values, ...): note it and skip validation.
    except Exception as exc:
        return str(exc).split("\n", 1)[0]


class ToolIndex:
    """The request's tools by name: near-miss name resolution and cached validators.

    Built once per request; validators are compiled lazily, only for tools actually called.
    ``schema_problems`` maps a tool name to why its schema could not be used.
    """

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools: dict[str, ToolSpec] = {}
        for spec in tools:
            self.tools.setdefault(spec.name, spec)
        self._guessable = [name for name, spec in self.tools.items() if not spec.exact_only]  # near misses reach
        self._levels: list[tuple[Callable[[str], str], dict[str, list[str]], tuple[str, ...]]] = [
            (key, self._group(key), repairs)
            for key, repairs in (
                (_unify_separators, ("name_separator",)),
                (str.casefold, ("name_case",)),
                (_fold, ("name_separator", "name_case")),
                (_singular, ("name_plural",)),
            )
        ]
        folded = {_fold(name) for name in self.tools}
        self._actions: dict[str, list[str]] = {}
        for name in self._guessable:
            if (action := _action(name)) is not None:
                self._actions.setdefault(action, []).append(name)
                folded.add(action.replace("_", ""))  # written under another namespace, or none
        self._folded = tuple(folded)
        self._validators: dict[str, Validator | None] = {}
        self.schema_problems: dict[str, str] = {}

    def mentioned_in(self, text: str) -> bool:
        """Whether ``text`` may name a tool: some name, near misses included (separators, case), occurs in
        it. Cheap (C-speed substring checks): a call can only be read in text that passes."""
        folded = _fold(text)
        joined = folded.replace("_", "")  # "FindAttractions" as an action key, "find_attractions" too
        return any(name in folded or name in joined for name in self._folded)

    def _group(self, key: Callable[[str], str]) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for name in self._guessable:
            groups.setdefault(key(name), []).append(name)
        return groups

    def _match(self, name: str) -> tuple[list[str], tuple[str, ...]]:
        """Candidates at the first level that has any: exact, separators, case, both."""
        if name in self.tools:
            return [name], ()
        for key, groups, repairs in self._levels:
            found = groups.get(key(name))
            if found:
                return found, repairs
        return [], ()

    def _lookup(self, name: str) -> tuple[list[str], tuple[str, ...]]:
        """Try the name as written, without wrapping quotes, then without a known prefix, then by its action
        alone: ``Media_3_FindAttractions`` (another tool's namespace) or ``FindAttractions`` (none) for the one
        tool ``Travel_1_FindAttractions``; never a different verb (``delete_file`` is not ``read_file``)."""
        if not isinstance(name, str):
            return [], ()
        current = name.strip()
        repairs: tuple[str, ...] = ()
        unwrapped = current.strip(_NAME_WRAPPERS).strip()
        if unwrapped != current:
            current, repairs = unwrapped, ("name_quotes",)
        bare = _PARAMETER_LIST.sub("", current)
        if bare != current and bare:  # the signature a re-ask showed, copied as the name: "find_restaurant(city)"
            current, repairs = bare, (*repairs, "name_signature")
        found, extra = self._match(current)
        if found:
            return found, repairs + extra
        lowered = current.casefold()
        for prefix in NAME_PREFIXES:
            if lowered.startswith(prefix) and len(current) > len(prefix):
                found, extra = self._match(current[len(prefix) :])
                return found, (*repairs, "name_prefix", *extra)
        action = _action(current)
        found = self._actions.get(action, []) if action is not None else []
        return (found, (*repairs, "name_namespace")) if found else ([], ())

    def resolve(self, name: str) -> tuple[str | None, tuple[str, ...]]:
        """Map a model-written name to a tool name: ``(name or None, repairs applied)``."""
        found, repairs = self._lookup(name)
        return (found[0], repairs) if len(found) == 1 else (None, ())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.resolve(name)[0] is not None

    def describe_unresolved(self, name: str) -> str:
        """Why ``name`` did not resolve, in words a model can act on in a re-ask."""
        shown = _clip(name if isinstance(name, str) else repr(name))
        found, _ = self._lookup(name)
        if len(found) > 1:
            return f"ambiguous tool name {shown!r}: could be {', '.join(sorted(found))}"
        names = self._guessable
        if not names:
            return f"{shown!r} is not a tool; no tools are available"
        shown_tools = [self._signature(name) for name in names[:_MAX_SHOWN_TOOLS]]
        listed = ", ".join(shown_tools) + (", …" if len(names) > _MAX_SHOWN_TOOLS else "")
        return f"{shown!r} is not a tool; the tools are: {listed}"

    def _signature(self, name: str) -> str:
        """``name(param, ...)``: told the tools with their parameters, a small model that wrote a word of the question
        as a tool's name (``happy``, for "a synonym for 'happy'") called the right one 5 times in 10, told only their
        names 3 times in 10."""
        properties = self.tools[name].parameters.get("properties")
        params = [str(key) for key in properties][:_MAX_SHOWN_PARAMETERS] if isinstance(properties, Mapping) else []
        return f"{name}({', '.join(params)})"

    def validator(self, name: str) -> Validator | None:
        """The compiled validator for tool ``name``; ``None`` when its schema is unusable."""
        if name not in self._validators:
            self._validators[name] = self._compile(name)
        return self._validators[name]

    def _compile(self, name: str) -> Validator | None:
        schema = self.tools[name].parameters
        if not isinstance(schema, Mapping):
            self._note_problem(name, "parameters is not a JSON object")
            return None
        compiled = compiled_schema(schema)
        if isinstance(compiled, str):
            self._note_problem(name, compiled)
            return None
        return compiled

    def _note_problem(self, name: str, problem: str) -> None:
        self.schema_problems[name] = _clip(problem, 200)
        logger.warning("tool %r: unusable parameters schema, arguments not validated: %s", name, problem[:200])

    def invalid_optional(self, name: str, value: dict[str, Any]) -> frozenset[str]:
        """The optional top-level parameters whose values are outside their ``enum``, when every validation error
        is such a one; empty when any error is another (a required parameter, a wrong type, a part of a value,
        the object as a whole) or the schema is unusable."""
        validator = self.validator(name)
        if validator is None:
            return frozenset()
        required = self.tools[name].parameters.get("required")
        required = set(required) if isinstance(required, list) else set()
        keys: set[str] = set()
        try:
            for err in islice(validator.iter_errors(value), _MAX_DROP_ERRORS):
                path = err.absolute_path
                key = path[0] if len(path) == 1 else None  # the parameter's own value, not a part of it
                if err.validator != "enum" or not isinstance(key, str) or key in required or key not in value:
                    return frozenset()
                keys.add(key)
        except Exception:  # a schema problem (validate has reported it): drop nothing
            return frozenset()
        return frozenset(keys)

    def validate(self, name: str, value: dict[str, Any]) -> str | None:
        """A short error for the model, or ``None`` when ``value`` fits tool ``name``'s schema."""
        validator = self.validator(name)
        if validator is not None:
            try:
                errors = list(islice(validator.iter_errors(value), 10))
            except RecursionError:
                return "arguments are nested too deeply"
            except Exception as exc:  # unresolvable $ref, bad regex: a schema problem, not the model's
                self._note_problem(name, str(exc).split("\n", 1)[0])
                self._validators[name] = None
            else:
                return _describe_errors(errors)
        return _missing_required(self.tools[name].parameters, value)


# ---- validation messages --------------------------------------------------------------------


def _path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return _clip(text, 80)


def _describe(err: ValidationError) -> str:
    """One validation error as a short sentence naming the parameter."""
    where = _path(err.absolute_path)
    kind, expected, instance = err.validator, err.validator_value, err.instance
    if kind == "required" and isinstance(instance, Mapping) and isinstance(expected, list):
        missing = [r for r in expected if r not in instance] or ["?"]  # one error per missing name
        return "; ".join(f"missing required parameter '{_path([*err.absolute_path, m])}'" for m in missing)
    if kind == "type":
        wanted = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"'{where}' must be {wanted}" if where else f"arguments must be {wanted}"
    if kind == "enum" and isinstance(expected, list):
        options = ", ".join(json.dumps(v, ensure_ascii=False) for v in expected[:10])
        return f"'{where or 'arguments'}' must be one of: {_clip(options, 200)}"
    if kind == "additionalProperties" and expected is False and isinstance(instance, Mapping):
        schema = err.schema if isinstance(err.schema, Mapping) else {}
        known = schema.get("properties") or {}
        extra = next((k for k in instance if k not in known), "?")
        return f"unexpected parameter '{_path([*err.absolute_path, extra])}'"
    message = _clip(err.message, 160)
    return f"'{where}': {message}" if where else message


def _describe_errors(errors: list[ValidationError]) -> str | None:
    if not errors:
        return None
    errors.sort(key=lambda e: len(e.absolute_path))
    messages = list(dict.fromkeys(_describe(e) for e in errors))
    return "; ".join(messages[:_MAX_ERRORS])


def _missing_required(schema: Any, value: Mapping[str, Any]) -> str | None:
    """The check left when a schema is unusable: its top-level ``required`` list."""
    required = schema.get("required") if isinstance(schema, Mapping) else None
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in value:
                return f"missing required parameter '{name}'"
    return None


# ---- the entry points ----------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    """The arguments string we hand clients: compact, UTF-8, key order kept.

    Raises ``ValueError`` for NaN/Infinity and ``TypeError`` for non-JSON values. Lone
    surrogates (legal in JSON escapes, not in UTF-8) are kept as ``\\uXXXX`` escapes.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text


def _json_error(raw: str) -> str:
    """Strict ``json``'s complaint about ``raw``, for the re-ask."""
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except (ValueError, RecursionError) as exc:
        return _clip(str(exc) or type(exc).__name__, 100)
    return "NaN and Infinity are not valid JSON"


def _parse_arguments(raw: Any) -> tuple[dict[str, Any], tuple[str, ...]] | str:
    """Raw arguments as a dict plus repairs, or an error message."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, ()
    if isinstance(raw, Mapping):
        return dict(raw), ()
    if not isinstance(raw, str):
        return f"arguments must be a JSON object, got {type(raw).__name__}"
    parsed = parse_json_lenient(raw)
    if parsed is None:
        return f"arguments are not valid JSON: {_json_error(raw)}"
    return _as_arguments(*parsed)


def _as_arguments(value: Any, repairs: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]] | str:
    """A parsed value as the arguments object (a double-encoded object read again), or an error message."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        inner = parse_json_lenient(value)
        if inner is not None and isinstance(inner[0], dict):
            value, repairs = inner[0], (*repairs, "double_encoded", *inner[1])
    if not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
        return f"arguments must be a JSON object, got {kind}"
    return value, repairs


def _coerce_and_validate(
    index: ToolIndex, name: str, value: dict[str, Any]
) -> tuple[str | None, str | None, list[str]]:
    """``(canonical arguments or None, error or None, coercion repairs)`` for parsed arguments."""
    schema = index.tools[name].parameters
    coercer = Coercer(schema)
    value, dropped = _declared_only(schema, value)
    if dropped:
        coercer.repairs.append("unknown_arguments")
    try:
        value = coercer.coerce(value, schema)
        error = index.validate(name, value)
        if error is not None and (kept := _without_invalid_optional(index, name, value)) is not None:
            value, error = kept, None
            coercer.repairs.append("invalid_optional_dropped")
        return (canonical_json(value) if error is None else None), error, coercer.repairs
    except RecursionError:
        return None, "arguments are nested too deeply", coercer.repairs
    except (ValueError, TypeError) as exc:
        return None, f"arguments cannot be encoded as JSON: {_clip(str(exc), 80)}", coercer.repairs


def _without_invalid_optional(index: ToolIndex, name: str, value: dict[str, Any]) -> dict[str, Any] | None:
    """``value`` without the optional parameters whose values are none of their ``enum`` (``"show_type": "any"``
    for ``"regular"``, ``"3d"``, ``"dontcare"``), when the rest then fits: an optional parameter may be left out,
    and a value the tool does not offer is one the model cannot write right by trying again (asked, the model
    wrote the same call twice and then answered without the tool); the tool's default stands for it. ``None``
    when any error is another kind or elsewhere."""
    keys = index.invalid_optional(name, value)
    if not keys:
        return None
    kept = {k: v for k, v in value.items() if k not in keys}
    return kept if index.validate(name, kept) is None else None


def _declared_only(schema: Any, value: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``value`` without the top-level keys the schema does not declare (step 3); whether any went."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping) or schema.get("additionalProperties", False) is not False:
        return value, False
    required = schema.get("required")
    declared = {*props, *(required if isinstance(required, list) else ())}
    patterns = schema.get("patternProperties")
    kept = {
        k: v for k, v in value.items() if k in declared or (isinstance(patterns, Mapping) and _any_match(patterns, k))
    }
    return kept, len(kept) != len(value)


def _any_match(patterns: Mapping[str, Any], key: str) -> bool:
    for pattern in patterns:
        try:
            if re.search(pattern, key):
                return True
        except (re.error, TypeError):
            return True  # a pattern Python cannot read: keep the key, the validator judges
    return False


def _guessed_repairs(index: ToolIndex, name: str, raw: Any) -> tuple[str, tuple[str, ...]] | None:
    """Repairs that guess, kept only when the result validates against the schema: unescaped
    quotes inside a string value (``inner_quotes``), a backslash at a value's end (``trailing_backslash``)."""
    if not isinstance(raw, str):
        return None
    for value, repairs in guessed_parses(raw):
        parsed = _as_arguments(value, repairs)
        if isinstance(parsed, str):
            continue
        arguments, error, coerced = _coerce_and_validate(index, name, parsed[0])
        if arguments is not None and error is None:
            return arguments, (*parsed[1], *coerced)
    return None


def finalize_call(index: ToolIndex, name: str, raw_arguments: str | Mapping[str, Any] | None) -> CallOutcome:
    """Resolve the name, parse/repair the arguments, coerce to the schema, validate."""
    shown = name if isinstance(name, str) else ""
    resolved, repairs = index.resolve(shown)
    if resolved is None:
        return CallOutcome(shown.strip(), None, (), index.describe_unresolved(shown))
    parsed = _parse_arguments(raw_arguments)
    if isinstance(parsed, str):
        guessed = _guessed_repairs(index, resolved, raw_arguments)
        if guessed is None:
            return CallOutcome(resolved, None, repairs, parsed)
        return CallOutcome(resolved, guessed[0], tuple(dict.fromkeys((*repairs, *guessed[1]))), None)
    value, arg_repairs = parsed
    arguments, error, coerced = _coerce_and_validate(index, resolved, value)
    all_repairs = tuple(dict.fromkeys((*repairs, *arg_repairs, *coerced)))
    return CallOutcome(resolved, arguments, all_repairs, error)
