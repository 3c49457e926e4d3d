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
    "FAULT", "Limits", "RemoteSandbox", "RemoteSandboxError", "Result", "Sandbox", "SandboxUnavailable",
    "open_sandbox", "run_pure",
]


def open_sandbox(settings: object) -> tuple[Sandbox | RemoteSandbox, Limits]:
    """The sandbox and per-call limits a settings section names (attributes `url`, `isolation`, `workers`,
    `timeout_s`, `memory_mb`, as smith's `sandbox` config and a suite's `sandbox` section have them): the remote
    service at `url` when one is set, else a local sandbox. The one place smith builds its sandbox."""
    limits = Limits(timeout_s=float(settings.timeout_s), memory_mb=int(settings.memory_mb))
    url = getattr(settings, "url", None)
    if url:
        return RemoteSandbox(str(url)), limits
    return Sandbox(isolation=str(settings.isolation), workers=int(settings.workers)), limits
