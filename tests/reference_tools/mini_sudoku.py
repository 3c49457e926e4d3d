def solve(question: str) -> str:
    lines = [ln.split() for ln in question.splitlines()]
    grid = [
        [0 if t == "_" else int(t) for t in ln]
        for ln in lines
        if len(ln) == 4 and all(t == "_" or t.isdigit() for t in ln)
    ]

    def ok(r: int, c: int, v: int) -> bool:
        box = [grid[i][j] for i in range(r // 2 * 2, r // 2 * 2 + 2) for j in range(c // 2 * 2, c // 2 * 2 + 2)]
        return v not in grid[r] and v not in (grid[i][c] for i in range(4)) and v not in box

    def fill(pos: int) -> bool:
        if pos == 16:
            return True
        r, c = divmod(pos, 4)
        if grid[r][c]:
            return fill(pos + 1)
        for v in range(1, 5):
            if ok(r, c, v):
                grid[r][c] = v
                if fill(pos + 1):
                    return True
                grid[r][c] = 0
        return False

    fill(0)
    return "\n".join(" ".join(map(str, row)) for row in grid)
