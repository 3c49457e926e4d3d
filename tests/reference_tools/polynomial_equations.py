import ast
import itertools
import math
import re
from fractions import Fraction


def _poly(node: ast.AST) -> dict[int, int]:
    if isinstance(node, ast.Constant):
        return {0: node.value}
    if isinstance(node, ast.Name):
        return {1: 1}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return {d: -c for d, c in _poly(node.operand).items()}
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow):
            ((d, c),) = _poly(node.left).items()
            return {d * node.right.value: c**node.right.value}
        left, right = _poly(node.left), _poly(node.right)
        if isinstance(node.op, ast.Mult):
            out: dict[int, int] = {}
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


def _eval(coeffs: list, x: float) -> float:
    acc = 0
    for c in coeffs:  # highest degree first
        acc = acc * x + c
    return acc


def _deflate(coeffs: list[Fraction], r: Fraction) -> list[Fraction]:
    out = [coeffs[0]]
    for c in coeffs[1:-1]:
        out.append(c + out[-1] * r)
    return out


def _divisors(n: int) -> list[int]:
    n = abs(n)
    return [d for d in range(1, n + 1) if n % d == 0]


def _real_roots(coeffs: list[float]) -> list[float]:
    """Simple real roots of a polynomial without rational roots: bisection between critical points."""
    n = len(coeffs) - 1
    if n == 0:
        return []
    if n == 1:
        return [-coeffs[1] / coeffs[0]]
    deriv = [c * (n - i) for i, c in enumerate(coeffs[:-1])]
    bound = 1 + max(abs(c / coeffs[0]) for c in coeffs[1:])
    points = [-bound, *sorted(_real_roots(deriv)), bound]
    roots = []
    for lo, hi in itertools.pairwise(points):
        flo, fhi = _eval(coeffs, lo), _eval(coeffs, hi)
        if flo == 0 or flo * fhi > 0:
            continue
        for _ in range(200):
            mid = (lo + hi) / 2
            fm = _eval(coeffs, mid)
            if fm == 0 or mid in (lo, hi):
                break
            if (fm < 0) == (flo < 0):
                lo, flo = mid, fm
            else:
                hi = mid
        roots.append((lo + hi) / 2)
    return roots


def solve(question: str) -> str:
    m = re.search(r"(?::|\n)\s*([^:\n]*?) = 0", question)
    poly = _poly(ast.parse(m.group(1), mode="eval").body)
    degree = max(d for d, c in poly.items() if c)
    coeffs = [Fraction(poly.get(d, 0)) for d in range(degree, -1, -1)]
    roots: set[Fraction | float] = set()
    while len(coeffs) > 1 and coeffs[-1] == 0:  # factor out x
        roots.add(Fraction(0))
        coeffs.pop()
    found = True
    while found and len(coeffs) > 1:  # exact rational roots (rational root theorem), with multiplicity
        found = False
        scale = math.lcm(*(c.denominator for c in coeffs))
        ints = [int(c * scale) for c in coeffs]
        for p in _divisors(ints[-1]):
            for q in _divisors(ints[0]):
                for r in (Fraction(p, q), Fraction(-p, q)):
                    if sum(c * r ** (len(ints) - 1 - i) for i, c in enumerate(ints)) == 0:
                        roots.add(r)
                        coeffs = _deflate(coeffs, r)
                        found = True
                        break
                if found:
                    break
            if found:
                break
    roots.update(_real_roots([float(c) for c in coeffs]))
    return ", ".join(str(round(float(r), 4)) for r in sorted(roots))
