import re
from functools import cache


@cache
def _cost(n: int, pegs: int) -> tuple[int, int]:
    """(minimal moves, best split k) for n disks on `pegs` pegs (Frame-Stewart)."""
    if n == 0:
        return 0, 0
    if pegs == 3:
        return 2**n - 1, 0
    return min((2 * _cost(k, pegs)[0] + _cost(n - k, pegs - 1)[0], k) for k in range(1, n)) if n > 1 else (1, 0)


def _moves(disks: list[int], src: int, dst: int, spare: list[int], out: list[str]) -> None:
    n = len(disks)
    if n == 0:
        return
    if n == 1:
        out.append(f"Move disk {disks[0]} from Peg {src} to Peg {dst}")
        return
    if len(spare) == 1:
        _moves(disks[:-1], src, spare[0], [dst], out)
        out.append(f"Move disk {disks[-1]} from Peg {src} to Peg {dst}")
        _moves(disks[:-1], spare[0], dst, [src], out)
        return
    k = _cost(n, len(spare) + 2)[1]
    mid, others = spare[0], spare[1:]
    _moves(disks[:k], src, mid, [dst, *others], out)
    _moves(disks[k:], src, dst, others, out)
    _moves(disks[:k], mid, dst, [src, *others], out)


def solve(question: str) -> str:
    n, pegs = map(int, re.search(r"with (\d+) disks and (\d+) pegs", question).groups())
    src, dst = map(int, re.search(r"from Peg (\d+) to Peg (\d+)", question).groups())
    spare = [p for p in range(1, pegs + 1) if p not in (src, dst)]
    out: list[str] = []
    _moves(list(range(1, n + 1)), src, dst, spare, out)
    return "\n".join(out)
