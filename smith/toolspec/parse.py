"""A build-episode response -> ToolSpec, or the first reason it is malformed (SMITH format reward).

The response must hold exactly one fenced ```python block and one fenced ```json block (the function
schema, bare or wrapped as {"type": "function", "function": ...}); the schema must be usable (schema.py)
and agree with the code (agreement.py). Arbitrary text never raises: every failure is a `Reason`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from smith.toolspec.agreement import find_function, signature_mismatch
from smith.toolspec.schema import schema_error
from smith.toolspec.spec import ToolSpec

MAX_RESPONSE_CHARS = 200_000


class Reason(StrEnum):
    """Why a response is not a well-formed tool, checked in this order."""

    OK = "ok"
    TOO_LONG = "too_long"  # over MAX_RESPONSE_CHARS; not parsed at all
    MISSING_PYTHON_BLOCK = "missing_python_block"
    MISSING_JSON_BLOCK = "missing_json_block"
    MULTIPLE_BLOCKS = "multiple_blocks"  # more than one python or more than one json block
    UNCLOSED_BLOCK = "unclosed_block"  # a fence opened and never closed
    INVALID_JSON = "invalid_json"
    INVALID_SCHEMA = "invalid_schema"  # not a usable OpenAI function schema, or xgrammar cannot compile it
    SYNTAX_ERROR = "syntax_error"
    NAME_NOT_IN_CODE = "name_not_in_code"
    PARAM_MISMATCH = "param_mismatch"


@dataclass(frozen=True)
class ParseResult:
    ok: bool
    reason: Reason
    code: str | None = None
    schema: dict[str, Any] | None = None
    function_name: str | None = None
    detail: str = ""

    @property
    def spec(self) -> ToolSpec | None:
        if not self.ok or self.code is None or self.schema is None or self.function_name is None:
            return None
        return ToolSpec(self.code, self.schema, self.function_name)


@dataclass(frozen=True)
class _Block:
    lang: str
    body: str
    closed: bool


_LANGS = {"python": "python", "py": "python", "python3": "python", "json": "json"}


def fenced_blocks(text: str) -> list[_Block]:
    """Markdown fenced blocks: an opening line starting with ``` (its info string gives the language)
    up to the next line that is only ``` (an unclosed block runs to the end)."""
    blocks: list[_Block] = []
    lang: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if lang is None:
            if stripped.startswith("```"):
                info = stripped[3:].strip().split()
                lang, body = (info[0].lower() if info else ""), []
        elif stripped.startswith("```") and not stripped.strip("`"):
            blocks.append(_Block(lang, "\n".join(body), True))
            lang = None
        else:
            body.append(line)
    if lang is not None:
        blocks.append(_Block(lang, "\n".join(body), False))
    return blocks


def _fail(reason: Reason, detail: str, **kw: Any) -> ParseResult:
    return ParseResult(False, reason, detail=detail, **kw)


def parse_response(text: str, use_xgrammar: bool | None = None) -> ParseResult:
    """Parse a build response. `use_xgrammar` as in `schema.schema_error` (default: when installed)."""
    if not isinstance(text, str):
        return _fail(Reason.MISSING_PYTHON_BLOCK, "response is not text")
    if len(text) > MAX_RESPONSE_CHARS:
        return _fail(Reason.TOO_LONG, f"response has {len(text)} characters; the limit is {MAX_RESPONSE_CHARS}")
    blocks = fenced_blocks(text)
    python = [b for b in blocks if _LANGS.get(b.lang) == "python"]
    js = [b for b in blocks if _LANGS.get(b.lang) == "json"]
    if not python:
        return _fail(Reason.MISSING_PYTHON_BLOCK, "no ```python block")
    if not js:
        return _fail(Reason.MISSING_JSON_BLOCK, "no ```json block")
    if len(python) > 1 or len(js) > 1:
        return _fail(Reason.MULTIPLE_BLOCKS, f"{len(python)} python and {len(js)} json blocks; give exactly one each")
    if not (python[0].closed and js[0].closed):
        return _fail(Reason.UNCLOSED_BLOCK, "a ``` block is never closed")
    code = python[0].body
    try:
        raw = json.loads(js[0].body)
    except (ValueError, RecursionError) as e:
        return _fail(Reason.INVALID_JSON, f"json block does not parse: {str(e)[:200]}", code=code)
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        raw = raw["function"]
    problem = schema_error(raw, use_xgrammar=use_xgrammar)
    if problem is not None:
        return _fail(Reason.INVALID_SCHEMA, problem, code=code)
    schema: dict[str, Any] = raw
    name = schema["name"]
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        return _fail(Reason.SYNTAX_ERROR, f"python block does not parse{where}: {e}", code=code, schema=schema)
    fn = find_function(tree, name)
    if fn is None:
        return _fail(Reason.NAME_NOT_IN_CODE, f"no top-level def {name}(...) in the code", code=code, schema=schema)
    mismatch = signature_mismatch(fn, schema["parameters"])
    if mismatch is not None:
        return _fail(Reason.PARAM_MISMATCH, mismatch, code=code, schema=schema, function_name=name)
    return ParseResult(True, Reason.OK, code=code, schema=schema, function_name=name)
