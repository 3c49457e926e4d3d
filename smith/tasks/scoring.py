"""Guarded all-or-nothing scoring (docs/architecture.md, "reasoning-gym"; docs/tasks.md, "Full marks").

Correct means full marks, and full marks need three things: the answer has the category's form
(`answer_pattern`, where it has one), the dataset's own `score_answer` gives exactly 1.0, and the category's
`full_marks` check holds. The catalog names the check of every category and says why:

- `equal` / `equal_ignoring_case`: the answer is the gold (up to case);
- `scorer`: the scorer's 1.0 is itself an equality after the dataset's normalisation, or a check of the whole
  answer (a replayed move list, a sympy identity), given the form;
- `exact_value`, `antiderivative`, `conclusion`, `one_digit_per_letter`: verifiers of the categories with
  several valid answers where the scorer's 1.0 alone passes wrong ones.

Partial credit never adds up to full marks: spell_backward's per-letter credit sums to 1.0000000000000002 for
nine letters, which `>= 1.0` once took for full marks. Answers are stripped, scorers that raise count as 0,
and the form is checked first because some scorers run `sympy.parse_expr` (an eval) on the answer.

The bottom of smith.tasks: it imports neither the catalog nor the item store. `catalog.Category.score` and
the store (which keeps only items whose own answer scores 1.0) build on `score_entry`.
"""

from __future__ import annotations

import ast
import itertools
import json
import operator
import re
from collections.abc import Callable
from fractions import Fraction
from functools import cache
from typing import Any, Protocol

MAX_ANSWER_CHARS = 100_000  # the longest real answers (10-disk Hanoi) are ~35k characters
# part of the item cache key (smith.tasks.store): bump it when a change here changes which items are valid
SCORING_VERSION = 2


class Scorable(Protocol):
    """What scoring needs of a category (a catalog `Category`)."""

    @property
    def dataset(self) -> str: ...

    @property
    def full_marks(self) -> str: ...

    def config(self, band: str) -> dict[str, Any]: ...

    def answer_allowed(self, answer: str) -> bool: ...


_RATIONAL_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _rational(node: ast.AST) -> Fraction:
    """The exact value of an expression of integers, + - * / and parentheses; anything else raises."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _rational(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _RATIONAL_OPS:
        return _RATIONAL_OPS[type(node.op)](_rational(node.left), _rational(node.right))
    raise ValueError(f"not an arithmetic expression: {ast.dump(node)[:80]}")


def exact_value(answer: str, entry: dict[str, Any]) -> bool:
    """countdown: the expression's exact value is the target. The scorer compares with np.isclose (rtol 1e-5),
    which passes expressions of the given numbers that only come near it."""
    try:
        return _rational(ast.parse(answer, mode="eval").body) == entry["metadata"]["target"]
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return False


def antiderivative(answer: str, entry: dict[str, Any]) -> bool:
    """simple_integration: the answer names no symbol but the variable and C. The scorer differentiates it and
    takes any other name (`Cx`, `C1`, `X` where the variable is x) for one more constant."""
    import sympy

    var = entry["metadata"]["variable"]
    expr = sympy.parse_expr(answer, local_dict={var: sympy.Symbol(var), "C": sympy.Symbol("C")})
    return {s.name for s in expr.free_symbols} <= {var, "C"}


def conclusion(answer: str, entry: dict[str, Any]) -> bool:
    """propositional_logic: every atom is one of the question's variables (the scorer takes any other text, say
    `(R`, for a fresh atom, and `gold ∨ (R` then follows), and the premises can all hold at once: from
    contradictory premises everything follows, so no answer is wrong (such an item's own answer fails this
    check, and the store drops the item)."""
    from reasoning_gym.logic.propositional_logic import Expression

    def atoms(e: Any) -> set[Any]:
        if e.operator is None:
            return {e.left}
        return atoms(e.left) | (atoms(e.right) if e.right is not None else set())

    variables = entry["metadata"]["variables"]
    if not atoms(Expression.from_string(answer)) <= set(variables):
        return False
    premises = [Expression.from_string(p) for p in entry["metadata"]["premises"]]
    return any(all(p.evaluate(dict(zip(variables, values, strict=True))) for p in premises)
               for values in itertools.product((False, True), repeat=len(variables)))


def one_digit_per_letter(answer: str, entry: dict[str, Any]) -> bool:
    """cryptarithm: no letter is given twice. The scorer keeps the last of `A=3,...,A=1`, so a hedge passed."""
    letters = [pair.split("=")[0].strip() for pair in answer.split(",")]
    return len(letters) == len(set(letters))


_CLAUSE = re.compile(r"(\w+)\s+is\s+an?\s+(\w+)", re.I)


def same_clauses(answer: str, entry: dict[str, Any]) -> bool:
    """knights_knaves: the answer's `NAME is a ROLE` clauses are exactly the gold's (case aside), each name once.
    The scorer compares the (name, role) pairs whose words it knows and skips the rest, so a junk clause appended
    to the gold (`, and Zed is a liar`, `, and Elizabeth is a maybe`) kept its 1.0."""
    found = _CLAUSE.findall(answer)
    gold = {(a.lower(), b.lower()) for a, b in _CLAUSE.findall(entry["answer"])}
    return len(found) == len({a.lower() for a, _ in found}) and {(a.lower(), b.lower()) for a, b in found} == gold


# the `full_marks` checks a catalog entry may name: (stripped answer, entry) -> bool
FULL_MARKS: dict[str, Callable[[str, dict[str, Any]], bool]] = {
    "equal": lambda answer, entry: answer == entry["answer"],
    "equal_ignoring_case": lambda answer, entry: answer.lower() == entry["answer"].lower(),
    "scorer": lambda answer, entry: True,
    "exact_value": exact_value,
    "antiderivative": antiderivative,
    "conclusion": conclusion,
    "one_digit_per_letter": one_digit_per_letter,
    "same_clauses": same_clauses,
}


@cache
def _scorer(dataset: str, config_json: str) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(dataset, size=1, seed=0, **json.loads(config_json))


def score_entry(cat: Scorable, band: str, answer: Any, entry: dict[str, Any]) -> float:
    """1.0 if `answer` earns full marks on `entry` (the module docstring says what that takes), else 0.0;
    never raises."""
    if not isinstance(answer, str):
        return 0.0
    answer = answer.strip()
    if not answer or len(answer) > MAX_ANSWER_CHARS or not cat.answer_allowed(answer):
        return 0.0
    try:
        ds = _scorer(cat.dataset, json.dumps(cat.config(band), sort_keys=True))
        full = float(ds.score_answer(answer, entry)) == 1.0 and FULL_MARKS[cat.full_marks](answer, entry)
    except Exception:
        return 0.0
    return 1.0 if full else 0.0
