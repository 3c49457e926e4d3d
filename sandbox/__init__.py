"""Fail-closed executor for untrusted, model-written tool code. Imports nothing from smith.

    from sandbox import Sandbox, Limits
    with Sandbox(isolation="strict") as sb:
        results = sb.run(code, "solve", [{"question": "..."}], limits=Limits(timeout_s=2.0, memory_mb=512))

Each Result has status ("ok" | "error" | "timeout" | "limit" | "fault"), value, error, stdout, stderr, seconds;
"fault" is the sandbox's own failure, never the tool's, and `run_pure` reruns such calls once.
`RemoteSandbox(url)` offers the same `run` over HTTP (`python -m sandbox serve`). See docs/sandbox.md.
"""

from sandbox.client import RemoteSandbox, RemoteSandboxError
from sandbox.core import Sandbox
from sandbox.jail import SandboxUnavailable
from sandbox.types import FAULT, Limits, Result, run_pure

__all__ = [
    "FAULT", "Limits", "RemoteSandbox", "RemoteSandboxError", "Result", "Sandbox", "SandboxUnavailable", "run_pure",
]
