"""A small OpenAI-compatible HTTP server over any ChatBackend (`/v1/models`, `/v1/chat/completions`).

Why: suites that need an endpoint (BFCL, external judges, the openai backend's own tests) get one from
smith itself, serving a local model, a LoRA checkpoint or the tiny model. Tool calls in the model's text
(in its family's syntax, read by its chat format: Qwen's `<tool_call>` blocks, Granite's `<|tool_call|>`, ...)
are returned as structured `tool_calls`, as vLLM's tool parsers do; a reply with a malformed call is returned
as plain text. Requests are served one at a time (a local
model is one device); no streaming, n = 1.

    python -m smith.models.serve --model SPEC --port N [--host 127.0.0.1] [--name NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from smith.models.base import ChatBackend, Generation, SamplingParams
from smith.models.chat_format import ENDPOINT, ReplyFormat, format_of, without_reasoning


def completion_body(gen: Generation, model: str, tokenizer: Any = None, logprobs: bool = False,
                    fmt: ReplyFormat = ENDPOINT) -> dict[str, Any]:
    """The OpenAI `chat.completion` object for one Generation, read in `fmt` (the backend's): its tool calls
    structured, its reasoning in `reasoning_content` (as vLLM's reasoning parsers return it), never in `content`."""
    parsed = fmt.parse(gen.text)
    message: dict[str, Any] = {"role": "assistant", "content": gen.text}  # the text as generated, without reasoning
    if parsed.reasoning:
        message["content"] = without_reasoning(gen.text).lstrip()
        message["reasoning_content"] = parsed.reasoning
    finish = gen.finish_reason
    if parsed.calls and not parsed.errors:
        message["content"] = parsed.content or None
        message["tool_calls"] = [
            {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in parsed.calls
        ]
        finish = "tool_calls" if finish == "stop" else finish
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    if logprobs:
        ids = gen.completion_ids or [None] * len(gen.logprobs)
        choice["logprobs"] = {"content": [
            {"token": tokenizer.decode([i]) if tokenizer is not None and i is not None else "", "logprob": lp,
             "top_logprobs": []}
            for i, lp in zip(ids, gen.logprobs, strict=False)
        ]}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
                  "total_tokens": gen.prompt_tokens + gen.completion_tokens},
    }


def _error(status: int, message: str, kind: str = "invalid_request_error"):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """OpenAI content parts ([{"type": "text", "text": ...}]) -> one string, as chat templates expect."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return {**message, "content": text}
    return message


class ChatRequest(BaseModel):
    """The fields of OpenAI's chat.completions request this server reads (others are accepted and ignored);
    OpenAI's defaults: temperature 1, top_p 1."""

    model_config = ConfigDict(extra="allow")
    messages: list[dict[str, Any]] = Field(min_length=1)
    model: str | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    n: int = 1
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    seed: int | None = None
    logprobs: bool = False

    def params(self, max_tokens: int) -> SamplingParams:
        limit = self.max_completion_tokens or self.max_tokens or max_tokens
        return SamplingParams(max_new_tokens=limit, temperature=self.temperature, top_p=self.top_p, seed=self.seed)


def _invalid(e: ValidationError) -> str:
    """pydantic's first complaint as one line: `'messages': List should have at least 1 item ...`."""
    err = e.errors()[0]
    where = ".".join(map(str, err["loc"])) or "body"
    return f"'{where}': {err['msg']}"


def build_app(backend: ChatBackend, name: str | None = None, max_tokens: int = 1024):  # noqa: ANN201
    """The Starlette app serving `backend` under the model id `name` (default: backend.name)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    model_id = name or backend.name
    lock = threading.Lock()  # one generation at a time: a local model is one device, HFBackend is not reentrant

    def generate(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, params: SamplingParams):
        with lock:
            return backend.chat([[_plain(m) for m in messages]], [tools], params)[0]

    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": model_id, "object": "model", "created": 0, "owned_by": "smith"}]})

    async def chat_completions(request: Request) -> JSONResponse:
        try:
            body = ChatRequest.model_validate_json(await request.body())
        except ValidationError as e:
            return _error(400, _invalid(e))
        if body.model not in (None, model_id):
            return _error(404, f"model {body.model!r} is not served here; this server serves {model_id!r}",
                          "model_not_found")
        if body.stream:
            return _error(400, "streaming is not supported by smith.models.serve; send stream=false")
        if body.n != 1:
            return _error(400, "only n=1 is supported; send one request per sample")
        try:
            gen = await run_in_threadpool(generate, body.messages, body.tools or None, body.params(max_tokens))
        except Exception as e:  # the backend's failure is the client's 500, never a dead server
            return _error(500, f"{type(e).__name__}: {e}", "server_error")
        return JSONResponse(completion_body(gen, model_id, getattr(backend, "tokenizer", None), body.logprobs,
                                            format_of(backend)))

    return Starlette(routes=[
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ])


def _bind(host: str, port: int) -> socket.socket:
    """Bind before serving so port 0 yields a known free port with no race."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


@contextlib.contextmanager
def running_app(app: Any, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run an ASGI app with uvicorn in a thread; yields its root URL; stops and joins it on exit."""
    import uvicorn

    sock = _bind(host, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="smith-serve", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {host}:{sock.getsockname()[1]} did not start")
            time.sleep(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextlib.contextmanager
def running(backend: ChatBackend, host: str = "127.0.0.1", port: int = 0, name: str | None = None) -> Iterator[str]:
    """Serve `backend` on a free port (by default); yields the base URL ending in /v1."""
    with running_app(build_app(backend, name), host, port) as root:
        yield root + "/v1"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m smith.models.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a model SPEC (tiny | DIR | vllm:<path> | openai:...)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on the first line)")
    p.add_argument("--name", default=None, help="the model id clients send (default: the SPEC)")
    p.add_argument("--max-tokens", type=int, default=1024, help="default completion cap when a request sends none")
    p.add_argument("--tiny-dir", default=None, help="where `tiny` is built (default checkpoints/.tiny-model)")
    a = p.parse_args(argv)
    import uvicorn

    from smith.models import load_backend

    backend = load_backend(a.model, {"tiny_dir": a.tiny_dir} if a.tiny_dir else None)
    sock = _bind(a.host, a.port)
    name = a.name or backend.name
    print(f"serving {a.model} as {name!r} at http://{a.host}:{sock.getsockname()[1]}/v1", flush=True)
    app = build_app(backend, name, a.max_tokens)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off")).run(sockets=[sock])


if __name__ == "__main__":
    main()
