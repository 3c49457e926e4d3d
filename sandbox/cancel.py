"""Cancel: ends one run early from outside it (the HTTP service's disconnected clients and output cap).

A pipe makes the request visible to the worker's poll loop, so the call in flight ends at once instead of
at its timeout; the worker then kills the run's processes and answers every call not yet answered with a
"limit" Result that carries the reason.
"""

from __future__ import annotations

import json
import os
import threading

from sandbox.types import Result


class Cancel:
    """Pass to `Sandbox.run` / `run_script`; `set(reason)` may be called from any thread.

    With `output_budget`, the run also stops itself once its results (values as JSON, stdout, stderr, errors)
    add up to more than that many bytes, so a caller never holds more than the budget plus one call's caps.
    """

    def __init__(self, output_budget: int | None = None) -> None:
        self.output_budget = output_budget
        self.output_bytes = 0
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._r, self._w = os.pipe()

    def fileno(self) -> int:
        """Readable once the run must stop (the worker polls it next to the tool's pipes)."""
        return self._r

    def set(self, reason: str) -> None:
        """Stop the run; the first reason wins."""
        with self._lock:
            if self.reason is None and self._w >= 0:
                self.reason = reason
                os.write(self._w, b"x")

    def charge(self, result: Result) -> None:
        """Count one answered call against the output budget (the worker calls this after each call)."""
        self.output_bytes += len(json.dumps(result.value, ensure_ascii=False))
        self.output_bytes += len(result.stdout) + len(result.stderr) + len(result.error or "")
        if self.output_budget is not None and self.output_bytes > self.output_budget:
            self.set(f"not run: the results so far passed this run's {self.output_budget}-byte output cap")

    def close(self) -> None:
        with self._lock:
            if self._w >= 0:
                os.close(self._r)
                os.close(self._w)
                self._r = self._w = -1

    def __enter__(self) -> Cancel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
