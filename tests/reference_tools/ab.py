_RULES = {("A#", "#A"): [], ("A#", "#B"): ["#B", "A#"], ("B#", "#A"): ["#A", "B#"], ("B#", "#B"): []}


def solve(question: str) -> str:
    program = question.split("consider the following program:")[1].split("Return the final state")[0].split()
    changed = True
    while changed:
        changed = False
        for i in range(len(program) - 1):
            pair = (program[i], program[i + 1])
            if pair in _RULES:
                program[i : i + 2] = _RULES[pair]
                changed = True
                break
    return " ".join(program)
