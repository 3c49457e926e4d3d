"""OpenAIBackend over real HTTP on 127.0.0.1: smith's own server (tiny model, scripted text) and a
scripted OpenAI-style server (scripted replies at the HTTP layer) for retries, timeouts and tool calls."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from smith.errors import ConfigError
from smith.models.base import ChatBackend, SamplingParams
from smith.models.chat_format import parse_tool_calls
from smith.models.hf import HFBackend
from smith.models.openai import OpenAIBackend, OpenAIBackendError, check_endpoint, to_openai_messages
from smith.models.scripted import ScriptedBackend
from smith.models.serve import running, running_app

from .conftest import models_endpoint

TOOLS = [{"type": "function", "function": {
    "name": "count_bits", "description": "Counts the 1 bits of a number.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}}]
CALL = '<tool_call>\n{"name": "count_bits", "arguments": {"question": "12"}}\n</tool_call>'
MULTI_TURN = [
    {"role": "user", "content": "How many 1 bits are in 12?"},
    {"role": "assistant", "content": CALL},
    {"role": "tool", "content": "2"},
]


# -- smith.models.serve over the tiny model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFBackend:
    return HFBackend.from_pretrained(tiny_model_dir, name="tiny")


def test_openai_backend_against_served_tiny_model(tiny):
    convs = [[{"role": "user", "content": "What is 3 + 4?"}], [{"role": "user", "content": "hi"}], MULTI_TURN]
    tools = [TOOLS, None, TOOLS]
    params = SamplingParams(max_new_tokens=12, temperature=0.0)
    direct = tiny.chat(convs, tools, params)
    with running(tiny, name="tiny") as url, OpenAIBackend(url, "tiny", logprobs=True, concurrency=3) as client:
        assert isinstance(client, ChatBackend)
        listed = httpx.get(url + "/models").json()
        assert [m["id"] for m in listed["data"]] == ["tiny"]
        remote = client.chat(convs, tools, params)
        for d, r in zip(direct, remote, strict=True):
            assert r.text == d.text
            assert r.prompt_tokens == len(d.prompt_ids) and r.completion_tokens == len(d.completion_ids)
            assert r.logprobs == pytest.approx(d.logprobs, abs=1e-6)
            assert r.finish_reason == d.finish_reason
        assert client.meter.prompt_tokens == sum(len(d.prompt_ids) for d in direct)
        assert client.meter.completion_tokens == sum(len(d.completion_ids) for d in direct)
        assert client.meter.requests == 3 and client.meter.retries == 0
        with OpenAIBackend(url, "not-served", max_retries=3) as wrong, pytest.raises(OpenAIBackendError, match="404"):
            wrong.chat(convs[:1])
        assert wrong.meter.retries == 0  # a 4xx is not retried
        bad = httpx.post(url + "/chat/completions", json={"messages": [], "model": "tiny"})
        assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
        for body, field in (({"messages": convs[0], "temperature": -1}, "temperature"),
                            ({"messages": convs[0], "max_tokens": "lots"}, "max_tokens"),
                            ({"messages": "hi"}, "messages")):
            bad = httpx.post(url + "/chat/completions", json=body)
            assert bad.status_code == 400 and f"'{field}'" in bad.json()["error"]["message"], bad.text
        bad = httpx.post(url + "/chat/completions", content=b"{not json")
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_tool_calls_round_trip_through_the_server(tokenizer):
    """Scripted model text -> server's structured tool_calls -> client's <tool_call> text, unchanged."""
    replies = iter([
        "Let me count.\n" + CALL,
        "<tool_call>\n{not json}\n</tool_call>",
        "The answer is 2.",
    ])
    scripted = ScriptedBackend(tokenizer, lambda _prompt: next(replies))
    with running(scripted, name="scripted") as url, OpenAIBackend(url, "scripted", concurrency=1) as client:
        first = client.chat([MULTI_TURN[:1]], [TOOLS])[0]
        assert first.tool_calls[0]["function"]["name"] == "count_bits"
        assert json.loads(first.tool_calls[0]["function"]["arguments"]) == {"question": "12"}
        assert first.text.startswith("Let me count.")
        parsed = parse_tool_calls(first.text)
        assert [(c.name, c.arguments) for c in parsed.calls] == [("count_bits", {"question": "12"})]
        # malformed block: plain text, no structured calls; parse reports the error to the caller
        second = client.chat([MULTI_TURN[:1]], [TOOLS])[0]
        assert second.tool_calls == [] and "{not json}" in second.text
        assert parse_tool_calls(second.text).errors
        # a transcript with <tool_call> text travels as structured calls and renders exactly as locally
        third = client.chat([MULTI_TURN], [TOOLS])[0]
        assert third.text == "The answer is 2." and third.finish_reason == "stop"
    local = tokenizer.decode(scripted.render(MULTI_TURN, TOOLS))
    assert scripted.calls[-1] == local
    assert "<tool_response>\n2\n</tool_response>" in local


# -- a scripted OpenAI-style server (real HTTP, scripted replies) ------------------------------------------


def reply(content: str | None = "ok", tool_calls=None, prompt=7, completion=3, finish="stop") -> dict:
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


class ScriptedServer:
    """Answers each POST with the next scripted (status, body, delay, headers); records what it received."""

    def __init__(self, script: list[tuple]) -> None:
        self.script = list(script)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.times: list[float] = []
        self.in_flight = self.max_in_flight = 0

    async def handle(self, request: Request) -> JSONResponse:
        self.requests.append(await request.json())
        self.headers.append(dict(request.headers))
        self.times.append(time.monotonic())
        status, body, delay, headers = (self.script.pop(0) if self.script else (200, reply(), 0, {}))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(delay)
        finally:
            self.in_flight -= 1
        return JSONResponse(body, status_code=status, headers=headers)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.handle, methods=["POST"])])


def step(status=200, body=None, delay=0.0, headers=None) -> tuple:
    return (status, body if body is not None else reply(), delay, headers or {})


def serve(script):
    server = ScriptedServer(script)
    return server, running_app(server.app())


def test_retries_on_500_and_429_then_succeeds():
    """The SDK retries (its retry counter on each request), waits what `Retry-After` says, and the meter counts it."""
    server, ctx = serve([step(500, {"error": "boom"}), step(429, {"error": "slow down"}, headers={"Retry-After": "1"}),
                        step(409, {"error": "busy"}), step(body=reply("fine", prompt=11, completion=5))])
    with ctx as root, OpenAIBackend(root + "/v1", "m") as client:
        g = client.chat([[{"role": "user", "content": "hi"}]])[0]
    assert g.text == "fine" and (g.prompt_tokens, g.completion_tokens) == (11, 5)
    assert len(server.requests) == 4 and client.meter.retries == 3 and client.meter.requests == 1
    assert [h["x-stainless-retry-count"] for h in server.headers] == ["0", "1", "2", "3"]
    assert server.times[1] - server.times[0] < 0.9  # exponential backoff starts at 0.5 s (less jitter)
    assert server.times[2] - server.times[1] >= 0.95  # Retry-After: 1


def test_gives_up_after_max_retries_and_does_not_retry_4xx():
    server, ctx = serve([step(503, {"error": "down"})] * 3 + [step(400, {"error": "bad tools"})])
    with ctx as root, OpenAIBackend(root + "/v1", "m", max_retries=2) as client:
        with pytest.raises(OpenAIBackendError, match=r"after 3 attempts; last error: HTTP 503"):
            client.chat([[{"role": "user", "content": "hi"}]])
        assert len(server.requests) == 3
        with pytest.raises(OpenAIBackendError, match=r"HTTP 400: .*bad tools"):
            client.chat([[{"role": "user", "content": "hi"}]])
        assert len(server.requests) == 4


def test_timeouts_are_retried():
    server, ctx = serve([step(delay=1.0), step(body=reply("second try"))] + [step(delay=1.0)] * 2)
    with ctx as root, OpenAIBackend(root + "/v1", "m", timeout_s=0.3, max_retries=1) as client:
        assert client.chat([[{"role": "user", "content": "hi"}]])[0].text == "second try"
        assert len(server.requests) == 2
        with pytest.raises(OpenAIBackendError, match=r"after 2 attempts; last error: timed out after 0.3s"):
            client.chat([[{"role": "user", "content": "hi"}]])


def test_connection_refused_is_a_clear_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=1) as client, \
            pytest.raises(OpenAIBackendError, match="ConnectError"):
        client.chat([[{"role": "user", "content": "hi"}]])


def test_tool_calls_become_tool_call_text():
    calls = [
        {"id": "a", "type": "function", "function": {"name": "count_bits", "arguments": '{"question": "12"}'}},
        {"id": "b", "type": "function", "function": {"name": "gcd", "arguments": "{broken"}},
    ]
    server, ctx = serve([step(body=reply(None, calls, finish="tool_calls")), step(body=reply("cut", finish="length"))])
    with ctx as root, OpenAIBackend(root + "/v1", "m", concurrency=1) as client:
        g, cut = client.chat([MULTI_TURN[:1], MULTI_TURN[:1]], [TOOLS, None], SamplingParams(64, 0.7, 0.9, seed=5))
    parsed = parse_tool_calls(g.text)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("count_bits", {"question": "12"})]
    assert parsed.errors == ["tool call arguments are not a JSON object"]
    assert g.tool_calls == calls and g.finish_reason == "stop"
    assert cut.finish_reason == "length"
    first, second = server.requests
    assert first["tools"] == TOOLS and "tools" not in second
    assert (first["max_tokens"], first["temperature"], first["top_p"]) == (64, 0.7, 0.9)
    assert (first["seed"], second["seed"]) == (5, 6)  # one seed per conversation: a group still varies


def test_outgoing_transcript_uses_structured_tool_calls():
    server, ctx = serve([step()])
    with ctx as root, OpenAIBackend(root + "/v1", "m") as client:
        client.chat([MULTI_TURN])
    sent = server.requests[0]["messages"]
    assert sent[1]["content"] is None
    assert sent[1]["tool_calls"] == [{"id": "call_0", "type": "function",
                                      "function": {"name": "count_bits", "arguments": '{"question": "12"}'}}]
    assert sent[2] == {"role": "tool", "content": "2", "tool_call_id": "call_0"}
    # malformed calls stay text; HF-style structured calls get string arguments and ids
    assert to_openai_messages([{"role": "assistant", "content": "<tool_call>\n{x\n</tool_call>"}]) == [
        {"role": "assistant", "content": "<tool_call>\n{x\n</tool_call>"}]
    hf_style = [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                {"role": "tool", "content": "3"}]
    out = to_openai_messages(hf_style)
    assert out[0]["tool_calls"][0] == {"id": "call_0", "type": "function",
                                       "function": {"name": "f", "arguments": '{"a": 1}'}}
    assert out[1]["tool_call_id"] == "call_0"


def test_batch_is_concurrent_and_metered():
    script = [step(body=reply(f"r{i}", prompt=10 + i, completion=i), delay=0.3) for i in range(4)]
    server, ctx = serve(script)
    with ctx as root, OpenAIBackend(root + "/v1", "m", concurrency=4) as client:
        gens = client.chat([[{"role": "user", "content": f"q{i}"}] for i in range(4)])
    assert server.max_in_flight == 4
    assert sorted(g.text for g in gens) == ["r0", "r1", "r2", "r3"]
    assert client.meter.prompt_tokens == 10 + 11 + 12 + 13 and client.meter.completion_tokens == 6
    assert client.meter.total_tokens == 52 and client.meter.requests == 4


def test_api_key_explicit_then_env_fallback(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server, ctx = serve([])
    with ctx as root:
        for key, env in [("explicit", "from-env"), (None, "from-env"), (None, None)]:
            if env:
                monkeypatch.setenv("OPENAI_API_KEY", env)
            else:
                monkeypatch.delenv("OPENAI_API_KEY")
            with OpenAIBackend(root + "/v1", "m", api_key=key) as client:
                client.chat([[{"role": "user", "content": "hi"}]])
    auth = [h.get("authorization") for h in server.headers]
    assert auth == ["Bearer explicit", "Bearer from-env", None]
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")  # the SDK's own variables apply as it documents them
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # ... but the URL is always the SPEC's
    server, ctx = serve([])
    with ctx as root, OpenAIBackend(root + "/v1", "m") as client:
        client.chat([[{"role": "user", "content": "hi"}]])
    assert server.headers[0]["openai-organization"] == "org-1" and "authorization" not in server.headers[0]


def test_tools_length_must_match():
    with OpenAIBackend("http://127.0.0.1:9/v1", "m") as client, pytest.raises(ValueError, match="one per"):
        client.chat([MULTI_TURN, MULTI_TURN], [TOOLS])


def test_serve_cli_in_a_subprocess(tiny_model_dir):
    """`python -m smith.models.serve --port 0` prints its URL, answers, and exits cleanly on SIGTERM."""
    cmd = [sys.executable, "-m", "smith.models.serve", "--model", "tiny", "--tiny-dir", str(tiny_model_dir),
           "--port", "0", "--name", "tiny"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving tiny as 'tiny' at http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.rsplit(" at ", 1)[1].strip()
        # the socket is bound before uvicorn listens: early connection refusals are retried (the SDK backs off
        # 0.5 s, 1 s, 2 s, ... up to 8 s)
        with OpenAIBackend(url, "tiny", max_retries=10) as client:
            g = client.chat([[{"role": "user", "content": "hi"}]], None, SamplingParams(5, 0.0))[0]
        assert 1 <= g.completion_tokens <= 5 and g.prompt_tokens > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert proc.returncode in (0, -signal.SIGTERM)
    assert "Traceback" not in proc.stderr.read()


def test_check_endpoint_accepts_a_served_model_and_refuses_in_one_line():
    """`check_endpoint` (the start-up check of every openai: SPEC) asks GET /models through the SDK."""
    with models_endpoint("tiny") as url:
        check_endpoint(url, "tiny", "model")
        with pytest.raises(ConfigError, match=r"^model endpoint .* serves \['tiny'\], not model=openai:x#other$"):
            check_endpoint(url, "other", "model", model_label="model=openai:x#other")
        with pytest.raises(ConfigError, match=r"^judge endpoint .*/v2/models is not answering \(HTTP 404: .*; start"):
            check_endpoint(url.replace("/v1", "/v2"), "tiny", "judge")


def test_the_server_returns_reasoning_apart_from_content():
    """Issue 44, item 7: a reply without a call keeps its reasoning out of `content` (in `reasoning_content`, as
    vLLM's reasoning parsers return it); with a call, the same."""
    from smith.models.base import Generation
    from smith.models.serve import completion_body

    plain = completion_body(Generation("<think>\n2 + 2 is 4.\n</think>\n\nThe answer is 4."), "m")
    message = plain["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("The answer is 4.", "2 + 2 is 4.")
    call = completion_body(Generation('<think>\nuse it\n</think>\n<tool_call>\n{"name": "f", "arguments": {}}\n'
                                      "</tool_call>"), "m")["choices"][0]
    assert call["message"]["reasoning_content"] == "use it" and call["finish_reason"] == "tool_calls"
    assert call["message"]["tool_calls"][0]["function"]["name"] == "f"
