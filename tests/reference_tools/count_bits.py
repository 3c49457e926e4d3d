import re


def solve(question: str) -> str:
    return str(bin(int(re.findall(r"\d+", question)[-1])).count("1"))
