"""smith.toolspec: a build response -> ToolSpec(code, schema), with typed failure reasons, JSON-Schema
validity (and xgrammar compilability where installed), and ast-based schema/code agreement."""

from smith.toolspec.parse import ParseResult, Reason, fenced_blocks, parse_response
from smith.toolspec.schema import schema_error, xgrammar_available
from smith.toolspec.spec import ToolSpec

__all__ = [
    "ParseResult",
    "Reason",
    "ToolSpec",
    "fenced_blocks",
    "parse_response",
    "schema_error",
    "xgrammar_available",
]
