"""`smith export-pool`: a pool as OpenAI tools (with code alongside), JSONL, or an importable module."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from smith.pool.pool import PoolEntry, ToolPool


def unique_names(entries: list[PoolEntry]) -> list[str]:
    """Distinct callable names: written tools often share a name (`solve`), so repeats get suffixes."""
    seen: dict[str, int] = {}
    names = []
    for e in entries:
        n = seen.get(e.function_name, 0)
        seen[e.function_name] = n + 1
        names.append(e.function_name if n == 0 else f"{e.function_name}_{n + 1}")
    # a suffixed name may collide with a real one; resolve deterministically
    while len(set(names)) != len(names):
        dup = {x for x in names if names.count(x) > 1}
        names = [f"{x}_{i}" if x in dup else x for i, x in enumerate(names)]
    return names


def menu_names(tools: list[PoolEntry]) -> dict[str, PoolEntry]:
    """One episode's menu: each tool under its own name, a repeated name (`solve`) suffixed. A tool keeps the
    name its author gave it wherever that is unambiguous (numbering every tool made a small policy misname
    the one it meant)."""
    return dict(zip(unique_names(tools), tools, strict=True))


def to_openai(pool: ToolPool) -> list[dict[str, Any]]:
    entries = list(pool)
    return [
        {**e.openai_tool(name), "code": e.code, "callable": e.function_name, "category": e.category,
         "r_eval": e.r_eval, "r_judge": e.r_judge}
        for e, name in zip(entries, unique_names(entries), strict=True)
    ]


def to_python(pool: ToolPool) -> str:
    """One module: each tool's code in its own namespace, exposed under its unique name, plus TOOLS."""
    entries = list(pool)
    names = unique_names(entries)
    lines = [
        '"""Tools exported from a smith tool pool. TOOLS maps name -> (function, OpenAI tool schema)."""',
        "",
        "TOOLS = {}",
        "",
    ]
    for e, name in zip(entries, names, strict=True):
        schema = e.openai_tool(name)
        lines += [
            f"# {name}: category {e.category}, r_eval {e.r_eval:.3f}",
            f"_ns = {{}}\nexec(compile({e.code!r}, {name!r}, 'exec'), _ns)",
            f"{name} = _ns[{e.function_name!r}]",
            f"TOOLS[{name!r}] = ({name}, {json.dumps(schema)!r})",
            "",
        ]
    lines += [
        "import json as _json",
        "TOOLS = {k: (f, _json.loads(s)) for k, (f, s) in TOOLS.items()}",
        "del _ns",
        "",
    ]
    return "\n".join(lines)


def export(pool: ToolPool, fmt: str, out: str | os.PathLike) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "openai":
        text = json.dumps(to_openai(pool), indent=1)
    elif fmt == "jsonl":
        text = "".join(json.dumps(row) + "\n" for row in pool.to_json()["entries"])
    elif fmt == "python":
        text = to_python(pool)
    else:
        raise ValueError(f"unknown export format '{fmt}'; known: openai, jsonl, python")
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    return out


def load_openai_export(path: str | os.PathLike, cap_per_category: int = 20) -> ToolPool:
    """Rebuild a pool from an `--format openai` export (the round trip users rely on)."""
    pool = ToolPool(cap_per_category=cap_per_category)
    for row in json.loads(Path(path).read_text()):
        fn = row["function"]
        pool.admit(PoolEntry(category=row["category"], code=row["code"], schema={**fn, "name": row["callable"]},
                             function_name=row["callable"], r_eval=row["r_eval"], r_judge=row.get("r_judge")))
    return pool


def export_cli(args: argparse.Namespace) -> None:
    pool = ToolPool.load(args.source)
    out = export(pool, args.format, args.out)
    print(f"exported {len(pool)} tools ({len(pool.categories())} categories) as {args.format} to {out}")
