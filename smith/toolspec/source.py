"""A ToolSpec for a bare Python file (`smith grade`'s input): the schema is read off the function's signature."""

from __future__ import annotations

import ast
from typing import Any

from smith.errors import ConfigError
from smith.toolspec.spec import ToolSpec


def spec_from_source(code: str, function_name: str | None = None, label: str = "tool") -> ToolSpec:
    """A ToolSpec for a bare Python file: the named function (default: the last top-level def), with a
    schema read off its signature (every parameter a string, those without a default required). A file that
    does not parse or has no such function is bad input (ConfigError: `smith grade` exits 2 in one line)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        if function_name is None:
            raise ConfigError(f"{label} does not parse ({e.msg}, line {e.lineno}); fix it or pass --function") from e
        params: dict[str, Any] = {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        }
        return ToolSpec(code, {"name": function_name, "description": label, "parameters": params}, function_name)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if function_name is not None:
        defs = [n for n in defs if n.name == function_name]
    if not defs:
        which = f"def {function_name}(...)" if function_name else "top-level function"
        raise ConfigError(f"{label} has no {which}; define one or pass --function NAME")
    fn = defs[-1]
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    n_defaults = len(fn.args.defaults)
    required = names[: len(names) - n_defaults] if n_defaults else names
    doc = (ast.get_docstring(fn) or f"{fn.name} from {label}").strip().splitlines()[0]
    params = {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": required}
    return ToolSpec(code, {"name": fn.name, "description": doc, "parameters": params}, fn.name)
