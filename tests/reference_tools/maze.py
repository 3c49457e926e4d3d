import re
from collections import deque


def solve(question: str) -> str:
    start, goal = re.search(r"from '(.)' \(start\) to '(.)' \(goal\)", question).groups()
    wall = re.search(r"Legend: '(.)' = Wall", question).group(1)
    grid = question.split("```")[1].strip("\n").split("\n")
    ((sr, sc),) = [(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == start]
    dist = {(sr, sc): 0}
    queue = deque([(sr, sc)])
    while queue:
        r, c = queue.popleft()
        if grid[r][c] == goal:
            return str(dist[(r, c)])
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < len(grid) and 0 <= nc < len(grid[nr]) and grid[nr][nc] != wall and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    return ""
