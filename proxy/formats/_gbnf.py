"""GBNF pieces every format's grammar uses: string literals, repeated calls, free text.

The format grammars (``_hermes_grammar``, ``_pythonic_grammar``) write their wrapper syntax with these
around the value rules ``constrain`` makes from the tools' schemas (``base.SchemaRules``).
"""

from __future__ import annotations

import json


def literal(value: str) -> str:
    """``value`` as a GBNF string literal (GBNF escapes as JSON does)."""
    return json.dumps(value, ensure_ascii=False)


def more(rule: str, max_calls: int, separator: str = "\n") -> str:
    """Up to ``max_calls - 1`` more of ``rule``, each after ``separator`` (empty for one call)."""
    return "" if max_calls <= 1 else f" ({literal(separator)} {rule}){{0,{max_calls - 1}}}"


def free_text(not_first: str) -> str:
    """The ``free-text`` rule: anything that does not start with a character of ``not_first``, so a
    model that starts writing a call can only finish it validly (``not_first``: a GBNF class body)."""
    return f"free-text ::= [^{not_first}] [^\\x00]*"
