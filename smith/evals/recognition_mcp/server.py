"""The Recognition-MCP decoy server: T candidate tools plus submit_answer, over stdio (paper A.2).

Every candidate takes no arguments, returns the same opaque "no result" and carries the same
description, so candidates differ only by their relabeled name. That behavioural identity is what lets
one all-decoy rollout be scored T times afterwards, each candidate in turn the oracle (section 4.5).
With no candidate names the server offers submit_answer alone (the tools-off pilot).

    python -m smith.evals.recognition_mcp.server tool_a tool_x tool_k
"""

from __future__ import annotations

import argparse
import re

from mcp.server.mcpserver import MCPServer

DECOY_RESULT = "no result"
DECOY_DESCRIPTION = "An available operation. Calling it may or may not help."
SUBMIT_TOOL = "submit_answer"
# The released server's wording; the model reads it in the tool list on every call. The one-submission
# rule is stated by the task prompt, not here.
SUBMIT_DESCRIPTION = "Submit your final answer to end the task."
SUBMITTED = "SUBMITTED"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what the OpenAI and Anthropic tool schemas accept


def decoy() -> str:
    """Every candidate's body: behaviourally identical by construction."""
    return DECOY_RESULT


def submit_answer(answer: str) -> str:
    """The host reads the answer from the call itself; the server only acknowledges it."""
    return SUBMITTED


def build_server(names: list[str]) -> MCPServer:
    """An MCP server listing the candidates in the given order, then submit_answer."""
    bad = [n for n in names if not _NAME.fullmatch(n) or n == SUBMIT_TOOL]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"candidate names must be distinct tool names other than {SUBMIT_TOOL}, got {names}")
    server = MCPServer("recognition-mcp", log_level="ERROR")
    for name in names:
        server.add_tool(decoy, name=name, description=DECOY_DESCRIPTION)
    server.add_tool(submit_answer, name=SUBMIT_TOOL, description=SUBMIT_DESCRIPTION)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve T decoy tools and submit_answer over stdio.")
    parser.add_argument("names", nargs="*", help="candidate tool names, e.g. tool_a tool_x (none: submit only)")
    build_server(parser.parse_args(argv).names).run("stdio")


if __name__ == "__main__":
    main()
