"""`openai`: any OpenAI-compatible chat endpoint (a vLLM server, `transformers serve`, smith's own
`smith.models.serve`, a hosted judge) behind the same ChatBackend interface, through the `openai` SDK.

Replies with structured `tool_calls` are turned back into Hermes `<tool_call>` text, so the backend's chat format
is `smith.models.chat_format.ENDPOINT` (the endpoint parsed the model's own syntax already); outgoing
transcripts that carry `<tool_call>` text are turned into structured `tool_calls` with ids, as strict endpoints
require. Requests of one batch run concurrently (the
SDK client is synchronous, so a thread pool); timeouts and retries are the SDK's own (429, 408, 409, 5xx,
timeouts and connection errors, exponential backoff with jitter, `Retry-After` honoured); `meter` sums
`usage` and counts the SDK's retries from its `x-stainless-retry-count` request header.

Local servers take no API key but the SDK insists on one, so without a key the client gets a placeholder and
every request omits the `Authorization` header (`openai.omit`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from smith.config import OpenAIConfig
from smith.errors import ConfigError
from smith.models.base import Generation, Message, SamplingParams, Tool, tool_lists
from smith.models.chat_format import ENDPOINT

_NO_KEY = "no-key"  # the placeholder; never sent (see the module docstring)
# the statuses the SDK retries besides 5xx (its README, "Retries"); other 4xx fail at the first answer
_RETRIED_STATUS = frozenset({408, 409, 429})


class OpenAIBackendError(RuntimeError):
    """A request that failed for good (after retries, or a 4xx that retrying cannot fix)."""


@dataclass
class TokenMeter:
    """Tokens billed by the endpoint (its `usage`), summed over every successful request; thread-safe."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    retries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, prompt: int, completion: int) -> None:
        with self._lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.requests += 1

    def retried(self) -> None:
        with self._lock:
            self.retries += 1


@dataclass
class OpenAIGeneration(Generation):
    """A Generation that also keeps the endpoint's structured tool calls (OpenAI format)."""

    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def tool_call_text(name: str, arguments: Any) -> str:
    """One Hermes `<tool_call>` block; arguments that are not valid JSON stay a string (parse reports it)."""
    if isinstance(arguments, str):
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments)
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def to_openai_messages(conversation: list[Message]) -> list[Message]:
    """Assistant `<tool_call>` text -> structured `tool_calls` with ids; following tool messages get those ids."""
    out: list[Message] = []
    pending: list[str] = []
    counter = 0
    for message in conversation:
        msg = dict(message)
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            msg["tool_calls"] = [_structured(tc, i + counter) for i, tc in enumerate(msg["tool_calls"])]
            counter += len(msg["tool_calls"])
            pending = [tc["id"] for tc in msg["tool_calls"]]
        elif msg.get("role") == "assistant" and "<tool_call>" in (msg.get("content") or ""):
            parsed = ENDPOINT.parse(msg["content"])
            if parsed.calls and not parsed.errors:
                msg["tool_calls"] = [
                    {"id": f"call_{counter + i}", "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for i, c in enumerate(parsed.calls)
                ]
                counter += len(parsed.calls)
                pending = [tc["id"] for tc in msg["tool_calls"]]
                msg["content"] = parsed.content or None
        elif msg.get("role") == "tool" and "tool_call_id" not in msg and pending:
            msg["tool_call_id"] = pending.pop(0)
        out.append(msg)
    return out


def _structured(tc: dict[str, Any], index: int) -> dict[str, Any]:
    fn = tc.get("function", tc)
    args = fn.get("arguments", {})
    return {"id": tc.get("id") or f"call_{index}", "type": "function",
            "function": {"name": fn["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}}


def _client(base_url: str, api_key: str | None, **kwargs: Any) -> tuple[openai.OpenAI, dict[str, Any]]:
    """An SDK client for `base_url` and the headers each request adds: `api_key`, else OPENAI_API_KEY, else none."""
    key = api_key or os.environ.get("OPENAI_API_KEY")
    client = openai.OpenAI(base_url=base_url, api_key=key or _NO_KEY, **kwargs)
    return client, ({} if key else {"Authorization": openai.omit})


def _attempts(e: openai.APIError) -> int:
    """How many times the SDK sent the request that failed (its retry counter rides on the request)."""
    return int(e.request.headers.get("x-stainless-retry-count", "0")) + 1


def check_endpoint(base_url: str, model: str, what: str, model_label: str | None = None,
                   api_key: str | None = None, hint: str = "start it first") -> None:
    """Refuse, in one line, an endpoint that does not answer `GET <base_url>/models` or does not serve `model`,
    so a run stops at start-up instead of after its retries, minutes in. `what` names the setting in the
    message, `model_label` how the model was given (default: the id itself)."""
    url = f"{base_url.rstrip('/')}/models"
    client, headers = _client(base_url, api_key, timeout=10, max_retries=0)
    try:
        with client:
            served = [m.id for m in client.models.list(extra_headers=headers).data]
    except openai.APIConnectionError as e:
        cause = e.__cause__ or e
        raise ConfigError(f"{what} endpoint {url} is not answering ({type(cause).__name__}: {cause}); "
                          f"{hint}") from None
    except openai.APIStatusError as e:
        raise ConfigError(f"{what} endpoint {url} is not answering (HTTP {e.status_code}: {e.response.text[:200]}); "
                          f"{hint}") from None
    except (openai.APIError, AttributeError, TypeError) as e:  # an answer that is not a model list
        raise ConfigError(f"{what} endpoint {url} is not answering ({type(e).__name__}: {e}); {hint}") from None
    if model not in served:
        raise ConfigError(f"{what} endpoint {base_url} serves {served}, not {model_label or model}")


class OpenAIBackend:
    """ChatBackend over `POST {base_url}/chat/completions` (the SDK's `chat.completions.create`).

    `api_key`: explicit, else the OPENAI_API_KEY environment variable, else none (local servers need none).
    `max_retries` and `timeout_s` go to the SDK. `seed` s becomes s + i for conversation i so a batch of
    identical prompts (a GRPO group) still gives different samples, as vLLM seeds per request.
    """

    engine = "openai"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    chat_format = ENDPOINT  # replies' structured tool calls come back as Hermes text

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = OpenAIConfig.timeout_s,
        max_retries: int = OpenAIConfig.max_retries,
        concurrency: int = OpenAIConfig.concurrency,
        logprobs: bool = False,
        extra_body: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = name or f"openai:{self.base_url}#{model}"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.logprobs = logprobs
        self.extra_body = dict(extra_body or {})
        self.meter = TokenMeter()
        http = openai.DefaultHttpxClient(event_hooks={"request": [self._on_request]})
        self._client, self._headers = _client(self.base_url, api_key, timeout=timeout_s, max_retries=max_retries,
                                              http_client=http)
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai")

    def _on_request(self, request: Any) -> None:  # an httpx request, before it is sent
        if request.headers.get("x-stainless-retry-count", "0") != "0":
            self.meter.retried()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(
        self,
        conversations: list[list[Message]],
        tools: list[list[Tool] | None] | None = None,
        params: SamplingParams | None = None,
    ) -> list[Generation]:
        params = params or SamplingParams()
        tools = tool_lists(conversations, tools)
        bodies = [self._body(c, t, params, i) for i, (c, t) in enumerate(zip(conversations, tools, strict=True))]
        return list(self._pool.map(self._complete, bodies))

    def _body(self, conversation: list[Message], tools: list[Tool] | None, params: SamplingParams,
              index: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(conversation),
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.seed is not None:
            body["seed"] = params.seed + index
        if tools:
            body["tools"] = tools
        if self.logprobs:
            body["logprobs"] = True
        return body

    def _complete(self, body: dict[str, Any]) -> OpenAIGeneration:
        reply = self._create(body)
        try:
            choice = reply["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise OpenAIBackendError(f"{self.base_url}/chat/completions returned no choices: "
                                     f"{json.dumps(reply)[:300]}") from None
        tool_calls = list(message.get("tool_calls") or [])
        parts = [message.get("content") or ""]
        parts += [tool_call_text(tc["function"]["name"], tc["function"].get("arguments", "{}")) for tc in tool_calls]
        usage = reply.get("usage") or {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        self.meter.add(prompt, completion)
        logprobs = [float(t["logprob"]) for t in ((choice.get("logprobs") or {}).get("content") or [])]
        return OpenAIGeneration(
            text="\n".join(p for p in parts if p),
            logprobs=logprobs,
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            prompt_tokens=prompt,
            completion_tokens=completion,
            tool_calls=tool_calls,
        )

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        """One completion as the JSON the endpoint sent; every SDK failure becomes one OpenAIBackendError."""
        url = f"{self.base_url}/chat/completions"
        try:
            completion = self._client.chat.completions.create(**body, extra_body=self.extra_body or None,
                                                              extra_headers=self._headers)
        except openai.APITimeoutError as e:
            raise OpenAIBackendError(f"POST {url} failed after {_attempts(e)} attempts; last error: timed out "
                                     f"after {self.timeout_s:g}s") from None
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            raise OpenAIBackendError(f"POST {url} failed after {_attempts(e)} attempts; last error: "
                                     f"{type(cause).__name__}: {cause}") from None
        except openai.APIStatusError as e:
            status, text = e.status_code, e.response.text
            if status in _RETRIED_STATUS or status >= 500:
                raise OpenAIBackendError(f"POST {url} failed after {_attempts(e)} attempts; last error: "
                                         f"HTTP {status}: {text[:200]}") from None
            raise OpenAIBackendError(f"POST {url} -> HTTP {status}: {text[:300]} "
                                     "(check the model name, the request and the API key)") from None
        except openai.APIError as e:
            raise OpenAIBackendError(f"POST {url}: {type(e).__name__}: {e}") from None
        if not isinstance(completion, ChatCompletion):  # the SDK hands back a body that is no JSON object as is
            raise OpenAIBackendError(f"POST {url} answered {str(completion)[:200]!r}, not a chat completion")
        return completion.to_dict()
