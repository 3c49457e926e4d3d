import ast
import re


def _poly(node: ast.AST) -> dict[int, int]:
    """Expand an expression in one variable into {degree: coefficient}."""
    if isinstance(node, ast.Constant):
        return {0: node.value}
    if isinstance(node, ast.Name):
        return {1: 1}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return {d: -c for d, c in _poly(node.operand).items()}
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow):
            out = {0: 1}
            for _ in range(node.right.value):
                out = _mul(out, _poly(node.left))
            return out
        left, right = _poly(node.left), _poly(node.right)
        if isinstance(node.op, ast.Mult):
            return _mul(left, right)
        sign = 1 if isinstance(node.op, ast.Add) else -1
        out = dict(left)
        for d, c in right.items():
            out[d] = out.get(d, 0) + sign * c
        return out
    raise ValueError("unsupported expression")


def _mul(p: dict[int, int], q: dict[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for d1, c1 in p.items():
        for d2, c2 in q.items():
            out[d1 + d2] = out.get(d1 + d2, 0) + c1 * c2
    return out


def solve(question: str) -> str:
    expr = re.search(r"(?:expression|following): (.*)", question).group(1).strip()
    var = (re.findall(r"[a-zA-Z]", expr) or ["x"])[0]
    poly = _poly(ast.parse(expr, mode="eval").body)
    terms = [f"{c}*{var}**{d}" for d, c in sorted(poly.items(), reverse=True) if c != 0]
    return " + ".join(terms).replace("+ -", "- ") or "0"
