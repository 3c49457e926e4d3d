"""A scripted policy for tests and dry runs: real tokenizer and chat template, scripted text.

The one allowed test double (DEVELOPERS: "a test double is fine for an LLM's text"): everything after
the text -- token ids, masks, the sandbox, rewards, the trainer's loss -- is the real thing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from smith.models.base import Generation, SamplingParams, TokenBackend

Script = Callable[[str], str]  # decoded prompt so far -> the next assistant text (without end-of-turn)


class ScriptedBackend(TokenBackend):
    """Implements `chat`, `render`, `continue_ids` like HFBackend, with `script` choosing the text."""

    def __init__(self, tokenizer: Any, script: Script, name: str = "scripted") -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.name = name
        self.calls: list[str] = []

    def continue_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                     **_: Any) -> list[Generation]:
        params = params or SamplingParams()
        out = []
        for p in prompts:
            context = self.tokenizer.decode(list(p))
            self.calls.append(context)
            text = self.script(context)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            finish = "stop"
            if len(ids) > params.max_new_tokens:
                ids, finish = ids[: params.max_new_tokens], "length"
            out.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), prompt_ids=list(p),
                                  completion_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish,
                                  prompt_tokens=len(p), completion_tokens=len(ids)))
        return out
