import re


def solve(question: str) -> str:
    expr = question.split(":")[-1].split("=")[0]
    tokens = re.findall(r"[+-]|\d+", expr)
    total, sign, pending = 0, 1, 1
    for tok in tokens:
        if tok in "+-":
            pending = pending * (-1 if tok == "-" else 1)
        else:
            total += sign * pending * int(tok)
            pending = 1
    return str(total)
