"""`smith export-pool`: a pool as OpenAI tools (smith's metadata in a sidecar), JSONL, or an importable module.

The OpenAI export is a list of `{"type": "function", "function": {name, description, parameters}}` and nothing
else, so strict endpoints accept it as it is; what smith needs to rebuild the pool (code, the callable's name,
category, rewards) goes to `<out>.smith.json`, keyed by the exported tool name.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from smith.pool.pool import PoolEntry, ToolPool
from smith.toolspec import ToolSpec

SIDECAR_SUFFIX = ".smith.json"
SIDECAR_VERSION = 1
# OpenAI's function fields; anything else a written schema carries is dropped from the export
_FUNCTION_KEYS = ("name", "description", "parameters", "strict")


def _distinct(wanted: list[str]) -> list[str]:
    """`wanted` with repeats suffixed (`solve`, `solve_2`), collisions the suffixes make resolved."""
    seen: dict[str, int] = {}
    names = []
    for w in wanted:
        n = seen.get(w, 0)
        seen[w] = n + 1
        names.append(w if n == 0 else f"{w}_{n + 1}")
    # a suffixed name may collide with a real one; resolve deterministically
    while len(set(names)) != len(names):
        dup = {x for x in names if names.count(x) > 1}
        names = [f"{x}_{i}" if x in dup else x for i, x in enumerate(names)]
    return names


def unique_names(entries: list[PoolEntry]) -> list[str]:
    """Distinct callable names: written tools often share a name (`solve`), so repeats get suffixes."""
    return _distinct([e.tool.function_name for e in entries])


def export_names(entries: list[PoolEntry]) -> list[str]:
    """Distinct names OpenAI accepts (`^[a-zA-Z0-9_-]{1,64}$`): a Python identifier may hold other letters
    or run longer, so those are replaced and cut (leaving room for suffixes). Equal to `unique_names` for
    the usual short ASCII names; serve-pool serves under these too, so both agree."""
    return _distinct([re.sub(r"[^A-Za-z0-9_-]", "_", e.tool.function_name)[:48] for e in entries])


def menu_names(tools: list[PoolEntry]) -> dict[str, PoolEntry]:
    """One episode's menu: each tool under its own name, a repeated name (`solve`) suffixed. A tool keeps the
    name its author gave it wherever that is unambiguous (numbering every tool made a small policy misname
    the one it meant)."""
    return dict(zip(unique_names(tools), tools, strict=True))


def to_openai(pool: ToolPool) -> list[dict[str, Any]]:
    """The pool as OpenAI `tools`: only `type` and `function` per tool (see the module docstring)."""
    entries, tools = list(pool), []
    for e, name in zip(entries, export_names(entries), strict=True):
        fn = e.tool.openai_tool(name)["function"]
        tools.append({"type": "function", "function": {k: fn[k] for k in _FUNCTION_KEYS if k in fn}})
    return tools


def to_sidecar(pool: ToolPool) -> dict[str, Any]:
    """smith's metadata for an OpenAI export, keyed by exported tool name: enough to rebuild the pool."""
    entries = list(pool)
    return {
        "format_version": SIDECAR_VERSION,
        "cap_per_category": pool.cap,
        "groups": pool.groups,
        "tools": {
            name: {"callable": e.tool.function_name, "category": e.category, "code": e.tool.code, "r_eval": e.r_eval,
                   "r_judge": e.r_judge, "step": e.step, "source_run": e.source_run, "meta": e.meta}
            for e, name in zip(entries, export_names(entries), strict=True)
        },
    }


def sidecar_path(out: str | os.PathLike) -> Path:
    """Where an OpenAI export's smith metadata lives: `<out>.smith.json`."""
    out = Path(out)
    return out.with_name(out.name + SIDECAR_SUFFIX)


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
        schema = e.tool.openai_tool(name)
        lines += [
            f"# {name}: category {e.category}, r_eval {e.r_eval:.3f}",
            f"_ns = {{}}\nexec(compile({e.tool.code!r}, {name!r}, 'exec'), _ns)",
            f"{name} = _ns[{e.tool.function_name!r}]",
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


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def export(pool: ToolPool, fmt: str, out: str | os.PathLike) -> Path:
    """Write `pool` as `fmt` to `out` (`openai` also writes `sidecar_path(out)`); returns `out`."""
    out = Path(out)
    if fmt == "openai":
        text = json.dumps(to_openai(pool), indent=1)
    elif fmt == "jsonl":
        text = "".join(json.dumps(row) + "\n" for row in pool.to_json()["entries"])
    elif fmt == "python":
        text = to_python(pool)
    else:
        raise ValueError(f"unknown export format '{fmt}'; known: openai, jsonl, python")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "openai":
        _write(sidecar_path(out), json.dumps(to_sidecar(pool), indent=1))
    _write(out, text)
    return out


def load_openai_export(path: str | os.PathLike) -> ToolPool:
    """Rebuild a pool from an `--format openai` export and its `.smith.json` sidecar (the round trip users
    rely on). A missing sidecar, another version or a mismatch of names is refused, naming the file."""
    path = Path(path)
    meta_path = sidecar_path(path)
    if not meta_path.is_file():
        raise FileNotFoundError(f"{path} has no smith sidecar {meta_path.name} next to it (export-pool "
                                "--format openai writes both; the tools alone do not hold the code)")
    tools, meta = json.loads(path.read_text()), json.loads(meta_path.read_text())
    if meta.get("format_version") != SIDECAR_VERSION:
        raise ValueError(f"{meta_path}: format_version {meta.get('format_version')!r}; this smith reads "
                         f"{SIDECAR_VERSION}")
    names = [t["function"]["name"] for t in tools]
    if sorted(names) != sorted(meta["tools"]):
        raise ValueError(f"{path} and {meta_path.name} name different tools; export them again together")
    pool = ToolPool(cap_per_category=meta["cap_per_category"], groups=meta.get("groups"))
    for tool in tools:
        m = meta["tools"][tool["function"]["name"]]
        spec = ToolSpec(m["code"], {**tool["function"], "name": m["callable"]}, m["callable"])
        pool.admit(PoolEntry(category=m["category"], tool=spec, r_eval=m["r_eval"], r_judge=m["r_judge"],
                             step=m["step"], source_run=m["source_run"], meta=m["meta"]))
    return pool


def export_cli(args: argparse.Namespace) -> None:
    pool = ToolPool.load(args.source)
    out = export(pool, args.format, args.out)
    sidecar = f" (smith metadata in {sidecar_path(out)})" if args.format == "openai" else ""
    print(f"exported {len(pool)} tools ({len(pool.categories())} categories) as {args.format} to {out}{sidecar}")
