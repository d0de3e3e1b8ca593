"""Ids in OpenAI's Responses shapes: ``resp_…``, ``msg_…``, ``fc_…``, ``rs_…``; what a client may send as
one; the owner of a stored response. No I/O."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from ..wire.errors import InvalidRequest

MAX_ID_LENGTH = 128
_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_ID_LENGTH}}}")

# The owner of every stored response where no client keys are configured (one shared space). Records
# written before owners existed belong to it too, so a keyed deployment cannot read them.
ANONYMOUS_OWNER = "anonymous"
_OWNER_LABEL = b"toolshim response owner v1"


def new_id(prefix: str) -> str:
    """``prefix`` + ``_`` + 48 hex digits, like OpenAI's response and item ids."""
    return f"{prefix}_{secrets.token_hex(24)}"


def is_id(value: object) -> bool:
    """Letters, digits, ``_`` and ``-``, 1 to 128 of them: every id this proxy makes, and nothing that
    could be a path, a key separator, a NUL or a lone surrogate on its way into a store."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def check_id(value: object, param: str) -> str:
    """``value`` when it can be an id, else a 400 naming ``param`` (the value is not repeated: it may
    not even be encodable). A well-formed id that names nothing is the caller's 404."""
    if not is_id(value):
        raise InvalidRequest(
            f"Invalid value for '{param}': expected an id of letters, digits, '_' and '-' "
            f"(at most {MAX_ID_LENGTH} characters).",
            param=param,
            code="invalid_id",
        )
    return str(value)


def owner_of_key(key: str) -> str:
    """The owner a client key's stored responses belong to: an HMAC-SHA256 of the key under a fixed
    label, so the same key owns the same records on every replica and after a restart, and the store
    holds nothing the key can be read back from."""
    return hmac.new(_OWNER_LABEL, key.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()
