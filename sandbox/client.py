"""RemoteSandbox: the Sandbox `run` API against a `python -m sandbox serve` host over HTTP."""

from __future__ import annotations

from typing import Any

import httpx

from sandbox.types import FAULT, Limits, Result, framed_calls

SLACK_S = 30.0


class RemoteSandboxError(RuntimeError):
    """The sandbox service refused the request or could not be reached."""


class ServiceFault(RemoteSandboxError):
    """The service failed during a request it had accepted (a 5xx, the connection lost, no answer in time):
    `run` reports its calls as the sandbox's `fault`, never the tool's."""


class RemoteSandbox:
    """Same `run` signature as Sandbox; thread-safe (one pooled httpx client)."""

    def __init__(self, url: str, connect_timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, timeout=httpx.Timeout(None, connect=connect_timeout_s))

    def _post(self, path: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        try:
            resp = self._client.post(path, json=body, timeout=httpx.Timeout(timeout_s, connect=10.0))
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise RemoteSandboxError(f"sandbox service at {self.url} unreachable: {exc}") from exc
        except httpx.HTTPError as exc:
            raise ServiceFault(f"sandbox service at {self.url} failed during the request: {exc!r}") from exc
        if resp.status_code >= 500:
            raise ServiceFault(f"sandbox service answered {resp.status_code}: {resp.text[:200]}")
        if resp.status_code != 200:
            try:
                reason = resp.json().get("error", resp.text)
            except ValueError:
                reason = resp.text
            raise RemoteSandboxError(f"sandbox service answered {resp.status_code}: {reason}")
        return resp.json()

    def run(self, code: str, func_name: str, calls: list[Any], limits: Limits | None = None) -> list[Result]:
        """One Result per argument object, in order, exactly as Sandbox.run: code or arguments that cannot
        travel as strict JSON are per-call errors here too (checked with the sandbox's own frame encoder), and
        a service that fails during the request makes its calls `fault`. A service that cannot be reached or
        refuses the request (4xx) raises RemoteSandboxError."""
        limits = limits or Limits()
        calls = list(calls)
        results, _ = framed_calls(code, func_name, calls)
        sendable = [args for args, r in zip(calls, results, strict=True) if r is None]
        if not sendable:
            return results
        body = {"code": code, "func_name": func_name, "calls": sendable, "limits": limits.to_dict()}
        try:
            data = self._post("/run", body, limits.timeout_s * (len(sendable) + 1) + SLACK_S)
        except ServiceFault as exc:
            data = {"results": [{"status": FAULT, "error": str(exc)} for _ in sendable]}
        ran = iter(Result.from_dict(r) for r in data["results"])
        return [r if r is not None else next(ran) for r in results]

    def run_code(self, code: str, stdin: str = "", run_timeout: float = 10.0) -> dict[str, Any]:
        """SandboxFusion's /run_code, for tooling written against it."""
        body = {"code": code, "language": "python", "run_timeout": run_timeout, "stdin": stdin}
        return self._post("/run_code", body, run_timeout + SLACK_S)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
