"""What a caller asks for (Limits) and gets back (Result); plain data shared by the API, HTTP server and client."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from sandbox._forkserver import FrameError, dumps, pack

# "fault": the sandbox itself failed during the call (its fork server or jail died, no worker was left), not the
# tool; the sandbox never runs such a call again (at most once), a caller whose calls are pure may (`run_pure`)
STATUSES = ("ok", "error", "timeout", "limit", "fault")
FAULT = "fault"


@dataclass(frozen=True)
class Limits:
    """Per-call resource limits (docs/architecture.md, "Sandbox"); every one is enforced by the kernel or the host."""

    timeout_s: float = 2.0  # wall clock per call, and for loading the tool
    memory_mb: int = 512  # RLIMIT_AS of each tool process
    cpu_s: int | None = None  # RLIMIT_CPU per call; None = ceil(timeout_s) + 1
    nproc: int = 32  # RLIMIT_NPROC: processes and threads of the tool's uid
    nofile: int = 64  # RLIMIT_NOFILE
    fsize_mb: int = 16  # RLIMIT_FSIZE: largest file the tool may write
    output_bytes: int = 65536  # cap on captured stdout and on stderr, each, per call
    max_return_bytes: int = 1_000_000  # cap on a return value's JSON size

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name == "cpu_s":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value != value:
                raise ValueError(f"Limits.{field.name} must be a positive number, got {value!r}")
            if field.name != "timeout_s" and not float(value).is_integer():
                raise ValueError(f"Limits.{field.name} must be a whole number, got {value!r}")
        if self.timeout_s > 3600:
            raise ValueError(f"Limits.timeout_s must be at most 3600 s, got {self.timeout_s}")

    def cpu_seconds(self, calls: int) -> int:
        """RLIMIT_CPU for a tool process that will serve `calls` calls after loading."""
        per_call = self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s) + 1
        return int(per_call) * (calls + 1)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Limits:
        """Build from JSON; unknown keys are an error so a typo never silently loosens a limit."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ValueError(f"limits must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown limits {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Result:
    """The outcome of one call: status is "ok" | "error" | "timeout" | "limit" | "fault" (the sandbox's own)."""

    status: str
    value: Any = None
    error: str | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


def framed_calls(code: str, func_name: str, calls: list[Any]) -> tuple[list[Result | None], list[bytes]]:
    """Each call checked by the encoder that frames it: per call an error Result (it cannot travel as strict
    JSON) or None, and the frames of those that can. Code that cannot travel makes every call an error."""
    try:
        dumps([code, func_name])
    except FrameError as exc:
        return [Result("error", None, f"the tool's code cannot travel as JSON: {exc}") for _ in calls], []
    results: list[Result | None] = []
    frames = []
    for args in calls:
        try:
            frames.append(pack({"args": args}))
            results.append(None)
        except FrameError as exc:
            results.append(Result("error", None, f"call arguments cannot travel as JSON: {exc}"))
    return results, frames


def run_pure(sandbox: Any, code: str, func_name: str, calls: list[Any], limits: Limits | None = None) -> list[Result]:
    """`Sandbox.run` (or `RemoteSandbox.run`) for calls that are pure functions of their arguments, such as
    grading: the calls that end in `fault` are run once more, together; a second fault stays a fault. The
    sandbox itself never reruns a call (at most once), since it cannot know a call has no side effects."""
    results = sandbox.run(code, func_name, calls, limits=limits)
    again = [i for i, r in enumerate(results) if r.status == FAULT]
    if again:
        for i, r in zip(again, sandbox.run(code, func_name, [calls[i] for i in again], limits=limits), strict=True):
            results[i] = r
    return results
