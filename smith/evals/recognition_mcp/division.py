"""Long division at difficulty d, the Recognition-MCP task (Lomekwi paper, sections 4.5 and A.2).

The dividend has d digits and the divisor floor(d/2), drawn uniformly from a generator seeded by the
repetition index, so rep r is the same problem across models and tool counts. Each extra digit adds a
subtract-and-bring-down step to the manual solve, which is what makes grinding expensive.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_INT = re.compile(r"-?\d+")
_PROBLEM = re.compile(r"long division (\d+) / (\d+)\.")


@dataclass(frozen=True)
class Division:
    """One problem: the statement shown to the model and the ground truth the checker uses."""

    dividend: int
    divisor: int

    @property
    def quotient(self) -> int:
        return self.dividend // self.divisor

    @property
    def remainder(self) -> int:
        return self.dividend % self.divisor

    @property
    def text(self) -> str:
        return (f"Compute the integer quotient and remainder of the long division {self.dividend} / {self.divisor}. "
                "Give the quotient and the remainder.")

    @property
    def true_answer(self) -> str:
        return f"{self.quotient} remainder {self.remainder}"

    def check(self, answer: str | None) -> bool:
        return check_answer(answer, self.quotient, self.remainder)


def long_division(difficulty: int, seed: int) -> Division:
    """A d-digit dividend over a floor(d/2)-digit divisor, both uniform at those digit counts (section 4.5)."""
    if difficulty < 2:
        raise ValueError(f"difficulty must be at least 2 dividend digits, got {difficulty}")
    rng = random.Random(seed)
    dividend = rng.randint(10 ** (difficulty - 1), 10**difficulty - 1)
    k = difficulty // 2
    divisor = rng.randint(10 ** (k - 1), 10**k - 1)
    return Division(dividend, divisor)


def check_answer(answer: str | None, quotient: int, remainder: int) -> bool:
    """The paper's checker (A.2): the first two integers are quotient and remainder; thousands commas are
    ignored; a bare quotient suffices when the remainder is zero."""
    if not answer:
        return False
    ints = [int(x) for x in _INT.findall(answer.lower().replace(",", ""))]
    if not ints:
        return False
    if remainder == 0 and len(ints) == 1:
        return ints[0] == quotient
    return len(ints) >= 2 and ints[0] == quotient and ints[1] == remainder


def parse_problem(text: str) -> Division:
    """Recover the operands from a problem statement (released logs store only the text)."""
    m = _PROBLEM.search(text)
    if m is None:
        raise ValueError(f"not a long-division problem statement: {text[:80]!r}; expected '... long division A / B.'")
    return Division(int(m.group(1)), int(m.group(2)))
