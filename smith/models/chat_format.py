"""The model-family layer: how a model's chat template renders turns, and how that model's replies read.

Every place that renders or parses a turn goes through it (docs/models.md, "Chat formats"): the rollout's
prompts and continuations, the one tool loop, the evaluator, the judge, the suites and the SFT demonstrations.
A `ChatFormat` is chosen from the tokenizer's chat template:

- **Rendering is prefix-preserving.** The template's own text where rendering more messages never changes the
  earlier ones, else TRL's training template for it (`trl.chat_template_utils.get_training_chat_template`:
  Qwen3's own template drops the think blocks of earlier turns), else the model is refused at start-up.
- **Thinking** is off unless `model.thinking` turns it on (Qwen3's `enable_thinking`); either way a reply's
  `<think>` blocks are reasoning and never reach build parsing or tool-call parsing.
- **Tool calls in the family's syntax**: Hermes `<tool_call>{...}</tool_call>` (Qwen2.5/3), Llama 3.1/3.2's bare
  `{"name": ..., "parameters": ...}`, Granite 3.3's `<|tool_call|>[{...}]`. smith parses them itself, in the
  syntax of TRL's response schemas (`qwen3_schema`, `llama3_schema`) and granite-common's output processor,
  because those turn a malformed call into plain text, and the policy must be told which call failed.
- **The fallback**, for templates that cannot render a tool conversation (TRL's `supports_tool_calling` is
  false: SmolLM2-135M-Instruct, Gemma 3, plain Llama 3): the tools are listed in the system prompt in
  Qwen's words, calls are Hermes `<tool_call>` blocks written as plain text, and tool outputs go back as one
  user turn of `<tool_response>` blocks, which every template renders.

Transcripts at message level hold canonical OpenAI messages (assistant `tool_calls`, `tool` messages);
`render` turns them into what the template reads.
"""

from __future__ import annotations

import json
import re
import weakref
from dataclasses import dataclass, field
from typing import Any

from smith.errors import ConfigError

Message = dict[str, Any]
Tool = dict[str, Any]


# -- tool calls ----------------------------------------------------------------------------------------
@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedToolCalls:
    calls: list[ToolCall]
    errors: list[str]


def read_call(obj: Any, arguments_key: str = "arguments") -> ToolCall | str:
    """One decoded call object -> a ToolCall, or the error fed back to the model."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return 'tool call must be an object with a string "name"'
    args = obj.get(arguments_key, obj.get("arguments", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (json.JSONDecodeError, RecursionError):
            return "tool call arguments are not a JSON object"
    if not isinstance(args, dict):
        return "tool call arguments are not a JSON object"
    return ToolCall(obj["name"], args)


def _decoded(body: str) -> tuple[Any, int] | str:
    """The first JSON value of `body` and where it ends, or the error fed back to the model."""
    try:
        return json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as e:
        return f"tool call is not valid JSON: {e.msg}"
    except RecursionError:  # thousands of nested brackets exhaust the parser's stack
        return "tool call is nested too deeply"


_HERMES_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_HERMES_BLOCK = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.S)


def parse_tool_calls(text: str) -> ParsedToolCalls:
    """Hermes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Qwen, the fallback, endpoints).

    A malformed block becomes an error string (fed back to the model), never an exception.
    """
    calls: list[ToolCall] = []
    errors: list[str] = []
    for body in _HERMES_CALL.findall(text):
        got = _decoded(body)
        if isinstance(got, str):
            errors.append(got)
            continue
        call = read_call(got[0])
        if isinstance(call, str):
            errors.append(call)
        else:
            calls.append(call)
    return ParsedToolCalls(calls, errors)


def _arguments(call: Any) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of a ToolCall or an OpenAI tool-call dict (arguments as a dict or a JSON string)."""
    if isinstance(call, ToolCall):
        return call.name, call.arguments
    fn = call.get("function", call)
    args = fn.get("arguments", {})
    return fn["name"], json.loads(args) if isinstance(args, str) else args


def _json(value: Any) -> str:
    """JSON as chat templates write it (transformers' `tojson`: ensure_ascii off)."""
    return json.dumps(value, ensure_ascii=False)


class Syntax:
    """How one family writes tool calls in a reply; `parse` reads text whose reasoning is already removed.
    `markers`: the tokens that mark a call, which a reply's text must keep when it is decoded (ChatFormat.decode)."""

    markers: tuple[str, ...] = ()

    def parse(self, text: str) -> tuple[str, ParsedToolCalls]:
        raise NotImplementedError

    def write(self, content: str, calls: list[Any]) -> str:
        raise NotImplementedError


class Hermes(Syntax):
    """`<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`, one block per call, as Qwen's templates
    render an assistant turn's `tool_calls`."""

    markers = ("<tool_call>", "</tool_call>")

    def parse(self, text: str) -> tuple[str, ParsedToolCalls]:
        return _HERMES_BLOCK.sub("", text).strip(), parse_tool_calls(text)

    def write(self, content: str, calls: list[Any]) -> str:
        out = content
        for i, call in enumerate(calls):
            name, args = _arguments(call)
            out += ("\n" if i or content else "") + '<tool_call>\n{"name": "' + name + '", "arguments": ' + \
                _json(args) + "}\n</tool_call>"
        return out


_LLAMA_CALL = re.compile(r'^\{\s*"name"\s*:')


class Llama3(Syntax):
    """Llama 3.1 / 3.2: the whole reply is one JSON object `{"name": ..., "parameters": {...}}` (TRL's
    `llama3_schema` anchors the same way; the template renders one call per turn and drops content beside it).
    After text, a call counts only behind `<|python_tag|>`: the marker says where it starts."""

    markers = ("<|python_tag|>",)

    def parse(self, text: str) -> tuple[str, ParsedToolCalls]:
        content, tag, after = text.partition("<|python_tag|>")
        body = after.lstrip() if tag else text.strip()
        if not _LLAMA_CALL.match(body):
            return text.strip(), ParsedToolCalls([], [])
        content = content.strip() if tag else ""
        got = _decoded(body)
        if isinstance(got, str):
            return content, ParsedToolCalls([], [got])
        call = read_call(got[0], "parameters")
        if isinstance(call, str):
            return content, ParsedToolCalls([], [call])
        rest = body[got[1]:].strip()
        errors = [f"one tool call per turn: the text after the first call was not read ({rest[:40]!r})"] if rest else []
        return content, ParsedToolCalls([call], errors)

    def write(self, content: str, calls: list[Any]) -> str:
        if not calls:
            return content
        if len(calls) > 1:
            raise ValueError("Llama 3's chat template renders one tool call per assistant turn")
        name, args = _arguments(calls[0])
        return '{"name": "' + name + '", "parameters": ' + _json(args) + "}"


class Granite(Syntax):
    """Granite 3.3: `<|tool_call|>` then a JSON list of `{"name": ..., "arguments": ...}`. The marker is a special
    token, which ChatFormat.decode keeps; text decoded elsewhere may have lost it, so a reply that starts with `[{`
    is read as calls too (as vLLM's granite parser does), and granite-common's `<tool_call>[...]` form is accepted."""

    markers = ("<|tool_call|>",)
    MARKERS = (*markers, "<tool_call>")  # what parse reads a call behind: granite-common's form too

    def parse(self, text: str) -> tuple[str, ParsedToolCalls]:
        at = min((i for i in (text.find(m) for m in self.MARKERS) if i >= 0), default=-1)
        if at >= 0:
            content, body = text[:at], text[at:].removeprefix(self.MARKERS[0]).removeprefix(self.MARKERS[1])
        elif text.lstrip().startswith("[{"):
            content, body = "", text
        else:
            return text.strip(), ParsedToolCalls([], [])
        got = _decoded(body.strip())
        if isinstance(got, str):
            return content.strip(), ParsedToolCalls([], [got])
        if not isinstance(got[0], list):
            return content.strip(), ParsedToolCalls([], ["tool calls must be a JSON list of call objects"])
        read = [read_call(c) for c in got[0]]
        return content.strip(), ParsedToolCalls([c for c in read if not isinstance(c, str)],
                                                [c for c in read if isinstance(c, str)])

    def write(self, content: str, calls: list[Any]) -> str:
        if not calls:
            return content
        listed = [dict(zip(("name", "arguments"), _arguments(c), strict=True)) for c in calls]
        return content + "<|tool_call|>" + _json(listed)


HERMES, LLAMA3, GRANITE = Hermes(), Llama3(), Granite()


# -- reasoning -----------------------------------------------------------------------------------------
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, the rest): `<think>` blocks (an unclosed one runs to the end of the reply) and, as Qwen's
    templates read a reply, everything before a `</think>` that no `<think>` opened (the prompt opened it).
    Text without think tags comes back unchanged."""
    if "think>" not in text:
        return "", text
    parts: list[str] = []
    head, sep, tail = text.partition("</think>")
    if sep and "<think>" not in head:
        parts.append(head)
        text = tail

    def take(m: re.Match) -> str:
        parts.append(m.group(1))
        return ""

    text = _THINK.sub(take, text)
    return "\n".join(p.strip() for p in parts if p.strip()), text


def without_reasoning(text: str) -> str:
    """`text` with its reasoning removed (what build parsing and judge parsing read)."""
    return split_reasoning(text)[1]


@dataclass
class Reply:
    """One assistant reply read in its family's syntax."""

    text: str
    content: str  # what the model said: reasoning and tool calls removed, stripped
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def tool_calls(self) -> ParsedToolCalls:
        return ParsedToolCalls(self.calls, self.errors)

    @property
    def answer(self) -> str:
        """The answer of a final turn: its content, after the last `Answer:` when there is one."""
        text = self.content
        if "answer:" in text.lower():
            text = re.split(r"(?i)answer:", text)[-1]
        return text.strip().strip("`").strip()


class ReplyFormat:
    """The reading half of a format: enough for backends that hand back text (an OpenAI endpoint, scripted
    agents), whose tool calls arrive as Hermes text."""

    native_tools = True

    def __init__(self, syntax: Syntax = HERMES) -> None:
        self.syntax = syntax

    def parse(self, text: str) -> Reply:
        reasoning, rest = split_reasoning(text)
        content, parsed = self.syntax.parse(rest)
        return Reply(text, content, reasoning, parsed.calls, parsed.errors)

    def assistant_message(self, reply: Reply, turn: int) -> Message:
        """The canonical message of a reply in a message-level transcript (structured calls with ids; a reply
        without any keeps its text, a call that could not be read included, its reasoning left out)."""
        if not reply.calls:
            return {"role": "assistant", "content": without_reasoning(reply.text).strip()}
        return {"role": "assistant", "content": reply.content,
                "tool_calls": [{"id": f"call_{turn}_{j}", "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}}
                               for j, c in enumerate(reply.calls)]}

    def reply_text(self, message: Message) -> str:
        """What the model writes for a canonical assistant message (its content and calls in this syntax)."""
        return self.syntax.write(message.get("content") or "", list(message.get("tool_calls") or []))



ENDPOINT = ReplyFormat(HERMES)


def format_of(backend: Any) -> ReplyFormat:
    """The format a backend's replies read in: its own, or Hermes text (endpoints, scripted agents)."""
    return getattr(backend, "chat_format", None) or ENDPOINT


# -- the template half ---------------------------------------------------------------------------------
FALLBACK_TOOLS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    'XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
_SENTINEL = "smith-sentinel-7b1c"


def _family(template: str) -> str:
    if "<|start_of_role|>" in template:
        return "granite"
    if "<|start_header_id|>" in template:
        return "llama3"
    if "<start_of_turn>" in template:
        return "gemma"
    return "chatml" if "<|im_start|>" in template else "other"  # the fallback, unless it renders tool calls


class ChatFormat(ReplyFormat):
    """A tokenizer's chat format. Build it with `chat_format(tokenizer)`; an unusable template is a ConfigError."""

    def __init__(self, tokenizer: Any, thinking: bool = False) -> None:
        from trl.chat_template_utils import get_training_chat_template, supports_tool_calling

        self.tokenizer = tokenizer
        self.thinking = thinking
        name = getattr(tokenizer, "name_or_path", "") or "the model"
        own = tokenizer.chat_template
        if not own:
            raise ConfigError(f"{name} has no chat template; smith renders every turn with one")
        text = own if isinstance(own, str) else json.dumps(own)
        family = _family(text)
        granite = family == "granite" and "available_tools" in text
        self.native_tools = granite or supports_tool_calling(tokenizer)
        super().__init__(GRANITE if granite else LLAMA3 if self.native_tools and family == "llama3" else HERMES)
        self.kwargs: dict[str, Any] = {}
        if "enable_thinking" in text:
            self.kwargs["enable_thinking"] = thinking
        elif thinking:
            raise ConfigError(f"model.thinking=true, but the chat template of {name} has no thinking switch "
                              "(enable_thinking)" + ("; Granite 3.3 thinks only under its default system prompt, "
                                                     "which smith's prompts replace" if granite else ""))
        self.template: str | None = None  # None: the tokenizer's own
        self._own = own
        suffix = self.render_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}],
                                  generation_prompt=False).rsplit(_SENTINEL, 1)[-1]
        ids = tokenizer(suffix, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ConfigError(f"the chat template of {name} ends an assistant turn with no token")
        self.end_of_turn = int(ids[0])  # the token a reply stops on (Qwen: <|im_end|>, Llama 3: <|eot_id|>)
        self._marker_ids = {int(i[0]): m for m in self.syntax.markers
                            if len(i := tokenizer(m, add_special_tokens=False)["input_ids"]) == 1}
        end = tokenizer.decode(ids[:1])
        # what the template writes after that token (ChatML: a newline); appended with what follows
        self._closing = suffix[len(end):] if suffix.startswith(end) else ""
        if not self._prefix_preserving():
            try:
                self.template = get_training_chat_template(tokenizer)
            except ValueError:
                self.template = None
            if self.template is None or not self._prefix_preserving():
                raise ConfigError(f"the chat template of {name} is not prefix-preserving (rendering a tool output "
                                  "changes the turns before it) and TRL has no training template for it; "
                                  "multi-turn episodes need one")

    # rendering
    def _template_messages(self, messages: list[Message], tools: list[Tool] | None
                           ) -> tuple[list[Message], list[Tool] | None]:
        """Canonical messages -> what this template reads: calls as text where it does not render `tool_calls`
        (Granite, the fallback), and, in the fallback, the tool list in the system prompt and tool outputs in
        user turns."""
        out: list[Message] = []
        for m in messages:
            m = dict(m)
            if m.get("role") == "assistant" and m.get("tool_calls") and (self.syntax is GRANITE or
                                                                         not self.native_tools):
                m = {"role": "assistant", "content": self.reply_text(m)}
            if not self.native_tools and m.get("role") == "tool":
                m = {"role": "user", "content": f"<tool_response>\n{m.get('content', '')}\n</tool_response>"}
            if not self.native_tools and out and m["role"] == "user" == out[-1]["role"]:
                out[-1] = {"role": "user", "content": out[-1]["content"] + "\n" + m["content"]}
                continue
            out.append(m)
        if not tools:
            return out, None
        if self.syntax is GRANITE:  # granite-common renders the bare function schemas
            return out, [t.get("function", t) for t in tools]
        if self.native_tools:
            return out, tools
        listing = FALLBACK_TOOLS.format(tools="\n".join(_json(t) for t in tools))
        if out and out[0]["role"] == "system":
            return [{"role": "system", "content": out[0]["content"] + "\n\n" + listing}, *out[1:]], None
        return [{"role": "system", "content": listing}, *out], None

    def _apply(self, messages: list[Message], tools: list[Tool] | None, generation_prompt: bool,
               tokenize: bool) -> Any:
        msgs, tools = self._template_messages(messages, tools)
        extra = {"chat_template": self.template} if self.template is not None else {}
        return self.tokenizer.apply_chat_template(msgs, tools=tools or None, add_generation_prompt=generation_prompt,
                                                  tokenize=tokenize, return_dict=tokenize, **extra, **self.kwargs)

    def render_text(self, messages: list[Message], tools: list[Tool] | None = None,
                    generation_prompt: bool = True) -> str:
        return self._apply(messages, tools, generation_prompt, tokenize=False)

    def render(self, messages: list[Message], tools: list[Tool] | None = None) -> list[int]:
        """The exact prompt ids: `messages` with `tools`, ending in the assistant header."""
        return list(self._apply(messages, tools, True, tokenize=True)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        """A reply's text from its ids: special tokens dropped, except the syntax's call markers (Granite's
        `<|tool_call|>` is a special token: decoded away, a call after text was read as content)."""
        cut = [j for j, t in enumerate(ids) if t in self._marker_ids]
        if not cut:
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        parts, start = [], 0
        for j in cut:
            parts += [self.tokenizer.decode(ids[start:j], skip_special_tokens=True), self._marker_ids[ids[j]]]
            start = j + 1
        return "".join(parts) + self.tokenizer.decode(ids[start:], skip_special_tokens=True)

    # continuing a token-level episode
    def _tail(self, messages: list[Message]) -> str:
        """The text the template puts after an assistant turn's end-of-turn token when `messages` follow, up to
        the next assistant header (TRL's `_get_tool_suffix_ids` idea)."""
        base = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
        a = self.render_text(base, generation_prompt=False)
        b = self.render_text(base + messages)
        if not b.startswith(a):
            raise ValueError("the chat template is not prefix-preserving; multi-turn episodes need one")
        return self._closing + b[len(a):]

    def _prefix_preserving(self) -> bool:
        try:
            self._tail([{"role": "tool", "content": "x"}])
        except ValueError:
            return False
        return True

    def continuation(self, messages: list[Message]) -> list[int]:
        """Ids to append after a reply's end-of-turn token so that `messages` (tool outputs, a user turn) follow
        and the next reply can start: the template's own rendering, never re-templated history."""
        return self.tokenizer(self._tail(messages), add_special_tokens=False)["input_ids"]

    def follow_up(self, messages: list[Message], tools: list[Tool] | None = None) -> list[int]:
        """Ids to append after a reply's end-of-turn token that open a new prompt: `messages` with `tools` rendered
        afresh (its system prompt and tool block included; a leading bos dropped), exactly as `render` would start
        a conversation. The inner build continues into its use prompt this way."""
        text = self.render_text(messages, tools)
        bos = self.tokenizer.bos_token
        if bos and text.startswith(bos):
            text = text[len(bos):]
        return self.tokenizer(self._closing + text, add_special_tokens=False)["input_ids"]

    def reply_ids(self, message: Message) -> list[int]:
        """The ids of a canonical assistant message as the model writes them, end-of-turn token included."""
        return self.tokenizer(self.reply_text(message), add_special_tokens=False)["input_ids"] + [self.end_of_turn]


_FORMATS: weakref.WeakKeyDictionary[Any, ChatFormat] = weakref.WeakKeyDictionary()


def chat_format(tokenizer: Any, thinking: bool | None = None) -> ChatFormat:
    """The tokenizer's format, built once and kept with it (rebuilt when its template changes). `thinking` (the
    recipe's `model.thinking`) sets it for every backend on this tokenizer; None keeps what was set (default off)."""
    fmt = _FORMATS.get(tokenizer)
    if fmt is None or fmt._own != tokenizer.chat_template or (thinking is not None and fmt.thinking != thinking):
        fmt = ChatFormat(tokenizer, bool(thinking if thinking is not None else fmt and fmt.thinking))
        _FORMATS[tokenizer] = fmt
    return fmt
