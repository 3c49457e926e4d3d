"""TGB: the synthetic compositional tool benchmark of the LOTS paper (003, Appendix B.1, Table 4; B.2).

Every request is generated from a hidden scene (a table, a sensor series, a calendar, a small document
corpus) that only the tools can read, and its gold answer is computed from the scene. The registry holds
seven chain tools and eight executable distractors; larger registries add seeded synthetic distractors.

Serving is the paper's TGB format: every served tool runs once per request, the family's chain in
dependency order and every other served tool on generic arguments, and the context lists one
``<Tool>: <output>`` line per served tool in canonical order, capped at 1,500 characters. A chain step
whose producer was not served (or failed) receives an unresolved argument and errors, so removing a
tool re-executes the chain and its score carries the effect propagated downstream (B.2, E.3).

No tool that is off the family's chain ever shows the gold answer: its generic arguments are redrawn
until none of its numbers matches the gold (``exposes_gold``), so a distractor can never be credited.

Files by job: requests (scenes, questions, gold values), tools (chain tools and distractors), registry,
execute (serving and interventions), arithmetic (numbers in text, grading, the Calculator).
"""

from .arithmetic import calculate, exposes_gold, fmt, grade, matches, numbers
from .execute import LINE_CAP, execute, intervene, tool_lines
from .registry import Registry, make_registry
from .requests import (
    CONTROL_FAMILIES,
    FAMILIES,
    N_FIT,
    N_PER_FAMILY,
    Request,
    cipher_codebook,
    generate,
    make_request,
    solve_without_tools,
)
from .tools import AUTHORED, CHAIN_TOOLS, CHAINS, DISTRACTORS, RECORD_TOOLS, Tool, Unresolved, synthetic_distractors

__all__ = [
    "AUTHORED",
    "CHAINS",
    "CHAIN_TOOLS",
    "CONTROL_FAMILIES",
    "DISTRACTORS",
    "FAMILIES",
    "LINE_CAP",
    "N_FIT",
    "N_PER_FAMILY",
    "RECORD_TOOLS",
    "Registry",
    "Request",
    "Tool",
    "Unresolved",
    "calculate",
    "cipher_codebook",
    "execute",
    "exposes_gold",
    "fmt",
    "generate",
    "grade",
    "intervene",
    "make_registry",
    "make_request",
    "matches",
    "numbers",
    "solve_without_tools",
    "synthetic_distractors",
    "tool_lines",
]
