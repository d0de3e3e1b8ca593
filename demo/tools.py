"""The demo agent's tools: their OpenAI schemas and the local functions that execute them.

``get_weather`` is a fake (deterministic made-up weather, so the demo needs no network);
``calculator`` is real arithmetic over Python's ``ast`` with an allow-list of node types:
no ``eval``, no names, no calls, no attribute access, bounded sizes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in one city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression with + - * / // % ** and parentheses.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "The arithmetic expression"}},
                "required": ["expression"],
            },
        },
    },
]

CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "windy", "foggy")
MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64
MAX_MAGNITUDE = 1e100

BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculatorError(ValueError):
    """The expression is not plain, bounded arithmetic."""


def get_weather(city: str) -> dict[str, Any]:
    """Made-up but stable weather for ``city`` (same city, same answer)."""
    seed = int.from_bytes(hashlib.sha256(city.strip().lower().encode()).digest()[:4], "big")
    return {"city": city.strip(), "temperature_c": 5 + seed % 26, "conditions": CONDITIONS[seed % len(CONDITIONS)]}


def calculate(expression: str) -> int | float:
    """Evaluate ``expression`` as arithmetic only; raise ``CalculatorError`` for anything else."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from exc
    return _evaluate(tree.body)


def _evaluate(node: ast.expr) -> int | float:
    """Walk the allowed node types only."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return _bounded(UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent larger than {MAX_EXPONENT}")
        try:
            return _bounded(BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise CalculatorError("use ** for powers (^ is not supported)")
    raise CalculatorError(f"unsupported element: {type(node).__name__}")


def _bounded(value: Any) -> int | float:
    """Refuse complex results, NaN/inf and huge magnitudes."""
    if isinstance(value, complex) or not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("result out of range")
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 1e15 else value


def execute(name: str, arguments: Mapping[str, Any]) -> str:
    """Run one tool call and return its result as the JSON text the ``tool`` message carries."""
    try:
        if name == "get_weather":
            return json.dumps(get_weather(str(arguments["city"])))
        if name == "calculator":
            expression = str(arguments["expression"])
            return json.dumps({"expression": expression, "result": calculate(expression)})
        return json.dumps({"error": f"unknown tool {name!r}"})
    except KeyError as exc:
        return json.dumps({"error": f"missing argument {exc.args[0]!r}"})
    except CalculatorError as exc:
        return json.dumps({"error": str(exc)})
