"""JSON Schema to GBNF: llama.cpp's own converter, loaded lazily, with the two things its copy lacks.

Sans-IO. A format's grammar (its ``CallGrammar``) is built around the value rules made here, through
``schema_rules`` (the converter behind the small face ``formats.SchemaRules`` describes). The converter is
the one llama.cpp's server uses for ``json_schema``, as llama-cpp-python ships it (its pure-Python
``llama_grammar.py``, loaded on first use without the package, so no native library is loaded). Why not
the others: llguidance and outlines-core do not emit GBNF (llguidance's Lark dialect needs a llama.cpp
built with it, outlines-core emits a regex); xgrammar's EBNF is close to GBNF but it pulls a
deep-learning stack.

What is added here:

* integer bounds, which that copy ignores (``intrange``: an exact digit-range rule); float bounds stay
  unbounded in the grammar and are checked after, as every call is;
* Python literals (``python=True``), for formats whose arguments are Python call syntax (``pythonic``):
  ``True``/``False``/``None`` besides JSON's spellings (the parser reads both), and strings without the
  escapes and raw control characters that Python reads otherwise than JSON (``\\/``, a line break).
  Everything else JSON writes (numbers, ``"strings"``, ``[lists]``, ``{"dicts": ...}``) is Python already.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from .intrange import integer_bounds, integer_range_rule

# The errors llama.cpp's converter raises on a schema it cannot express (it uses asserts).
CONVERTER_ERRORS = (AssertionError, ValueError, KeyError, TypeError, IndexError, RecursionError, NotImplementedError)

# Python-literal spellings of the converter's primitives (see the module docstring).
_PYTHON_PRIMITIVES = {
    "boolean": '("True" | "False" | "true" | "false") space',
    "null": '("None" | "null") space',
    "char": r'[^"\\\x00-\x1F\x7F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])',
}


class ConverterMissing(RuntimeError):
    """llama-cpp-python (its ``llama_grammar.py``) is not installed: toolshim's ``constrain`` extra."""


@functools.cache
def _grammar_module() -> ModuleType:
    """llama-cpp-python's ``llama_grammar.py`` loaded on its own: it imports nothing of the package,
    and importing it as ``llama_cpp.llama_grammar`` would load the native library for nothing."""
    spec = importlib.util.find_spec("llama_cpp")  # finds the package without running its __init__
    path = Path(spec.origin).parent / "llama_grammar.py" if spec and spec.origin else None
    module_spec = importlib.util.spec_from_file_location("toolshim._llama_grammar", path) if path else None
    if path is None or not path.is_file() or module_spec is None or module_spec.loader is None:
        raise ConverterMissing(
            "constrained decoding needs llama.cpp's JSON-Schema converter: pip install 'toolshim[constrain]'"
        )
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@functools.cache
def _converter_class() -> type[Any]:
    """llama.cpp's ``SchemaConverter`` plus integer bounds and, on request, Python literals.

    A subclass because the converter recurses through ``self.visit`` and adds every primitive
    through ``_add_primitive``: a bounded integer or a boolean anywhere (a property, an array item,
    an ``anyOf`` branch) reaches these overrides."""
    module = _grammar_module()

    class Converter(module.SchemaConverter):  # type: ignore[misc,name-defined]
        python = False

        def visit(self, schema: Any, name: str) -> Any:
            bounds = integer_bounds(schema) if isinstance(schema, dict) else None
            if bounds is None:
                return super().visit(schema, name)
            rule_name = name + "-" if name in module.RESERVED_NAMES else name or "root"
            return self._add_rule(rule_name, f"({integer_range_rule(*bounds)}) space")

        def _add_primitive(self, name: str, rule: Any) -> Any:
            if self.python and name in _PYTHON_PRIMITIVES:
                rule = module.BuiltinRule(_PYTHON_PRIMITIVES[name], rule.deps)
            return super()._add_primitive(name, rule)  # its dependencies (a string's char) come back here

    return Converter


def converter(*, python: bool = False) -> Any:
    """A fresh converter (llama.cpp's, with integer bounds; no remote ``$ref`` fetching); ``python``:
    values spelled as Python literals."""
    made = _converter_class()(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    made.python = python
    return made


def value_rule(made: Any, schema: Any, name: str) -> str:
    """The rule name for values of ``schema`` (``$ref`` resolved, a private copy of the schema)."""
    resolved = made.resolve_refs(json.loads(json.dumps(schema)), "tool")
    return str(made.visit(resolved, name))


class ConverterRules:
    """One converter as ``formats.SchemaRules``: what a format's grammar builder may ask of it. The
    formats cannot import this module, so ``grammars`` hands them one of these."""

    def __init__(self, made: Any) -> None:
        self._made = made

    def value(self, schema: Any, name: str) -> str:
        return value_rule(self._made, schema, name)

    def add(self, name: str, rule: str) -> str:
        return str(self._made._add_rule(name, rule))

    def lines(self) -> list[str]:
        return list(self._made.format_grammar().splitlines())


def schema_rules(*, python: bool = False) -> ConverterRules:
    """A fresh converter for one grammar; ``python``: values spelled as Python literals."""
    return ConverterRules(converter(python=python))
