"""Tool call ids as OpenAI writes them: ``call_`` and 24 letters and digits, drawn uniformly."""

from __future__ import annotations

import secrets
import string

_ALPHABET = string.ascii_letters + string.digits
_CALL_ID_CHARS = 24
_FAIR_BYTE = 256 - 256 % len(_ALPHABET)  # random bytes under this map evenly onto the alphabet


def new_call_id() -> str:
    """``call_`` and 24 characters drawn uniformly from letters and digits, from one read of the
    system's random source (a draw per character read it 24 times, on every call)."""
    chars: list[str] = []
    while len(chars) < _CALL_ID_CHARS:
        fair = [b for b in secrets.token_bytes(2 * _CALL_ID_CHARS) if b < _FAIR_BYTE]
        chars += [_ALPHABET[b % len(_ALPHABET)] for b in fair]
    return "call_" + "".join(chars[:_CALL_ID_CHARS])
