"""Expected costs of Deep Lomekwi's two paths (the Appendix B argument carried to the two-step recipe) and the
build-vs-grind threshold the optimal reference agent follows."""

from __future__ import annotations

from fractions import Fraction
from math import comb, factorial

from smith.evals.lomekwi import costs


def expected_double_collect(n_types: int) -> float:
    """Expected uniform draws until each of T kinds has come up twice (the double dixie cup), exactly:
    T * sum_j (-1)^(j+1) C(T,j) sum_k C(j,k) k! / j^(k+1)."""
    total = Fraction(0)
    for j in range(1, n_types + 1):
        inner = sum(Fraction(comb(j, k) * factorial(k), j ** (k + 1)) for k in range(j + 1))
        total += (-1) ** (j + 1) * comb(n_types, j) * inner
    return float(n_types * total)


def expected_build(n: int, n_types: int) -> float:
    """Upper bound on building, in sequential steps like Appendix B's: draw two of every kind, search the
    C(T,2) pairs ((C(T,2)+1)/2 tries), craft the second part and the axe (2), open every container (2n)."""
    return expected_double_collect(n_types) + costs.expected_combine(n_types) + 2 + costs.expected_open(n)


def build_preferred(n: int, n_types: int) -> bool:
    """The deep optimal agent builds iff this bound is below E[grind] = n H_n + n (the same grind as Lomekwi)."""
    return expected_build(n, n_types) < costs.expected_grind(n)
