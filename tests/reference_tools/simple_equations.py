import ast
import re
from fractions import Fraction


def _linear(node: ast.AST, var: str) -> tuple[Fraction, Fraction]:
    """(a, b) with expression == a*var + b."""
    if isinstance(node, ast.Constant):
        return Fraction(0), Fraction(node.value)
    if isinstance(node, ast.Name):
        return Fraction(1), Fraction(0)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        a, b = _linear(node.operand, var)
        return -a, -b
    if isinstance(node, ast.BinOp):
        (a1, b1), (a2, b2) = _linear(node.left, var), _linear(node.right, var)
        if isinstance(node.op, ast.Add):
            return a1 + a2, b1 + b2
        if isinstance(node.op, ast.Sub):
            return a1 - a2, b1 - b2
        if isinstance(node.op, ast.Mult):
            return a1 * b2 + a2 * b1, b1 * b2  # one side is constant in a linear equation
        if isinstance(node.op, ast.Div):
            return a1 / b2, b1 / b2
    raise ValueError("not a linear expression")


def solve(question: str) -> str:
    equation = question.rsplit(":", 1)[-1]
    var = re.search(r"[a-z]", equation).group()
    left, right = equation.split("=")
    (a1, b1), (a2, b2) = (_linear(ast.parse(s.strip(), mode="eval").body, var) for s in (left, right))
    x = (b2 - b1) / (a1 - a2)
    return str(x.numerator) if x.denominator == 1 else str(float(x))
