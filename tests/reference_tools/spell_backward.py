def solve(question: str) -> str:
    return question.rsplit(":", 1)[-1].strip()[::-1]
