"""The paper's Lomekwi findings (section 5.2, Figures 1-2) and Deep Lomekwi findings (lomekwi.tex, "Notable
Variations", figure deep_lomekwi) as checks on a summary.

The paper prints no Lomekwi table; its claims are orderings read off the figures. Each check names the
models it compares and is evaluated only when all of them are in the summary.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from smith.evals.lomekwi.plots import classify

# (claim, metric, [(family, label)...] that must be strictly decreasing in that metric)
CLAIMS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("recognition inverts across Claude: R(Haiku) > R(Sonnet)", "R", [("Claude", "Haiku"), ("Claude", "Sonnet")]),
    ("recognition inverts across Claude: R(Haiku) > R(Opus)", "R", [("Claude", "Haiku"), ("Claude", "Opus")]),
    ("Opus builds less than Haiku", "build_rate", [("Claude", "Haiku"), ("Claude", "Opus")]),
    ("Qwen3.5 27B builds less than 4B", "build_rate", [("Qwen3.5", "4B"), ("Qwen3.5", "27B")]),
    ("recognition falls with size in Qwen3.5: R(4B) > R(9B) > R(27B)", "R",
     [("Qwen3.5", "4B"), ("Qwen3.5", "9B"), ("Qwen3.5", "27B")]),
    ("success grows with size in Claude: S(Opus) > S(Sonnet) > S(Haiku)", "S",
     [("Claude", "Opus"), ("Claude", "Sonnet"), ("Claude", "Haiku")]),
    ("efficiency grows with size in Claude: E(Opus) > E(Sonnet) > E(Haiku)", "E",
     [("Claude", "Opus"), ("Claude", "Sonnet"), ("Claude", "Haiku")]),
    ("curiosity grows with size in Claude: C(Sonnet) > C(Haiku)", "C", [("Claude", "Sonnet"), ("Claude", "Haiku")]),
    ("curiosity grows with size in Qwen3.5: C(27B) > C(9B) > C(2B)", "C",
     [("Qwen3.5", "27B"), ("Qwen3.5", "9B"), ("Qwen3.5", "2B")]),
    ("efficiency drops at the middle Qwen3.5 size: E(4B) > E(9B)", "E", [("Qwen3.5", "4B"), ("Qwen3.5", "9B")]),
    ("efficiency drops at the middle Qwen3.5 size: E(27B) > E(9B)", "E", [("Qwen3.5", "27B"), ("Qwen3.5", "9B")]),
]


CLAUDE = [("Claude", "Haiku"), ("Claude", "Sonnet"), ("Claude", "Opus")]
DEEP_CLAIMS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("the inversion shows in step 1: R1(Haiku) > R1(Sonnet)", "R1", CLAUDE[:2]),
    ("the inversion shows in step 1: R1(Haiku) > R1(Opus)", "R1", CLAUDE[0::2]),
    ("overall recognition inverts: R(Haiku) > R(Sonnet)", "R", CLAUDE[:2]),
    ("overall recognition inverts: R(Haiku) > R(Opus)", "R", CLAUDE[0::2]),
]
# "R2 is relatively flat as models grow larger": read as every pair's 95% Wilson intervals overlapping.
DEEP_FLAT: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("R2 is relatively flat: Haiku and Sonnet intervals overlap", "R2", CLAUDE[:2]),
    ("R2 is relatively flat: Haiku and Opus intervals overlap", "R2", CLAUDE[0::2]),
    ("R2 is relatively flat: Sonnet and Opus intervals overlap", "R2", CLAUDE[1:]),
]


def check_claims(models: dict[str, dict[str, Any]],
                 claims: list[tuple[str, str, list[tuple[str, str]]]] = CLAIMS) -> list[dict[str, Any]]:
    """Each applicable claim with the values it compared and whether the summary agrees."""
    by_id = {classify(m)[0::2]: m for m in models}
    out = []
    for claim, metric, members in claims:
        if not all(k in by_id for k in members):
            continue
        values = {f"{fam} {label}": models[by_id[(fam, label)]][metric] for fam, label in members}
        seq = list(values.values())
        out.append({"claim": claim, "metric": metric, "values": values,
                    "agrees": all(a > b for a, b in pairwise(seq))})
    return out

# The Deep Lomekwi figure's plotted values (figures/deep_lomekwi.pdf in the release, read from its vector paths:
# each point's height on the panel's -0.05..1.08 axis). They are the released logs' fractions: Haiku C 96/105,
# R1 85/96, R2 51/85, E 38/51, S 43/105; Sonnet 104/105, 32/104, 19/32, 19/19, 84/105; Opus, whose released
# log is unreadable, 94/105, 26/94, 18/26, 14/18, 54/105.
DEEP_FIGURE: dict[tuple[str, str], dict[str, float]] = {
    ("Claude", "Haiku"): {"C": 0.9143, "R1": 0.8854, "R2": 0.6000, "E": 0.7451, "S": 0.4095},
    ("Claude", "Sonnet"): {"C": 0.9905, "R1": 0.3077, "R2": 0.5937, "E": 1.0000, "S": 0.8000},
    ("Claude", "Opus"): {"C": 0.8952, "R1": 0.2766, "R2": 0.6923, "E": 0.7778, "S": 0.5143},
}
FIGURE_TOLERANCE = 5e-4  # the values above are rounded to 4 decimals


def check_deep_claims(models: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The Deep Lomekwi orderings, then the flatness of R2 (intervals overlapping), where the models are present."""
    out = check_claims(models, DEEP_CLAIMS)
    by_id = {classify(m)[0::2]: m for m in models}
    for claim, metric, (a, b) in DEEP_FLAT:
        if a in by_id and b in by_id:
            (lo_a, hi_a), (lo_b, hi_b) = models[by_id[a]][f"{metric}_ci"], models[by_id[b]][f"{metric}_ci"]
            out.append({"claim": claim, "metric": metric,
                        "values": {f"{f} {lab}": models[by_id[(f, lab)]][metric] for f, lab in (a, b)},
                        "agrees": max(lo_a, lo_b) <= min(hi_a, hi_b)})
    for (fam, label), figure in DEEP_FIGURE.items():
        if (fam, label) in by_id:
            ours = {k: models[by_id[(fam, label)]][k] for k in figure}
            out.append({"claim": f"{fam} {label} is the paper's figure (C, R1, R2, E, S)", "metric": "figure",
                        "values": ours, "figure": figure,
                        "agrees": all(abs(ours[k] - v) <= FIGURE_TOLERANCE for k, v in figure.items())})
    return out
