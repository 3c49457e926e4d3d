"""Fail-closed executor for untrusted, model-written tool code. Imports nothing from smith.

    from sandbox import Sandbox, Limits
    with Sandbox(isolation="strict") as sb:
        results = sb.run(code, "solve", [{"question": "..."}], limits=Limits(timeout_s=2.0, memory_mb=512))

Each Result has status ("ok" | "error" | "timeout" | "limit"), value, error, stdout, stderr, seconds.
`RemoteSandbox(url)` offers the same `run` over HTTP (`python -m sandbox serve`). See docs/sandbox.md.
"""

from sandbox.client import RemoteSandbox, RemoteSandboxError
from sandbox.core import Sandbox
from sandbox.jail import SandboxUnavailable
from sandbox.types import Limits, Result

__all__ = ["Limits", "RemoteSandbox", "RemoteSandboxError", "Result", "Sandbox", "SandboxUnavailable"]
