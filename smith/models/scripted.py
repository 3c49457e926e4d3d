"""A scripted policy for tests and dry runs: real tokenizer and chat template, scripted text.

The one allowed test double (DEVELOPERS: "a test double is fine for an LLM's text"): everything after
the text -- token ids, masks, the sandbox, rewards, the trainer's loss -- is the real thing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from smith.models.base import Generation, SamplingParams, TokenBackend, row_limits

# (decoded prompt so far) -> the next assistant text (without end-of-turn); a script with a second parameter also
# gets the backend's chat format, to write tool calls in the model family's syntax
Script = Callable[..., str]


def _positional(script: Script) -> int:
    """How many arguments a script requires (a builtin without a signature takes the context alone)."""
    try:
        params = inspect.signature(script).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)


class ScriptedBackend(TokenBackend):
    """Implements `chat`, `render`, `continue_ids` like HFBackend, with `script` choosing the text."""

    engine = "scripted"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    def __init__(self, tokenizer: Any, script: Script, name: str = "scripted") -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.name = name
        self.calls: list[str] = []
        self._with_format = _positional(script) > 1

    def continue_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                     limits: Sequence[int] | None = None, **_: Any) -> list[Generation]:
        params = params or SamplingParams()
        fmt = self.chat_format
        out = []
        for p, limit in zip(prompts, row_limits(limits, len(prompts), params), strict=True):
            context = self.tokenizer.decode(list(p))
            self.calls.append(context)
            text = self.script(context, fmt) if self._with_format else self.script(context)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [fmt.end_of_turn]
            finish = "stop"
            if len(ids) > limit:
                ids, finish = ids[:limit], "length"
            out.append(Generation(text=fmt.decode(ids), prompt_ids=list(p),
                                  completion_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish,
                                  prompt_tokens=len(p), completion_tokens=len(ids)))
        return out
