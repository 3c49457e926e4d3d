"""TGB's numbers: reading them out of text, grading an answer against the gold value, the Calculator's
arithmetic (shared by the requests, the tools and the grading)."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from typing import Any

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def numbers(text: str) -> list[float]:
    """Every number written in `text` (thousands separators allowed)."""
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def matches(value: float, gold: float) -> bool:
    """Answers are compared at two decimals (the Calculator's precision); 0.01 absorbs float rounding."""
    return abs(value - gold) <= 0.01 + 1e-9


def exposes_gold(text: str, gold: float) -> bool:
    return any(matches(x, gold) for x in numbers(text))


def grade(answer: str, gold: float) -> bool:
    """A request is correct when the last number of the final answer matches the gold value (B.1)."""
    found = numbers(answer)
    return bool(found) and matches(found[-1], gold)


def fmt(x: float) -> str:
    x = round(x, 2)
    return str(int(x)) if x == int(x) else f"{x:.2f}".rstrip("0")


_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv,
}


def calculate(expression: str) -> float:
    """Arithmetic only: numbers, + - * / // % **, parentheses; a bare name raises NameError as in Python."""
    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 16:
                raise ValueError("exponent too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Name):
            raise NameError(f"name '{node.id}' is not defined")
        raise SyntaxError(f"unsupported expression element {type(node).__name__}")

    return float(ev(ast.parse(expression.replace("×", "*").replace("^", "**"), mode="eval")))
