"""What a retriever reads about a tool: its name, description and parameter schema as one text.

BoR paper section 3 scores tools by their descriptions; pooled SMITH tools often share a callable
name (`solve`), so the description and the parameters carry the meaning (docs/architecture.md, "One training step").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolDoc:
    """One tool as a retriever sees it. `schema` is the JSON-schema `parameters` object (may be empty)."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def from_openai(cls, schema: dict[str, Any]) -> ToolDoc:
        """From an OpenAI function-tool schema, `{"type": "function", "function": {...}}` or the bare inner dict."""
        fn = schema.get("function", schema)
        if "name" not in fn:
            raise ValueError(f"tool schema has no 'name': {json.dumps(schema)[:120]}; pass an OpenAI function schema")
        return cls(name=fn["name"], description=fn.get("description", ""), parameters=fn.get("parameters") or {})

    def text(self) -> str:
        """Name (split into words), description, then each parameter's name, type and description."""
        parts = [re.sub(r"[_\W]+", " ", self.name).strip(), self.description]
        for pname, prop in (self.parameters.get("properties") or {}).items():
            if isinstance(prop, dict):
                parts.append(f"{pname.replace('_', ' ')} ({prop.get('type', 'any')}): {prop.get('description', '')}")
        return "\n".join(p for p in parts if p)


def as_text(document: ToolDoc | dict[str, Any] | str) -> str:
    """Any accepted document form (ToolDoc, OpenAI schema, or plain text) as the text a scorer reads."""
    if isinstance(document, str):
        return document
    if isinstance(document, dict):
        document = ToolDoc.from_openai(document)
    return document.text()
