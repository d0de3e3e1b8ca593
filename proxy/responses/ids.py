"""Ids in OpenAI's Responses shapes: ``resp_…``, ``msg_…``, ``fc_…``, ``rs_…``. No I/O."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    """``prefix`` + ``_`` + 48 hex digits, like OpenAI's response and item ids."""
    return f"{prefix}_{secrets.token_hex(24)}"
