"""Released Recognition-MCP rollouts <-> smith's episode records (DragonWrangler25/lomekwi-tool-discovery).

A released row (runs/oracle/<run>/<size>/episodes.jsonl) already holds everything the counterfactual
scorer reads: tool_calls [{order, tool, meter_raw, turn}], submit {meter_raw, correct, answer}, labels
{index: name}, n, difficulty, budget, surcharge. smith's record is that row plus a `key` and the prompt
`condition`, which the rows do not store: the released qwen35_v2 run is the tool-prior one (section 6.4),
so the condition is an import option. Import checks each row: the labels name n candidates, the problem
regenerates from (difficulty, seed), and smith's checker agrees with the logged verdict; rows with an
`error` field (failed API calls) are skipped, as the paper's scripts do.
"""

from __future__ import annotations

import json
from pathlib import Path

from .division import check_answer, parse_problem

RELEASED_FIELDS = (
    "tool_calls", "submit", "meter_total", "usage", "turns", "noop_total", "refusals", "stopped_reason",
    "agent_texts", "labels", "sequential", "model", "provider", "n", "difficulty", "problem_kind", "seed",
    "relabel_seed", "obfuscate", "budget", "surcharge", "problem", "true_answer", "elapsed_s",
)
REQUIRED = ("tool_calls", "submit", "labels", "n", "difficulty", "seed", "budget", "problem", "model")


def find_logs(root: str | Path) -> list[Path]:
    """Every episodes.jsonl under root (root may be one file)."""
    root = Path(root)
    if root.is_file():
        return [root]
    logs = sorted(root.rglob("episodes.jsonl"))
    if not logs:
        raise FileNotFoundError(f"no episodes.jsonl under {root}; point import_logs at a runs/oracle directory")
    return logs


def import_row(row: dict, condition: str) -> dict:
    """One released row -> a smith record, validated; raises ValueError naming what is wrong."""
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise ValueError(f"released row lacks {', '.join(missing)}; is this a Recognition-MCP episodes.jsonl?")
    if len(row["labels"]) != row["n"]:
        raise ValueError(f"row names {len(row['labels'])} candidate labels but n={row['n']}")
    problem = parse_problem(row["problem"])
    sub = row["submit"]
    record = {k: row[k] for k in RELEASED_FIELDS if k in row}
    record["key"] = f"{row['model']}|{condition}|T{row['n']}|d{row['difficulty']}|r{row['seed']}"
    record["condition"] = condition
    record.setdefault("surcharge", 0)
    record["checker_agrees"] = sub is None or check_answer(sub.get("answer"), problem.quotient,
                                                           problem.remainder) == bool(sub.get("correct"))
    return record


def import_logs(root: str | Path, condition: str = "tool_prior") -> tuple[list[dict], dict]:
    """All rollouts under root as smith records, plus import statistics (files, skipped error rows)."""
    records, keys, skipped = [], set(), 0
    logs = find_logs(root)
    for path in logs:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("error"):
                skipped += 1
                continue
            try:
                record = import_row(row, condition)
            except ValueError as e:
                raise ValueError(f"{path}:{n}: {e}") from None
            base, k = record["key"], 1
            while record["key"] in keys:  # a repeated cell and seed keeps its own key
                k += 1
                record["key"] = f"{base}#{k}"
            keys.add(record["key"])
            records.append(record)
    stats = {"files": [str(p) for p in logs], "rollouts": len(records), "skipped_error_rows": skipped,
             "checker_disagreements": sum(not r["checker_agrees"] for r in records)}
    return records, stats


def export_row(record: dict) -> dict:
    """A smith record in the released row format (what `import_row` reads back)."""
    row = {k: record[k] for k in RELEASED_FIELDS if k in record}
    row["usage"] = {"input_tokens": record["usage"]["input_tokens"], "output_tokens": record["usage"]["output_tokens"],
                    "cache_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0,
                    "calls": record["usage"]["calls"]}
    row.setdefault("refusals", 0)
    return row
