"""LOTS request scores: teacher-forced leave-one-out likelihood of the frozen answer (003, Eq. 1-2, B.2).

    I_x(s) = L(y | h) - L(y | h^-s),    L(y | h) = (1/|y|) sum_j log p(y_j | h, y_<j)

Both terms teacher-force the same answer string; no replacement answer is generated. The scored tokens
are located inside the full tokenised sequence (the longest common token prefix of the context alone
and the context followed by the answer), since tokenising the answer separately can move its boundary.
Prompts use the model's chat format (smith.models.chat_format, thinking off); tool documentation is the same
in every context.

A request with m scored tools needs m+1 sequences (Appendix F) that share long prefixes: the system
prompt, tool documentation and request, and then every tool line before the removed one. `mean_logliks`
runs the full-context sequence once with its KV cache and runs each intervened sequence only from where
it departs from it, on the cropped cache, in padded batches (the sharing is ours, not the paper's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from smith.models.attention import SDPA_GQA
from smith.models.base import Message
from smith.models.chat_format import chat_format


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class LikelihoodScorer:
    """A frozen causal LM that scores fixed answers under chat contexts."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.pad_slack = 1.2  # a suffix joins a padded batch while the batch costs at most 20% more tokens
        self.device = next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    @classmethod
    def from_pretrained(cls, path: str, adapter: str | None = None, device: str = "cpu", dtype: str = "float32",
                        batch_size: int = 16) -> LikelihoodScorer:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype),
                                                     attn_implementation=SDPA_GQA).to(device)
        if adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
        return cls(model, tok, batch_size)

    # ------------------------------------------------------------------ text -> tokens
    def render(self, messages: list[Message]) -> str:
        """The context as the model's chat format renders it (thinking off: `model.thinking`'s default)."""
        return chat_format(self.tokenizer).render_text(messages)

    def count_tokens(self, messages: list[Message]) -> int:
        return len(self.tokenizer(self.render(messages), add_special_tokens=False)["input_ids"])

    def encode(self, messages: list[Message], answer: str) -> tuple[list[int], int]:
        """(token ids of context + answer, index of the first answer token) located in the full sequence.

        The boundary is the first token that covers an answer character, which is where the full sequence's
        tokens part from the context's own tokenisation (a token straddling the boundary is scored)."""
        ctx = self.render(messages)
        enc = self.tokenizer(ctx + answer, add_special_tokens=False, return_offsets_mapping=True)
        ids, spans = enc["input_ids"], enc["offset_mapping"]
        start = next((i for i, (_, end) in enumerate(spans) if end > len(ctx)), len(ids))
        if start >= len(ids):
            raise ValueError("the answer is empty after tokenisation; an empty answer cannot be scored")
        if start == 0:
            raise ValueError("the context is empty; a scored answer needs at least one context token")
        return ids, start

    def encode_many(self, contexts: list[list[Message]], answer: str) -> list[tuple[list[int], int]]:
        """`encode` for contexts that differ only in their last message, sharing the work between them.

        The template is rendered once around a sentinel, and the texts are tokenised line by line with a
        cache over identical lines. Both shortcuts are checked against `encode` on the first context and
        dropped when they disagree (a template that edits content, a tokeniser that merges across lines)."""
        reference = self.encode(contexts[0], answer)
        texts = self._render_many(contexts)
        cache: dict[str, list[int]] = {}

        def by_lines(text: str) -> list[int]:
            ids: list[int] = []
            for line in text.splitlines(keepends=True):
                if line not in cache:
                    cache[line] = self.tokenizer(line, add_special_tokens=False)["input_ids"]
                ids.extend(cache[line])
            return ids

        if texts is not None and texts[0].endswith("\n") and "\n" not in answer:
            first = by_lines(texts[0])
            if (first + by_lines(answer), len(first)) == reference:
                tail = by_lines(answer)
                return [reference] + [(ids + tail, len(ids)) for ids in map(by_lines, texts[1:])]
        return [reference] + [self.encode(c, answer) for c in contexts[1:]]

    def _render_many(self, contexts: list[list[Message]]) -> list[str] | None:
        head = contexts[0]
        if any(len(c) != len(head) or c[:-1] != head[:-1] or c[-1].keys() != head[-1].keys() for c in contexts):
            return None
        sentinel = "\x00smith-lots\x00"
        template = self.render([*head[:-1], {**head[-1], "content": sentinel}])
        if template.count(sentinel) != 1:
            return None
        pre, post = template.split(sentinel)
        texts = [pre + c[-1]["content"] + post for c in contexts]
        return texts if texts[0] == self.render(head) else None

    # ------------------------------------------------------------------ likelihoods
    @torch.no_grad()
    def mean_loglik(self, messages: list[Message], answer: str) -> float:
        """L(y | h) from one independent full forward pass (the reference the batched path must match)."""
        ids, start = self.encode(messages, answer)
        logits = self.model(input_ids=torch.tensor([ids], device=self.device)).logits[0].float()
        logp = torch.log_softmax(logits[start - 1:len(ids) - 1], dim=-1)
        target = torch.tensor(ids[start:], device=self.device)
        return float(logp.gather(1, target[:, None]).mean())

    @torch.no_grad()
    def mean_logliks(self, contexts: list[list[Message]], answer: str, shared_prefix: bool = True) -> list[float]:
        """L(y | h_i) for every context. The first context runs once with its KV cache; every other one runs
        only the tokens after its common prefix with the first, on the cropped cache, grouped into padded
        batches while padding stays cheap. `shared_prefix=False` gives independent full passes."""
        if not shared_prefix:
            return [self.mean_loglik(c, answer) for c in contexts]
        encoded = self.encode_many(contexts, answer)
        first, first_start = encoded[0]
        out = self._decoder()(input_ids=torch.tensor([first], device=self.device), use_cache=True)
        kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        result = [self._answer_ll(out.last_hidden_state[0], first, first_start, 0)]
        # p_i: tokens reusable from the first sequence's cache (at least one answer logit must be recomputed)
        rest = sorted(((min(common_prefix_len(first, ids), start - 1), i) for i, (ids, start) in
                       enumerate(encoded) if i > 0), reverse=True)
        groups: list[list[tuple[int, int]]] = []
        for p, i in rest:
            group = groups[-1] if groups else None
            if group is not None and len(group) < self.batch_size:
                lengths = [len(encoded[j][0]) for _, j in group] + [len(encoded[i][0])]
                alone = sum(n - q for n, (q, _) in zip(lengths, [*group, (p, i)], strict=True))
                if len(lengths) * (max(lengths) - p) <= self.pad_slack * alone:
                    group.append((p, i))
                    continue
            groups.append([(p, i)])
        values = {}
        for group in groups:
            p = min(q for q, _ in group)
            values.update(zip([i for _, i in group], self._suffix_batch([encoded[i] for _, i in group], p, kv),
                              strict=True))
        return result + [values[i] for i in range(1, len(encoded))]

    def _answer_ll(self, hidden: torch.Tensor, ids: list[int], start: int, offset: int) -> float:
        """Mean log-probability of ids[start:] from hidden states that begin at token `offset`."""
        logp = torch.log_softmax(self._head()(hidden[start - 1 - offset:len(ids) - 1 - offset]).float(), dim=-1)
        target = torch.tensor(ids[start:], device=self.device)
        return float(logp.gather(1, target[:, None]).mean())

    def _decoder(self) -> Any:
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        return base.model

    def _head(self) -> Any:
        return self.model.get_output_embeddings()

    def _suffix_batch(self, batch: list[tuple[list[int], int]], p: int,
                      cache: list[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
        from transformers import DynamicCache

        n = len(batch)
        width = max(len(ids) - p for ids, _ in batch)
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long, device=self.device)
        for i, (ids, _) in enumerate(batch):
            input_ids[i, :len(ids) - p] = torch.tensor(ids[p:], device=self.device)
        positions = torch.arange(p, p + width, device=self.device).expand(n, -1)
        # Right padding sits after every real query of its row, so one causal mask offset by the cached
        # prefix serves the whole batch; an additive 4-D float mask spares SDPA a per-layer bool conversion.
        dtype = next(self.model.parameters()).dtype
        allowed = torch.arange(p + width, device=self.device)[None, :] <= \
            torch.arange(p, p + width, device=self.device)[:, None]
        mask = torch.zeros((width, p + width), dtype=dtype, device=self.device)
        mask = mask.masked_fill(~allowed, torch.finfo(dtype).min)[None, None].expand(n, 1, -1, -1)
        if self.model.config._attn_implementation not in ("sdpa", SDPA_GQA, "eager"):
            mask = None  # flash kernels: causal with right padding needs no explicit mask
        kv = None
        if p > 0:
            kv = DynamicCache(ddp_cache_data=[(k[:, :, :p].expand(n, -1, -1, -1).contiguous(),
                                               v[:, :, :p].expand(n, -1, -1, -1).contiguous()) for k, v in cache])
        hidden = self._decoder()(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                                 past_key_values=kv, use_cache=kv is not None).last_hidden_state
        return [self._answer_ll(hidden[i], ids, start, p) for i, (ids, start) in enumerate(batch)]


def loo_scores(scorer: LikelihoodScorer, full: list[Message], removed: dict[str, list[Message]], answer: str,
               shared_prefix: bool = True) -> dict[str, float]:
    """I_x(s) for every tool s whose evidence-removed context is given (Eq. 1)."""
    names = list(removed)
    lls = scorer.mean_logliks([full] + [removed[s] for s in names], answer, shared_prefix=shared_prefix)
    return {s: lls[0] - lls[i + 1] for i, s in enumerate(names)}
