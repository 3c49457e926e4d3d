"""The tool a build episode produces: Python source plus the OpenAI function schema that describes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolSpec:
    """`schema` is the function object `{"name", "description", "parameters"}`; `openai_tool()` wraps it
    as the `{"type": "function", "function": ...}` entry a chat template or the OpenAI API takes."""

    code: str
    schema: dict[str, Any]
    function_name: str

    @property
    def description(self) -> str:
        return str(self.schema.get("description", ""))

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.schema.get("parameters", {}))

    def openai_tool(self, name: str | None = None) -> dict[str, Any]:
        """The OpenAI tool entry; `name` renames the callable (use episodes give each tool a distinct
        name, docs/architecture.md, "One training step") without touching the code's own function name. A
        schema without `parameters` (a hand-written pool file may hold one) is offered as taking none."""
        function = dict(self.schema)
        if name is not None:
            function["name"] = name
        function.setdefault("parameters", {"type": "object", "properties": {}})
        return {"type": "function", "function": function}
