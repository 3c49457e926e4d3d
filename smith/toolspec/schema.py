"""Is a JSON object a usable OpenAI function schema?

Three layers (docs/architecture.md, "Facts from released code": the SMITH reference code also rejects a
schema that vLLM's structured
decoder, xgrammar, cannot compile):
1. the OpenAI function shape: a Python-identifier `name`, a non-empty `description` (use episodes tell
   tools apart by it), `parameters` of type object with `properties` and a `required` list drawn from them;
2. `parameters` is a valid JSON Schema (checked against the Draft 2020-12 meta-schema with `jsonschema`),
   and every local `$ref` resolves;
3. no keyword makes it unsatisfiable (minimum > maximum, minLength > maxLength, ...) and every `pattern`
   is a valid regex;
4. if `xgrammar` is importable (it comes with vLLM), the parameters schema must compile to a grammar.
   Without it, layers 1-3 stand in, plus a check for the regex features xgrammar does not support
   (lookbehind, backreferences): together they catch the failures xgrammar reports for model-written
   schemas (unknown types, dangling references, empty ranges, unsupported patterns), though not every one.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import re
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError


@cache
def xgrammar_available() -> bool:
    return importlib.util.find_spec("xgrammar") is not None


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _resolves(root: dict[str, Any], ref: str) -> bool:
    if not ref.startswith("#"):
        return False  # no remote references: the decoder has no network either
    node: Any = root
    for part in filter(None, ref[1:].split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


_BOUNDS = (
    ("minimum", "maximum"),
    ("exclusiveMinimum", "exclusiveMaximum"),
    ("minLength", "maxLength"),
    ("minItems", "maxItems"),
    ("minProperties", "maxProperties"),
    ("minContains", "maxContains"),
)
_UNSUPPORTED_REGEX = re.compile(r"\(\?<[=!]|\\[1-9]|\(\?P=")


def _subschemas(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node] + [s for v in node.values() for s in _subschemas(v)]
    if isinstance(node, list):
        return [s for v in node for s in _subschemas(v)]
    return []


def _keyword_error(params: dict[str, Any], strict_regex: bool) -> str | None:
    """Empty ranges and bad patterns; `strict_regex` also rejects regex features xgrammar lacks."""
    for node in _subschemas(params):
        for lo, hi in _BOUNDS:
            a, b = node.get(lo), node.get(hi)
            if isinstance(a, int | float) and isinstance(b, int | float) and a > b:
                return f"{lo} {a} is greater than {hi} {b}: no value can satisfy it"
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            try:
                re.compile(pattern)
            except re.error as e:
                return f"pattern {pattern!r} is not a valid regex: {e}"
            if strict_regex and _UNSUPPORTED_REGEX.search(pattern):
                return (
                    f"pattern {pattern!r} uses lookbehind or backreferences, which structured decoders do not support"
                )
    return None


def _xgrammar_error(parameters: dict[str, Any]) -> str | None:
    import xgrammar

    try:
        xgrammar.Grammar.from_json_schema(json.dumps(parameters))
    except Exception as e:  # xgrammar raises RuntimeError with the C++ message
        return f"structured decoding (xgrammar) cannot compile the parameters schema: {str(e).strip()[-200:]}"
    return None


def schema_error(schema: Any, use_xgrammar: bool | None = None) -> str | None:
    """None if `schema` is a usable function schema, else one line saying what is wrong.
    `use_xgrammar=None` compiles with xgrammar when it is installed."""
    if not isinstance(schema, dict):
        return "the JSON block must be an object"
    name = schema.get("name")
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        return f"schema 'name' must be a Python identifier (the function's name), got {name!r}"
    description = schema.get("description")
    if not isinstance(description, str) or not description.strip():
        return "schema needs a non-empty string 'description' (users pick tools by it)"
    params = schema.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "object":
        return 'schema \'parameters\' must be an object schema with "type": "object"'
    props = params.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in props.items()):
        return "'parameters.properties' must map parameter names to schemas"
    bad = [k for k in props if not k.isidentifier() or keyword.iskeyword(k)]
    if bad:
        return f"parameter names must be Python identifiers, got {bad}"
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "'parameters.required' must be a list of parameter names"
    unknown = [r for r in required if r not in props]
    if unknown:
        return f"'required' names parameters missing from 'properties': {unknown}"
    if len(set(required)) != len(required):
        return "'required' lists a parameter twice"
    try:
        Draft202012Validator.check_schema(params)
    except SchemaError as e:
        return f"'parameters' is not a valid JSON Schema: {e.message[:200]}"
    dangling = [r for r in _refs(params) if not _resolves(params, r)]
    if dangling:
        return f"'parameters' has references that do not resolve inside it: {dangling[:3]}"
    compile_ = bool(use_xgrammar or (use_xgrammar is None and xgrammar_available()))
    problem = _keyword_error(params, strict_regex=not compile_)
    if problem is None and compile_:
        problem = _xgrammar_error(params)
    return problem
