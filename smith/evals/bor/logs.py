"""Read retrieval logs (JSONL or CSV) into `QueryRecord`s, as the reference's loaders do.

A row needs a pool size N, a depth K and a hit; each is found under the first of its aliases present in the
row (the reference's alias table, `ALIASES`), or under the column an explicit `mapping` names. Logs often
drop the relevant count R: it then comes from `default_R` (one R for every row) or from `R_frac`
(R = max(1, round(R_frac * N)), Python's round-half-even, as in the reference), in that order after the
row's own R. Both fallbacks are estimates, and the audit built on them is one too.

Read as the reference reads: a row missing N, K or hit is skipped (an error with `strict`); K above N is
shown as N (a shortlist cannot exceed the pool) and R above N as N; a hit is a true boolean, a number
above 0, or one of the words in `YES`. Stricter, each a one-line error naming the line: counts that are not
whole numbers (the reference truncates 600.5 to 600), a hit word that is in neither `YES` nor `NO` (the
reference counts any such word as a miss), a row that is not a JSON object, an unknown mapping key, and
R_frac outside (0, 1]. A numeric hit written as text ("2" in a CSV) is read as the number, as in JSONL
(the reference reads it as a miss), and an empty CSV cell as an absent field.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from smith.evals.bor.auditing import QueryRecord
from smith.pool.retrieval.chance import as_count

ALIASES: dict[str, tuple[str, ...]] = {
    "N": ("N", "n", "pool_size", "corpus_size", "num_candidates", "total_tools", "total_docs", "total"),
    "K": ("K", "k", "depth", "top_k", "topk", "num_shown", "num_retrieved", "shortlist_size"),
    "hit": ("hit", "success", "found", "solved", "contains_relevant", "task_success", "label"),
    "R": ("R", "r", "relevant", "num_relevant", "n_relevant", "relevant_count"),
    "qid": ("qid", "query_id", "id", "request_id", "trace_id"),
}
YES = frozenset({"true", "yes", "y", "t", "hit", "success"})  # the reference's hit words (and "1", a number here)
NO = frozenset({"false", "no", "n", "f", "miss", "failure", "fail"})


def _field(row: Mapping[str, Any], key: str, mapping: Mapping[str, str] | None) -> Any:
    """The row's value for `key` (None when absent; an empty CSV cell is absent too)."""
    names = (mapping[key],) if mapping and key in mapping else ALIASES[key]
    value = next((row[n] for n in names if n in row), None)
    return None if isinstance(value, str) and not value.strip() else value


def _number(value: Any) -> Any:
    """Text that spells a number as that number (int before float, so large counts stay exact)."""
    if isinstance(value, str):
        for parse in (int, float):
            with contextlib.suppress(ValueError):
                return parse(value)
    return value


def _hit(value: Any) -> bool:
    value = _number(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and not math.isnan(value):
        return value > 0
    word = str(value).strip().lower()
    if word not in YES | NO:
        raise ValueError(f"hit must be a boolean, a number or one of {sorted(YES | NO)}; got {value!r}")
    return word in YES


def _records(
    rows: Iterable[tuple[int, Any]],
    mapping: Mapping[str, str] | None,
    default_R: int | None,
    R_frac: float | None,
    strict: bool,
) -> list[QueryRecord]:
    unknown = set(mapping or {}) - set(ALIASES)
    if unknown:
        raise ValueError(f"mapping names unknown fields {sorted(unknown)}; known: {', '.join(ALIASES)}")
    if R_frac is not None and not 0 < R_frac <= 1:
        raise ValueError(f"R_frac must be in (0, 1]; got {R_frac}")
    out = []
    for line, row in rows:
        if not isinstance(row, Mapping):
            raise ValueError(f"line {line}: a row must be a JSON object; got {type(row).__name__}")
        got = {key: _field(row, key, mapping) for key in ALIASES}
        missing = [k for k in ("N", "K", "hit") if got[k] is None]
        if missing:
            if strict:
                raise ValueError(f"line {line}: no {', '.join(missing)} field; keys present: {sorted(map(str, row))}")
            continue
        try:
            N = as_count(_number(got["N"]), "N")
            K = min(as_count(_number(got["K"]), "K"), N)
            if got["R"] is not None:
                R = as_count(_number(got["R"]), "R")
            elif default_R is not None:
                R = as_count(default_R, "default_R")
            elif R_frac is not None:
                R = max(1, round(R_frac * N))
            else:
                raise ValueError("no relevant-count field (R); pass default_R or R_frac (e.g. 0.05) as an estimate")
            qid = None if got["qid"] is None else str(got["qid"])
            out.append(QueryRecord(N, min(R, N), K, _hit(got["hit"]), qid=qid))
        except ValueError as e:
            raise ValueError(f"line {line}: {e}") from None
    return out


def _jsonl_rows(path: Path) -> Iterable[tuple[int, Any]]:
    with path.open() as fh:
        for line, text in enumerate(fh, 1):
            if text.strip():
                try:
                    yield line, json.loads(text)
                except json.JSONDecodeError as e:
                    raise ValueError(f"line {line}: not valid JSON ({e.msg})") from None


def from_jsonl(
    path: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    default_R: int | None = None,
    R_frac: float | None = None,
    strict: bool = False,
) -> list[QueryRecord]:
    """QueryRecords from a JSONL log, one object per line (blank lines skipped); rules in the module docstring."""
    return _records(_jsonl_rows(Path(path)), mapping, default_R, R_frac, strict)


def from_csv(
    path: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    default_R: int | None = None,
    R_frac: float | None = None,
    strict: bool = False,
) -> list[QueryRecord]:
    """QueryRecords from a CSV log with a header row (errors name the file line of the row)."""
    with Path(path).open(newline="") as fh:
        reader = csv.DictReader(fh)
        return _records(((reader.line_num, row) for row in reader), mapping, default_R, R_frac, strict)
