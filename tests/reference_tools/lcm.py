import math
import re


def solve(question: str) -> str:
    numbers = [int(x) for x in re.findall(r"\d+", question.split(":")[-1])]
    return str(math.lcm(*numbers))
