"""smith.toolspec: a build response -> ToolSpec(code, schema), with typed failure reasons, JSON-Schema
validity (and xgrammar compilability where installed), and ast-based schema/code agreement; a bare Python
file -> ToolSpec with a schema read off its signature (`spec_from_source`)."""

from smith.toolspec.parse import ParseResult, Reason, fenced_blocks, parse_response
from smith.toolspec.schema import schema_error, xgrammar_available
from smith.toolspec.source import spec_from_source
from smith.toolspec.spec import ToolSpec

__all__ = [
    "ParseResult",
    "Reason",
    "ToolSpec",
    "fenced_blocks",
    "parse_response",
    "schema_error",
    "spec_from_source",
    "xgrammar_available",
]
