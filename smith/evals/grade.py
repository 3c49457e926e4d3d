"""`smith grade`: grade a tool file on K held-out questions of a category with the direct evaluator
(smith.rewards.evaluation.evaluate_direct) in the strict sandbox, and print the result as JSON (docs/tasks.md).
smith/cli.py checks the arguments first."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from smith.rewards.evaluation import evaluate_direct
from smith.tasks import items, load_catalog
from smith.toolspec import spec_from_source

GRADE_LIMITS = {"timeout_s": 10.0, "memory_mb": 1024}  # per call; generous for 10-disk Hanoi or countdown search
_SHOWN_CHARS = 200


def grade_cli(args: argparse.Namespace) -> None:
    """`smith grade`: grade a tool file on K questions of a category with the direct evaluator in the
    strict sandbox, and print the result as JSON."""
    from sandbox import Limits, Sandbox

    path = Path(args.tool)
    if not path.is_file():
        raise FileNotFoundError(f"tool file {path} not found; pass an existing .py file to --tool")
    category = load_catalog().get(args.category)
    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    spec = spec_from_source(path.read_text(), args.function, label=str(path))
    questions = items(category.name, args.band, args.k, args.seed)
    with Sandbox(isolation="strict") as sb:
        result = evaluate_direct(spec, questions, sb, Limits(**GRADE_LIMITS))

    def shown(text: str | None) -> str | None:
        return text if text is None or len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."

    report = {
        "category": category.name,
        "group": category.group,
        "split": category.split,
        "band": args.band,
        "seed": args.seed,
        "tool": str(path),
        "function": spec.function_name,
        "k": result.k,
        "correct": result.correct,
        "r_eval": None if math.isnan(result.r_eval) else result.r_eval,  # NaN: every question left out
        "faults": result.faults,
        "questions": [
            {
                "id": t.item_id,
                "status": t.status,
                "answer": shown(t.answer),
                "expected": shown(t.expected),
                "error": t.error,
                "seconds": round(t.seconds, 4),
            }
            for t in result.traces
        ],
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))
