"""Schema/code agreement, checked on the syntax tree (never with regexes).

SMITH's format reward requires that "the schema's function names are defined in the code and the schema's
parameters are in the signature" (docs/architecture.md, "Facts from released code"). Here agreement is exact,
because a caller builds
keyword arguments from the schema alone:
- a top-level `def <name>(...)` exists (not async, not nested: the sandbox calls a module-level function);
- the schema's properties are the function's keyword-callable parameters (a `**kwargs` may absorb extras);
- the schema's `required` list is exactly the parameters without a default.
Positional-only parameters and bare `*args` cannot be filled from a JSON object and are rejected.
"""

from __future__ import annotations

import ast
from typing import Any


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    """The last top-level `def name` (a later definition wins at import time, as in Python)."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            found = node
    return found


def signature_mismatch(fn: ast.FunctionDef, parameters: dict[str, Any]) -> str | None:
    """None if `fn`'s signature agrees with the JSON-Schema `parameters`, else what disagrees."""
    a = fn.args
    if a.posonlyargs:
        return f"positional-only parameters {[p.arg for p in a.posonlyargs]} cannot be passed by name"
    if a.vararg is not None:
        return f"*{a.vararg.arg} cannot be filled from a JSON arguments object"
    positional = [p.arg for p in a.args]
    defaulted = set(positional[len(positional) - len(a.defaults) :]) if a.defaults else set()
    defaulted |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None}
    names = positional + [p.arg for p in a.kwonlyargs]
    props = set(parameters.get("properties", {}))
    required = set(parameters.get("required", []))
    missing = sorted(props - set(names)) if a.kwarg is None else []
    if missing:
        return f"schema properties {missing} are not parameters of {fn.name}()"
    undeclared = sorted(set(names) - props)
    if undeclared:
        return f"parameters {undeclared} of {fn.name}() are missing from the schema's properties"
    need = {n for n in names if n not in defaulted}
    if need - required:
        return f"parameters {sorted(need - required)} have no default but are not in 'required'"
    if (required & set(names)) - need:
        return f"parameters {sorted((required & set(names)) - need)} are 'required' but have a default in the code"
    return None
