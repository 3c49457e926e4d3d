"""The sandbox over HTTP, so many sandbox hosts can serve one large training run (docs/architecture.md, "Sandbox").

POST /run       {"code", "func_name", "calls": [...], "limits": {...}?} -> {"results": [Result, ...]}
POST /run_code  SandboxFusion-compatible: {"code", "language": "python", "run_timeout"?, "memory_limit_MB"?,
                "stdin"?} -> {"status", "message", "compile_result", "run_result": {...}, ...}
GET  /health    -> {"ok": true, "isolation", "workers"}
Every malformed request gets a 4xx with a one-line reason; tools only ever run inside the Sandbox.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sandbox.core import Sandbox
from sandbox.types import Limits, Result

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_CALLS = 10_000
DEFAULT_RUN_TIMEOUT_S = 10.0


class BadRequest(Exception):
    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


async def _json_body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise BadRequest(f"body must be at most {MAX_BODY_BYTES} bytes", 413)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise BadRequest(f"body must be at most {MAX_BODY_BYTES} bytes", 413)
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
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


def _limits(data: dict[str, Any]) -> Limits:
    try:
        return Limits.from_dict(data.get("limits"))
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad limits: {exc}") from exc


def create_app(sandbox: Sandbox) -> Starlette:
    """A Starlette app over one shared Sandbox; blocking runs go to threads, at most one per worker."""
    gate = anyio.CapacityLimiter(sandbox.size)

    async def in_thread(fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=gate)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "isolation": sandbox.isolation, "workers": sandbox.size})

    async def run(request: Request) -> JSONResponse:
        data = await _json_body(request)
        code = _field(data, "code", str)
        func_name = _field(data, "func_name", str)
        calls = _field(data, "calls", list)
        if len(calls) > MAX_CALLS:
            raise BadRequest(f"at most {MAX_CALLS} calls per request, got {len(calls)}")
        limits = _limits(data)
        results = await in_thread(sandbox.run, code, func_name, calls, limits)
        return JSONResponse({"results": [r.to_dict() for r in results]})

    async def run_code(request: Request) -> JSONResponse:
        data = await _json_body(request)
        code = _field(data, "code", str)
        language = _field(data, "language", str, "python")
        if language not in ("python", "python3"):
            raise BadRequest(f"unsupported language {language!r}: this sandbox runs python only")
        timeout = _field(data, "run_timeout", (int, float), DEFAULT_RUN_TIMEOUT_S)
        memory = _field(data, "memory_limit_MB", int, -1)
        stdin = _field(data, "stdin", str, "")
        if _field(data, "files", dict, {}):
            raise BadRequest("field 'files' is not supported: pass inputs through stdin")
        try:
            limits = Limits(timeout_s=timeout, **({"memory_mb": memory} if memory > 0 else {}))
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        result = await in_thread(sandbox.run_script, code, stdin, limits)
        return JSONResponse(fusion_response(result))

    async def on_bad_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, BadRequest)
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(sandbox.close)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/run", run, methods=["POST"]),
        Route("/run_code", run_code, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={BadRequest: on_bad_request}, lifespan=lifespan)


def fusion_response(result: Result) -> dict[str, Any]:
    """Map a program's Result to SandboxFusion's RunCodeResponse."""
    if result.status == "ok" and isinstance(result.value, int) and not isinstance(result.value, bool):
        code = result.value
        run_status, overall, message = "Finished", ("Success" if code == 0 else "Failed"), ""
    elif result.status == "timeout":
        code, run_status, overall, message = None, "TimeLimitExceeded", "Failed", result.error or ""
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


def serve(host: str, port: int, isolation: str = "strict", workers: int | None = None) -> None:
    """Run the HTTP service until interrupted; the Sandbox is closed on shutdown."""
    import uvicorn

    sandbox = Sandbox(isolation=isolation, workers=workers)
    uvicorn.run(create_app(sandbox), host=host, port=port, log_level="warning")
