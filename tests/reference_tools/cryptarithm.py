import re


def solve(question: str) -> str:
    """Column-wise backtracking from the least significant digit, with carries."""
    lines = [ln.strip() for ln in question.split("Each letter")[0].splitlines()]
    rows = [ln.lstrip("+").strip() for ln in lines if re.fullmatch(r"\+?\s*[A-Z]+", ln)]
    addends, result = rows[:-1], rows[-1]
    leading = {w[0] for w in rows if len(w) > 1}
    width = len(result)
    columns = [[w[-1 - c] for w in addends if c < len(w)] for c in range(width)]
    assign: dict[str, int] = {}
    used = [False] * 10

    def column(c: int, carry: int) -> bool:
        if c == width:
            return carry == 0
        return place(c, columns[c], 0, carry)

    def place(c: int, letters: list[str], i: int, acc: int) -> bool:
        if i < len(letters):
            ch = letters[i]
            if ch in assign:
                return place(c, letters, i + 1, acc + assign[ch])
            for d in range(10):
                if not used[d] and not (d == 0 and ch in leading):
                    assign[ch], used[d] = d, True
                    if place(c, letters, i + 1, acc + d):
                        return True
                    del assign[ch]
                    used[d] = False
            return False
        digit, carry = acc % 10, acc // 10
        ch = result[-1 - c]
        if ch in assign:
            return assign[ch] == digit and column(c + 1, carry)
        if used[digit] or (digit == 0 and ch in leading):
            return False
        assign[ch], used[digit] = digit, True
        if column(c + 1, carry):
            return True
        del assign[ch]
        used[digit] = False
        return False

    if not column(0, 0):
        return ""
    return ",".join(f"{k}={v}" for k, v in sorted(assign.items()))
