"""The sandbox over HTTP, so many sandbox hosts can serve one large training run (docs/architecture.md, "Sandbox").

POST /run       {"code", "func_name", "calls": [...], "limits": {...}?} -> {"results": [Result, ...]}
POST /run_code  SandboxFusion-compatible: {"code", "language": "python", "run_timeout"?, "memory_limit_MB"?,
                "stdin"?} -> {"status", "message", "compile_result", "run_result": {...}, ...}
GET  /health    -> {"ok": true, "isolation", "workers", "max_limits", "max_output_bytes", "max_body_bytes"}
Every malformed request gets a 4xx with a one-line reason; tools only ever run inside the Sandbox. What one
client can make the server hold or run is bounded by `Bounds` (docs/sandbox.md, "Over HTTP").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import h11
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from sandbox._forkserver import TooDeep, _check_depth, _finite
from sandbox.cancel import Cancel
from sandbox.core import Sandbox
from sandbox.types import FAULT, Limits, Result

MAX_CALLS = 10_000
DEFAULT_RUN_TIMEOUT_S = 10.0
LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on with a zero timeout: close() sends a reset
# a request wraps each call's arguments in two containers (the body object, the "calls" list); the arguments
# themselves may nest as deep as the frame codec carries them
REQUEST_WRAPPERS = 2
# default maximums, each at or above Limits' default (cpu_s None: per call, ceil(timeout_s) + 1)
MAX_LIMITS = Limits(
    timeout_s=60.0, memory_mb=2048, cpu_s=None, nproc=64, nofile=256, fsize_mb=64,
    output_bytes=1 << 20, max_return_bytes=4 << 20,
)  # fmt: skip


@dataclass(frozen=True)
class Bounds:
    """What one client may ask of a shared service; every field is a `python -m sandbox serve` flag."""

    # the largest limits a request may ask for; more is a 400 (never clamped: grading must not change silently)
    max_limits: Limits = MAX_LIMITS
    max_output_bytes: int = 16 << 20  # per request: values (as JSON), stdout, stderr and errors of all its calls
    max_body_bytes: int = 16 << 20
    body_timeout_s: float = 60.0  # to deliver a whole body once the server starts reading it
    idle_timeout_s: float = 10.0  # to send a request's headers, or to read any of a response

    def __post_init__(self) -> None:
        for name in ("max_output_bytes", "max_body_bytes", "body_timeout_s", "idle_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Bounds.{name} must be positive, got {getattr(self, name)!r}")

    def limit_caps(self) -> dict[str, float]:
        """Each limit's largest allowed value; cpu_s per call (its default is ceil(timeout_s) + 1)."""
        caps = self.max_limits.to_dict()
        caps["cpu_s"] = self.max_limits.cpu_seconds(0)
        return caps


class BadRequest(Exception):
    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _check_length(request: Request, max_bytes: int) -> None:
    """Refuse a declared oversized body before reading any of it."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
        raise BadRequest(f"body must be at most {max_bytes} bytes", 413)


async def _json_body(request: Request, bounds: Bounds) -> dict[str, Any]:
    """Read (at most max_body_bytes, within body_timeout_s) and parse the body with the frame codec's bounds."""
    body = bytearray()
    try:
        with anyio.fail_after(bounds.body_timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > bounds.max_body_bytes:
                    raise BadRequest(f"body must be at most {bounds.max_body_bytes} bytes", 413)
    except TimeoutError:
        raise BadRequest(f"the body did not arrive within {bounds.body_timeout_s} s", 408) from None
    except ClientDisconnect:
        raise BadRequest("the client disconnected while sending the body") from None
    try:
        _check_depth(body, REQUEST_WRAPPERS)  # before parsing: no depth can exhaust the parser's stack
        data = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
    except TooDeep as exc:
        raise BadRequest(f"body refused: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:  # ValueError covers 1e400 (Infinity) and 5,000-digit ints
        raise BadRequest(f"body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadRequest(f"body must be a JSON object, got {type(data).__name__}")
    return data


def _field(data: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    if name not in data or (data[name] is None and default is not ...):
        if default is ...:
            raise BadRequest(f"missing field {name!r}")
        return default
    value = data[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise BadRequest(f"field {name!r} has the wrong type ({type(value).__name__})")
    return value


def _limits(raw: Any, bounds: Bounds) -> Limits:
    """The request's Limits, or a 400 naming the first one over the server's maximum (checked before
    Limits sees the value, so 10**400, too large for a float, is refused like any other)."""
    caps = bounds.limit_caps()
    if isinstance(raw, dict):
        for name, value in raw.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if name in caps and number and value > caps[name]:
                raise BadRequest(f"bad limits: {name} is over this server's maximum of {caps[name]}")
    try:
        limits = Limits.from_dict(raw)
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad limits: {exc}") from exc
    if limits.cpu_seconds(0) > caps["cpu_s"]:  # cpu_s not given: ceil(timeout_s) + 1
        raise BadRequest(
            f"bad limits: cpu_s (when not given, ceil(timeout_s) + 1) is over this server's maximum of {caps['cpu_s']}"
        )
    return limits


def create_app(sandbox: Sandbox, bounds: Bounds | None = None, ready: str | None = None) -> Starlette:
    """A Starlette app over one shared Sandbox. A request is admitted (one of `sandbox.size`) before its body
    is read, so at most that many bodies and result sets are held at once; runs go to threads. `ready` is
    printed once the app starts (the line a user or a script waits for)."""
    bounds = bounds or Bounds()
    admission = anyio.CapacityLimiter(sandbox.size)
    threads = anyio.CapacityLimiter(sandbox.size)

    async def until_disconnected(request: Request, cancel: Cancel, fn: Callable[..., Any], *args: Any) -> Any:
        """Run fn in a thread; a client that disconnects meanwhile cancels the run (its processes are killed)."""

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            cancel.set("cancelled: the client disconnected")

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            try:
                return await anyio.to_thread.run_sync(fn, *args, limiter=threads)
            finally:
                tg.cancel_scope.cancel()

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({
            "ok": True, "isolation": sandbox.isolation, "workers": sandbox.size,
            "max_limits": bounds.max_limits.to_dict(), "max_output_bytes": bounds.max_output_bytes,
            "max_body_bytes": bounds.max_body_bytes,
        })  # fmt: skip

    async def run(request: Request) -> JSONResponse:
        _check_length(request, bounds.max_body_bytes)
        async with admission:
            data = await _json_body(request, bounds)
            code = _field(data, "code", str)
            func_name = _field(data, "func_name", str)
            calls = _field(data, "calls", list)
            if len(calls) > MAX_CALLS:
                raise BadRequest(f"at most {MAX_CALLS} calls per request, got {len(calls)}")
            limits = _limits(data.get("limits"), bounds)
            with Cancel(bounds.max_output_bytes) as cancel:
                results = await until_disconnected(request, cancel, sandbox.run, code, func_name, calls, limits, cancel)
            # vars(), not Result.to_dict(): asdict deep-copies every value, a second copy of up to the output cap
            return JSONResponse({"results": [vars(r) for r in results]})

    async def run_code(request: Request) -> JSONResponse:
        _check_length(request, bounds.max_body_bytes)
        async with admission:
            data = await _json_body(request, bounds)
            code = _field(data, "code", str)
            language = _field(data, "language", str, "python")
            if language not in ("python", "python3"):
                raise BadRequest(f"unsupported language {language!r}: this sandbox runs python only")
            timeout = _field(data, "run_timeout", (int, float), DEFAULT_RUN_TIMEOUT_S)
            memory = _field(data, "memory_limit_MB", int, -1)
            stdin = _field(data, "stdin", str, "")
            if _field(data, "files", dict, {}):
                raise BadRequest("field 'files' is not supported: pass inputs through stdin")
            limits = _limits({"timeout_s": timeout, **({"memory_mb": memory} if memory > 0 else {})}, bounds)
            with Cancel() as cancel:  # a program's output is one Result, capped by output_bytes
                result = await until_disconnected(request, cancel, sandbox.run_script, code, stdin, limits, cancel)
            return JSONResponse(fusion_response(result))

    async def on_bad_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, BadRequest)
        # the body may be partly unread: close the connection rather than read on
        headers = {"connection": "close"} if exc.status in (408, 413) else None
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=headers)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if ready:
            print(ready, flush=True)
        yield
        await anyio.to_thread.run_sync(sandbox.close)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/run", run, methods=["POST"]),
        Route("/run_code", run_code, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={BadRequest: on_bad_request}, lifespan=lifespan)


def fusion_response(result: Result) -> dict[str, Any]:
    """Map a program's Result to SandboxFusion's RunCodeResponse; the sandbox's own fault is its SandboxError."""
    if result.status == "ok" and isinstance(result.value, int) and not isinstance(result.value, bool):
        code = result.value
        run_status, overall, message = "Finished", ("Success" if code == 0 else "Failed"), ""
    elif result.status == "timeout":
        code, run_status, overall, message = None, "TimeLimitExceeded", "Failed", result.error or ""
    elif result.status == FAULT:
        code, run_status, overall, message = None, "Error", "SandboxError", result.error or ""
    else:
        code, run_status, overall, message = None, "Error", "Failed", result.error or ""
    run_result = {
        "status": run_status, "execution_time": result.seconds, "return_code": code,
        "stdout": result.stdout, "stderr": result.stderr,
    }  # fmt: skip
    return {
        "status": overall, "message": message, "compile_result": None, "run_result": run_result,
        "executor_pod_name": None, "files": {},
    }  # fmt: skip


class IdleTimeoutH11(H11Protocol):
    """uvicorn's h11 protocol that closes connections idle on the client's side (uvicorn has no read timeout).

    Every `idle_timeout_s` (uvicorn's timeout_keep_alive) from the connection's start or its last response,
    the connection is closed if the client still has not sent a whole request head (slowloris), is still
    sending a body the server already answered (e.g. a 404 to a large POST), or has read none of a pending
    response since the last check (a slow-read attack; then it is reset).
    """

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._unread = 0  # response bytes buffered at the last check
        self._idle = self.loop.call_later(self.timeout_keep_alive, self._expire)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._idle.cancel()
        if not self.transport.is_closing():
            self._unread = self.transport.get_write_buffer_size()
            self._idle = self.loop.call_later(self.timeout_keep_alive, self._expire)

    def connection_lost(self, exc: Exception | None) -> None:
        self._idle.cancel()
        super().connection_lost(exc)

    def _expire(self) -> None:
        unread = self.transport.get_write_buffer_size()  # uvicorn's own keep-alive close waits for it forever
        if unread and unread < self._unread:  # the client is reading its response, however slowly
            self._unread = unread
            self._idle = self.loop.call_later(self.timeout_keep_alive, self._expire)
        elif unread:  # reset, not close: a close would leave the kernel's copy queued to a peer that never reads
            self.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            self.transport.abort()
        elif self.transport.is_closing():
            return
        elif self.conn.their_state is h11.IDLE or (
            self.conn.their_state is h11.SEND_BODY and self.conn.our_state in (h11.DONE, h11.MUST_CLOSE)
        ):
            self.transport.close()


def serve(
    host: str, port: int, isolation: str = "strict", workers: int | None = None, bounds: Bounds | None = None
) -> None:
    """Run the HTTP service until interrupted; the Sandbox is closed on shutdown."""
    bounds = bounds or Bounds()
    sandbox = Sandbox(isolation=isolation, workers=workers)
    uvicorn.run(
        create_app(sandbox, bounds, f"sandbox: serving on http://{host}:{port} ({isolation}, {sandbox.size} workers)"),
        host=host, port=port, log_level="warning",
        http=IdleTimeoutH11, timeout_keep_alive=bounds.idle_timeout_s,
    )  # fmt: skip
