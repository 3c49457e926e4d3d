"""`smith serve-pool`: every pooled tool served over MCP (stdio), each call executed in the sandbox.

The pool's tools keep their own JSON schemas, so this uses the MCP low-level server (the high-level
MCPServer derives schemas from Python signatures, which written tools do not have in this process).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from smith.pool.export import unique_names
from smith.pool.pool import PoolEntry, ToolPool


def _text(s: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=s)], is_error=error)


def build_server(pool: ToolPool, sandbox: Any, limits: Any = None, search: Any = None) -> Server:
    """An MCP server over `pool`. `search` (a `smith.pool.retrieval.PoolSearch`) adds its search tool."""
    entries = list(pool)
    by_name: dict[str, PoolEntry] = dict(zip(unique_names(entries), entries, strict=True))
    tools = [
        types.Tool(name=name, description=e.description or f"{e.category} tool",
                   input_schema=e.schema.get("parameters") or {"type": "object", "properties": {}})
        for name, e in by_name.items()
    ]
    if search is not None:
        fn = search.spec["function"]
        tools.append(types.Tool(name=fn["name"], description=fn["description"], input_schema=fn["parameters"]))
    names_of = {id(e): n for n, e in by_name.items()}

    async def on_list_tools(ctx, params) -> types.ListToolsResult:  # noqa: ANN001
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:  # noqa: ANN001
        args = dict(params.arguments or {})
        if search is not None and params.name == search.name:
            try:
                hits = search(str(args.get("query", "")), args.get("k"))
            except (TypeError, ValueError) as e:
                return _text(f"error: {e}", error=True)
            return _text(json.dumps([{"name": names_of[id(e)], "description": e.description} for e in hits]))
        entry = by_name.get(params.name)
        if entry is None:
            return _text(f"unknown tool '{params.name}'", error=True)
        import anyio

        result = (await anyio.to_thread.run_sync(lambda: sandbox.run(entry.code, entry.function_name, [args],
                                                                     limits=limits)))[0]
        if result.status != "ok":
            return _text(f"{result.status}: {result.error or ''}".strip(), error=True)
        value = result.value
        return _text(value if isinstance(value, str) else json.dumps(value))

    return Server("smith-pool", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def serve_cli(args: argparse.Namespace) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from sandbox import Limits, Sandbox

    pool = ToolPool.load(args.source)
    search = None
    if args.retrieve or args.retriever:
        from smith.pool.retrieval.retriever import AdaptiveRetriever, pool_search

        retriever = AdaptiveRetriever.load(args.retriever) if args.retriever else AdaptiveRetriever(args.scorer)
        search = pool_search(pool, retriever)

    async def main() -> None:
        with Sandbox(isolation=args.isolation) as sb:
            server = build_server(pool, sb, Limits(), search)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
