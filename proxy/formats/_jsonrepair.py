"""Lenient JSON for tool-call arguments: strict ``json`` first, then linear repairs, then ``json5``.

Models wrap arguments in code fences, add prose around them, write Python literals, single
quotes, trailing commas, unquoted keys, raw newlines inside strings or ``\\'`` escapes. This
module turns such text into a value and names every repair it applied (for the metrics).

Order, and why it differs from "json, json5, fixes": ``json5`` is pure Python at about
5 s per MB, so it runs last and only on small inputs. The fixes before it are linear and
cover json5's everyday syntax (quotes, commas, keys, comments) while naming each repair:

1. ``json`` strict, then with raw control characters allowed inside strings.
2. For up to ``_MAX_STARTS`` candidate starts (``{``/``[`` positions): ``raw_decode`` from the
   start (prose or a code fence before, prose after the value); if that fails, a token-level
   rewrite to strict JSON (one regex pass with possessive quantifiers, so adversarial input
   stays linear) and ``json`` again.
3. ``json5`` on inputs up to ``_JSON5_MAX_CHARS``, and only when the rewrite found a whole value that
   strict ``json`` rejects (json5 costs ~0.2-1 ms a call however short the text; broken structure it
   rejects too).

``escape_inner_quotes`` and ``unescape_closing_quotes`` are not in that chain (``guessed_parse`` tries them):
unescaped double quotes inside a string value (``"He said "hi" there"``) and a backslash at a value's end
(``"C:\"``) can only be told from closing and escaped quotes by guessing, so ``_args`` tries them last and
keeps a result only when the repaired object validates against the tool's schema.

Values are never NaN/Infinity (they have no JSON form). Nothing here raises on any input.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import json5

Repairs = tuple[str, ...]

_JSON5_MAX_CHARS = 32_768
_MAX_STARTS = 4
_MAX_NESTING = 500  # deeper than json's C decoder goes anyway; stop rewriting early
_FENCE = "```"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} has no JSON form")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
_LAX = json.JSONDecoder(parse_constant=_reject_constant, strict=False)

# One token per match, whitespace before it skipped (group 1 is the token). Strings use
# possessive loops, so an unterminated string fails in one linear scan; it then falls through
# to the single-character branch and the rewrite stops.
_TOKEN = re.compile(
    r"\s*+("
    r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
    r"|'[^'\\]*+(?:\\.[^'\\]*+)*+'"
    r"|//[^\n]*+"
    r"|\#[^\n]*+"  # a hash comment (YAML/Python habit; never valid JSON outside strings)
    r"|/\*(?:[^*]++|\*(?!/))*+\*/"
    r"|[A-Za-z_$][\w$]*+"
    r"|[-+.\d][\w.+-]*+"
    r"|.|\Z)",  # \Z: trailing whitespace is one match, not one failed attempt per position
    re.S,
)
_ESCAPE = re.compile(r'\\(.)|"', re.S)
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_LANG_TAG = re.compile(r"[\w+.#-]*")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_JSON_LITERALS = frozenset(("true", "false", "null"))


def _dedupe(repairs: list[str]) -> Repairs:
    return tuple(dict.fromkeys(repairs))


def loads_strict(text: str) -> tuple[Any, Repairs] | None:
    """``json`` proper, then with raw control characters in strings (``control_chars``)."""
    try:
        return _STRICT.decode(text), ()
    except json.JSONDecodeError as exc:
        if not exc.msg.startswith("Invalid control character"):
            return None
    except (ValueError, RecursionError):
        return None
    try:
        return _LAX.decode(text), ("control_chars",)
    except (ValueError, RecursionError):
        return None


def _raw_decode(text: str, start: int) -> tuple[Any, int, Repairs] | None:
    """The JSON value at ``start`` and where it ends; whatever follows is not looked at."""
    for decoder, repairs in ((_STRICT, ()), (_LAX, ("control_chars",))):
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        return value, end, repairs
    return None


def _valid_string(token: str) -> bool:
    """Whether a double-quoted token's escapes are all JSON ones (C speed, no regex scan)."""
    try:
        _LAX.decode(token)
    except (ValueError, RecursionError):
        return False
    return True


def _fix_escapes(body: str, quote: str) -> str:
    """A string body rewritten for double quotes: ``\\'`` -> ``'``, invalid escapes doubled."""

    def replace(m: re.Match[str]) -> str:
        char = m.group(1)
        if char is None:
            return '\\"' if quote == "'" else '"'
        if char == "'":
            return "'"
        if char in '"\\/bfnrt' or (char == "u" and _HEX4.match(body, m.end())):
            return m.group(0)
        return "\\\\" + char

    return _ESCAPE.sub(replace, body)


class _Rewriter:
    """Token-level rewrite of relaxed JSON to strict JSON, from one start to the value's end.

    States: ``value`` (after ``:`` or at the top), ``item`` (array element or ``]``), ``key``
    (object key or ``}``), ``colon``, ``after`` (``,`` or a closer). A token that does not fit
    its state ends the attempt, so garbage fails fast.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.repairs: list[str] = []
        self.stack: list[str] = []
        self.state = "value"
        self.comma = False  # a "," was read and not written yet (it may be a trailing one)

    def run(self, start: int) -> tuple[str, int] | None:
        for m in _TOKEN.finditer(self.text, start):
            tok = m.group(1)
            if not tok:
                break
            if not self._token(tok):
                return None
            if not self.stack and self.state == "after":
                return "".join(self.out), m.end()
        return self._close_unfinished()

    def _token(self, tok: str) -> bool:
        head = tok[0]
        if head in "/#":
            if tok == "/":
                return False
            self.repairs.append("comments")
            return True
        if head in "}]":
            return self._closer(tok)
        if head == ",":
            ok = self.state == "after" and bool(self.stack)
            self.comma = ok
            self.state = "key" if ok and self.stack[-1] == "}" else "item"
            return ok
        if head == ":":
            ok = self.state == "colon"
            self.state = "value"
            return self._emit(":") if ok else False
        if self.state == "key":
            return self._key(tok)
        if self.state in ("value", "item"):
            return self._value(tok)
        return False

    def _emit(self, piece: str) -> bool:
        if self.comma:
            self.out.append(",")
            self.comma = False
        self.out.append(piece)
        return True

    def _closer(self, tok: str) -> bool:
        if not self.stack or self.stack[-1] != tok or self.state not in ("key", "item", "after"):
            return False
        if self.comma:
            self.repairs.append("trailing_commas")
            self.comma = False
        self.stack.pop()
        self.out.append(tok)
        self.state = "after"
        return True

    def _string(self, tok: str) -> str | None:
        if len(tok) < 2 or tok[-1] != tok[0]:
            return None  # unterminated: the rest of the text cannot be JSON either
        body = tok[1:-1]
        if tok[0] == "'":
            self.repairs.append("single_quotes")
            return '"' + _fix_escapes(body, "'") + '"'
        if "\\" in body and not _valid_string(tok):
            self.repairs.append("invalid_escapes")
            return '"' + _fix_escapes(body, '"') + '"'
        return tok

    def _key(self, tok: str) -> bool:
        head = tok[0]
        if head in "\"'":
            piece = self._string(tok)
            if piece is None:
                return False
        elif head.isalnum() or head in "_$-+.":
            self.repairs.append("unquoted_keys")
            piece = f'"{tok}"'  # word/number characters only: nothing to escape
        else:
            return False
        self.state = "colon"
        return self._emit(piece)

    def _value(self, tok: str) -> bool:
        head = tok[0]
        if head in "{[":
            if len(self.stack) >= _MAX_NESTING:
                return False
            self.stack.append("}" if head == "{" else "]")
            self.state = "key" if head == "{" else "item"
            return self._emit(tok)
        if head in "\"'":
            piece = self._string(tok)
        elif tok in _PY_LITERALS:
            self.repairs.append("python_literals")
            piece = _PY_LITERALS[tok]
        elif tok in _JSON_LITERALS or head.isdigit() or head in "-+.":
            piece = tok
        else:
            piece = None
        if piece is None:
            return False
        self.state = "after"
        return self._emit(piece)

    def _close_unfinished(self) -> tuple[str, int] | None:
        """End of text inside a container: close it when nothing is left dangling.

        A container opened last with nothing in it (``{``, ``[``) looks truncated, not finished.
        """
        if not self.stack or self.state not in ("key", "item", "after") or self.out[-1] in ("{", "["):
            return None
        if self.comma:
            self.repairs.append("trailing_commas")
        self.repairs.append("unclosed_brackets")
        return "".join(self.out) + "".join(reversed(self.stack)), len(self.text)


def _prefix_repairs(prefix: str) -> list[str]:
    """Repairs implied by what precedes the value: a code fence (with its tag) and/or prose."""
    stripped = prefix.strip()
    if not stripped:
        return []
    fence = stripped.rfind(_FENCE)
    if fence == -1:
        return ["leading_text"]
    tag = stripped[fence + len(_FENCE) :].strip()
    prose = stripped[:fence].strip() or (tag if _LANG_TAG.fullmatch(tag) is None else "")
    return ["code_fence", "leading_text"] if prose else ["code_fence"]


def _suffix_repairs(suffix: str) -> list[str]:
    """Repairs implied by what follows the value: a closing fence and/or prose."""
    stripped = suffix.strip()
    repairs = []
    if stripped.startswith(_FENCE):
        repairs.append("code_fence")
        stripped = stripped[len(_FENCE) :].strip()
    if stripped:
        repairs.append("trailing_text")
    return repairs


def _candidate_starts(text: str) -> list[int]:
    """Where a value may begin: the first ``[`` and the first few ``{`` (bounded work)."""
    starts: list[int] = []
    pos = text.find("{")
    while pos != -1 and len(starts) < _MAX_STARTS:
        starts.append(pos)
        pos = text.find("{", pos + 1)
    bracket = text.find("[")
    if bracket != -1:
        starts.append(bracket)
    if not starts:
        first = len(text) - len(text.lstrip())
        if first < len(text):
            starts.append(first)
    return sorted(starts)[:_MAX_STARTS]


def _parse_from(text: str, start: int) -> tuple[Any, Repairs] | bool:
    """The value starting at ``start``, by ``raw_decode`` or else by the token rewrite.

    When neither reads it: True if the rewrite found a whole value that strict ``json`` still rejects
    (json5-only syntax such as ``0x1F``, ``+1``, ``.5``), False if its structure is broken.
    """
    repairs = _prefix_repairs(text[:start])
    decoded = _raw_decode(text, start)
    if decoded is not None:
        value, end, extra = decoded
        repairs.extend(extra)
    else:
        rewriter = _Rewriter(text)
        rewritten = rewriter.run(start)
        if rewritten is None:
            return False
        loaded = loads_strict(rewritten[0])
        if loaded is None:
            return True
        value, end = loaded[0], rewritten[1]
        repairs.extend(rewriter.repairs)
        repairs.extend(loaded[1])
    repairs.extend(_suffix_repairs(text[end:]))
    return value, _dedupe(repairs)


def _is_finite(value: Any) -> bool:
    """False when ``value`` holds NaN or an infinity anywhere (json5 accepts them)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _json5_fallback(text: str) -> tuple[Any, Repairs] | None:
    """``json5`` on a small input, after dropping a wrapping code fence."""
    if len(text) > _JSON5_MAX_CHARS:
        return None
    body, repairs = text.strip(), ["json5"]
    if body.startswith(_FENCE):
        newline = body.find("\n")
        body = body[newline + 1 :] if newline != -1 else body[len(_FENCE) :]
        body = body.rstrip().removesuffix(_FENCE)
        repairs.insert(0, "code_fence")
    try:
        value = json5.loads(body)
    except (ValueError, RecursionError, TypeError, UnicodeError):
        return None
    return (value, tuple(repairs)) if _is_finite(value) else None


def parse_json_lenient(raw: str) -> tuple[Any, Repairs] | None:
    """Parse JSON, repairing when needed: ``(value, repairs)`` or ``None`` if hopeless."""
    if not isinstance(raw, str):
        return None
    loaded = loads_strict(raw)
    if loaded is not None:
        return loaded
    whole = False
    for start in _candidate_starts(raw):
        parsed = _parse_from(raw, start)
        if not isinstance(parsed, bool):
            return parsed
        whole = whole or parsed
    # json5 costs ~0.2-1 ms per call however short the text: it only runs where the rewrite, which
    # accepts every json5 structure, found a whole value. Broken structure (``{"name": }``, an
    # unclosed object, a flood of openers) is rejected by json5 too; asking it anyway made 1 MiB of
    # small broken blocks cost ~30 s.
    return _json5_fallback(raw) if whole else None


# Outside strings the scan jumps to the next quote or comment; inside, to the next quote or escape.
_OUTSIDE_STRING = re.compile(r'"|//|/\*|#')
_INSIDE_STRING = re.compile(r'["\\]')
_SPACES = re.compile(r"\s*+")
_VALUE_AFTER_COMMA = re.compile(r'["{\[\]}\-\d#]|(?:true|false|null)\b|/[/*]')


def _closes_string(text: str, pos: int) -> bool:
    """Whether a ``"`` just before ``pos`` can close a string: what follows is ``:``, ``}``, ``]``,
    a comment, the end, or a ``,`` and then what starts a JSON value, key or comment (not prose like
    ``, then``)."""
    i = _SPACES.match(text, pos).end()  # type: ignore[union-attr]
    if i >= len(text) or text[i] in ":}]#" or text.startswith(("//", "/*"), i):
        return True
    if text[i] != ",":
        return False
    j = _SPACES.match(text, i + 1).end()  # type: ignore[union-attr]
    return j >= len(text) or _VALUE_AFTER_COMMA.match(text, j) is not None


def escape_inner_quotes(text: str) -> str | None:
    """``text`` with the double quotes that cannot close their string escaped (``inner_quotes``);
    ``None`` when there are none."""
    return _requoted(text, inner_quotes=True)


def unescape_closing_quotes(text: str) -> str | None:
    """``text`` with each ``\\"`` that can close its string read as a backslash and then the closing quote
    (``trailing_backslash``): a Windows path at a value's end, ``"dir C:\\"`` written ``"dir C:\"``, which
    leaves the string, and so the whole object, unterminated. ``None`` when there is none. A guess, as
    ``escape_inner_quotes`` is: only tried when the text does not parse, and kept by callers that check it."""
    return _requoted(text, inner_quotes=False)


def _requoted(text: str, inner_quotes: bool) -> str | None:
    """One linear pass over the strings of ``text`` (``//``, ``#`` and ``/* */`` comments outside strings are
    skipped, so quotes in them are left alone) that rewrites, by ``_closes_string``, either the quotes that
    cannot close their string (escaped) or the escaped quotes that can (their backslash doubled); ``None``
    when nothing was rewritten."""
    out: list[str] = []
    i, done, n = 0, 0, len(text)
    while i < n:
        m = _OUTSIDE_STRING.search(text, i)
        if m is None:
            break
        if m.group() != '"':
            closer = "*/" if m.group() == "/*" else "\n"
            end = text.find(closer, m.end())
            i = n if end == -1 else end + len(closer)
            continue
        i = m.end()
        while i < n:  # inside a string
            q = _INSIDE_STRING.search(text, i)
            if q is None:
                i = n
                break
            i = q.end()
            if q.group() == "\\":
                if not inner_quotes and text.startswith('"', i) and _closes_string(text, i + 1):
                    out += (text[done:i], "\\")  # the backslash kept as one, the quote closes
                    done, i = i, i + 1
                    break
                i += 1  # an escape: the escaped character ends no string
                continue
            if not inner_quotes or _closes_string(text, i):
                break
            out += (text[done : q.start()], '\\"')
            done = i
    if not out:
        return None
    out.append(text[done:])
    return "".join(out)


GUESSES = (("inner_quotes", escape_inner_quotes), ("trailing_backslash", unescape_closing_quotes))
MAX_GUESS_CHARS = 1 << 20  # each guess re-reads the text: longer text is not guessed at


def guessed_parses(text: str, only: str | None = None) -> Iterator[tuple[Any, Repairs]]:
    """``text`` parsed after each guess (``GUESSES``, or the one named ``only``) that makes it parse, the
    guess named first. For text that does not parse as written; callers keep a value only where they check it
    (a schema, a call's shape), so they may try the next guess."""
    if len(text) > MAX_GUESS_CHARS:
        return
    for repair, guess in GUESSES:
        fixed = guess(text) if only in (None, repair) else None
        parsed = parse_json_lenient(fixed) if fixed is not None else None
        if parsed is not None:
            yield parsed[0], (repair, *parsed[1])


def guessed_parse(text: str, only: str | None = None) -> tuple[Any, Repairs] | None:
    """The first of ``guessed_parses``; ``None`` when no guess makes the text parse."""
    return next(guessed_parses(text, only), None)
