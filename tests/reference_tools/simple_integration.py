import ast
import re
from fractions import Fraction


def _poly(node: ast.AST) -> dict[int, Fraction]:
    """A sum of c*x**d terms (with /, unary minus) as {degree: coefficient}."""
    if isinstance(node, ast.Constant):
        return {0: Fraction(node.value)}
    if isinstance(node, ast.Name):
        return {1: Fraction(1)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return {d: -c for d, c in _poly(node.operand).items()}
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow):
            ((d, c),) = _poly(node.left).items()
            return {d * node.right.value: c**node.right.value}
        left, right = _poly(node.left), _poly(node.right)
        if isinstance(node.op, ast.Div):
            ((_, k),) = right.items()
            return {d: c / k for d, c in left.items()}
        if isinstance(node.op, ast.Mult):
            out: dict[int, Fraction] = {}
            for d1, c1 in left.items():
                for d2, c2 in right.items():
                    out[d1 + d2] = out.get(d1 + d2, 0) + c1 * c2
            return out
        sign = 1 if isinstance(node.op, ast.Add) else -1
        out = dict(left)
        for d, c in right.items():
            out[d] = out.get(d, 0) + sign * c
        return out
    raise ValueError("unsupported expression")


def solve(question: str) -> str:
    integrand = re.search(r"∫ (.*) dx", question).group(1)
    var = (re.findall(r"[a-zA-Z]", integrand) or ["x"])[0]
    terms = []
    for d, c in sorted(_poly(ast.parse(integrand, mode="eval").body).items(), reverse=True):
        c = c / (d + 1)
        if c:
            terms.append(f"({c.numerator})*{var}**{d + 1}/{c.denominator}")
    return " + ".join([*terms, "C"])
