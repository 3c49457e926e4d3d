"""`smith serve-pool`: every pooled tool served over MCP (stdio), each call executed in the sandbox.

The pool's tools keep their own JSON schemas, so this uses the MCP low-level server (the high-level
MCPServer derives schemas from Python signatures, which written tools do not have in this process). The
low-level server does not check arguments, so each call is validated against its tool's schema here
(jsonschema) before anything runs: a bad call gets an error naming the argument, not the tool's TypeError.
A tool's schema refuses arguments it does not declare unless it says otherwise (`additionalProperties`):
the written function would fail on them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp import types
from mcp.server.lowlevel import Server

from smith.pool.export import export_names
from smith.pool.pool import PoolEntry, ToolPool


def _text(s: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=s)], is_error=error)


def input_schema(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """The schema served and enforced for a tool's arguments: its `parameters`, closed to undeclared ones."""
    return {"additionalProperties": False, **(parameters or {"type": "object", "properties": {}})}


def _validator(schema: dict[str, Any]) -> Validator:
    return validator_for(schema, default=Draft202012Validator)(schema)


def argument_errors(validator: Validator, arguments: dict[str, Any]) -> str | None:
    """None if `arguments` fit the schema, else every violation in one line, each naming its argument."""
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    lines = []
    for e in errors:
        where = ".".join(str(p) for p in e.absolute_path)
        message = e.message if len(e.message) <= 200 else e.message[:200] + "..."
        lines.append(f"argument '{where}': {message}" if where else message)
    return "; ".join(lines)


def build_server(pool: ToolPool, sandbox: Any, limits: Any = None, search: Any = None) -> Server:
    """An MCP server over `pool`. `search` (a `smith.pool.retrieval.PoolSearch`) adds its search tool."""
    entries = list(pool)
    by_name: dict[str, PoolEntry] = dict(zip(export_names(entries), entries, strict=True))
    tools = [
        types.Tool(name=name, description=e.tool.description or f"{e.category} tool",
                   input_schema=input_schema(e.tool.schema.get("parameters")))
        for name, e in by_name.items()
    ]
    if search is not None:
        fn = search.spec["function"]
        tools.append(types.Tool(name=fn["name"], description=fn["description"],
                                input_schema=input_schema(fn["parameters"])))
    validators = {t.name: _validator(t.input_schema) for t in tools}
    names_of = {id(e): n for n, e in by_name.items()}

    async def on_list_tools(ctx, params) -> types.ListToolsResult:  # noqa: ANN001
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:  # noqa: ANN001
        args = dict(params.arguments or {})
        if params.name not in validators:
            return _text(f"unknown tool '{params.name}'", error=True)
        bad = argument_errors(validators[params.name], args)
        if bad:
            return _text(f"invalid arguments for {params.name}: {bad}", error=True)
        if search is not None and params.name == search.name:
            hits = search(args["query"], args.get("k"))
            return _text(json.dumps([{"name": names_of[id(e)], "description": e.tool.description} for e in hits]))
        entry = by_name[params.name]
        import anyio

        result = (await anyio.to_thread.run_sync(lambda: sandbox.run(entry.tool.code, entry.tool.function_name, [args],
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
