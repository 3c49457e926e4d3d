"""`hf`: batched generation from a live transformers model (optionally PEFT), with sampled-token logprobs.

Why our own decode loop and not `model.generate`: `generate` silently merges sampling knobs from the
model's `generation_config` (Qwen3 ships top_k=20), so the distribution actually sampled would differ from
`SamplingParams`, and the DAPO importance ratio needs the log-probability of each sampled token under
exactly that distribution (docs/architecture.md, "TRL": TRL's `rollout_func` returns `logprobs`). The loop below
samples from softmax(logits / temperature) restricted to the top-p nucleus and records
log_softmax(logits / temperature)[token] -- the quantity TRL recomputes for `old_per_token_logps`
(temperature-scaled, not renormalised over the nucleus); greedy uses raw logits. Each token is drawn by inverting
the distribution function at a uniform fixed by the call's seed, the row's stream and the token's position
(`_uniform`), which makes speculative decoding free of any change to what is sampled: a decode step checks up to
`draft_tokens` guessed tokens (`_Drafts`, n-gram lookup in the row's prompt and reply and in earlier replies) in one
forward, and a guess stands exactly when it is the token the row draws there, so the tokens are those of one token a
step, in fewer steps (`benchmarks/drafts.py`).

The trainer passes its PEFT policy model and keeps a frozen evaluator/judge adapter in the same model
(docs/architecture.md, "TRL"), so every call may name the adapter to generate with; `with_adapter` gives a
`ChatBackend` view bound to one adapter that shares the weights.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from smith.errors import ConfigError
from smith.models.attention import SDPA_GQA
from smith.models.base import Generation, SamplingParams, TokenBackend, mix64, row_limits, row_streams
from smith.models.chat_format import chat_format


class _Active:
    """Sentinel: generate with whatever adapter state the model is in."""


ACTIVE: Any = _Active()


def eos_ids_of(model: Any, tokenizer: Any) -> set[int]:
    """The tokenizer's eos, every eos id of the model's generation config (Qwen3: <|im_end|>, <|endoftext|>) and
    the token its chat format ends a turn with (a GGUF conversion may set eos to another token; a template that
    cannot play episodes is refused where it renders, not here)."""
    ids: set[int] = set()
    with contextlib.suppress(ConfigError, AttributeError):
        ids.add(chat_format(tokenizer).end_of_turn)
    for source in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(source, int):
            ids.add(source)
        elif source is not None:
            ids.update(int(i) for i in source)
    if not ids:
        raise ValueError("the tokenizer and generation config define no eos token; set tokenizer.eos_token")
    return ids


class _GrowingLayer(DynamicLayer):
    """A KV-cache layer written in place into a buffer that doubles when full. transformers' DynamicLayer
    concatenates the whole cache with every new token: a copy of every row's keys and values per token and layer,
    a cost that grows with the batch and the context (a decode step of SmolLM2-135M after 600 tokens on 2 CPU cores:
    1.04x slower at 4 rows, 1.22x at 16; benchmarks/kv_cache.py); here a token costs a write of its own."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.length = 0
        self._keys = self._values = key_states.new_empty(0)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, end = self.length, self.length + key_states.shape[-2]
        if self._keys.numel() == 0 or end > self._keys.shape[-2]:
            shape = (*key_states.shape[:2], max(2 * end, 64), key_states.shape[-1])
            keys, values = key_states.new_empty(shape), value_states.new_empty(shape)
            if start:
                keys[..., :start, :], values[..., :start, :] = self._keys[..., :start, :], self._values[..., :start, :]
            self._keys, self._values = keys, values
        self._keys[..., start:end, :] = key_states
        self._values[..., start:end, :] = value_states
        self.length = end
        return self._view()

    def _view(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys, self.values = self._keys[..., : self.length, :], self._values[..., : self.length, :]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._view()


class _PrefixCache:
    """The keys and values of the rows of a backend's last generation call, so that a prompt sharing a prefix with
    one of them prefills only the rest, as vLLM's automatic prefix caching does: an episode's next turn (the last
    call's prompt, the reply, the tool's output), or a re-rendered conversation (the evaluator's next turn shares
    its system, tools and question). Causal attention makes a prefix's keys and values independent of what follows
    it. Valid only for the weights and adapter they were computed with: `state` is the adapter and every
    parameter's version counter (an optimizer step or a re-sync bumps them)."""

    LIMIT_BYTES = 1 << 30  # rows past it are not kept (they are prefilled again, as without the cache)
    MIN_SHARED = 16  # a shorter common prefix is prefilled again (not worth a cache copy)
    MIN_TRUNK = 64  # a prefix shared within a call is prefilled apart only when longer (not worth a forward)

    def __init__(self) -> None:
        self.state: Any = None
        self.rows: list[tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]] = []  # (tokens, per layer K, V)
        self.fresh: list[tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]] = []
        self.fresh_bytes = 0

    def find(self, prompt: list[int], state: Any) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]]] | None:
        """The kept row sharing the longest prefix with `prompt` (at least MIN_SHARED tokens, and one token of the
        prompt left to prefill): (the prefix's length, that row's per-layer keys and values)."""
        if state != self.state or not self.rows:
            return None
        ids = torch.tensor(prompt[:-1])
        best: tuple[int, list[tuple[torch.Tensor, torch.Tensor]]] | None = None
        for tokens, layers in self.rows:
            n = min(len(ids), len(tokens))
            differ = (ids[:n] != tokens[:n]).nonzero()
            shared = int(differ[0]) if len(differ) else n
            if shared >= self.MIN_SHARED and (best is None or shared > best[0]):
                best = (shared, layers)
        return best

    def keep(self, tokens: list[int], layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        size = sum(k.numel() * k.element_size() * 2 for k, _ in layers)
        if self.fresh_bytes + size <= self.LIMIT_BYTES:
            self.fresh.append((torch.tensor(tokens), layers))
            self.fresh_bytes += size

    def trunks(self, prompts: list[list[int]], state: Any) -> list[list[int]]:
        """The prefixes that two or more of one call's `prompts` share (each prompt's longest with another, its last
        token left to prefill), where at least MIN_TRUNK tokens longer than what a kept row already gives it."""
        shared = [0] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: prompts[i][:-1])
        for a, b in itertools.pairwise(order):  # a prompt's longest common prefix is with a neighbour
            n = _shared_prefix(prompts[a][:-1], prompts[b][:-1])
            shared[a], shared[b] = max(shared[a], n), max(shared[b], n)
        out: dict[tuple[int, ...], None] = {}
        for p, n in zip(prompts, shared, strict=True):
            if n >= (self.find(p, state) or (0,))[0] + self.MIN_TRUNK:
                out.setdefault(tuple(p[:n]))
        return [list(t) for t in out]

    def hold(self, tokens: list[int], layers: list[tuple[torch.Tensor, torch.Tensor]], state: Any) -> None:
        """A shared prefix computed for the call now running (`HFBackend._share`): found by it, not kept past it."""
        if state != self.state:
            self.state, self.rows = state, []
        self.rows.append((torch.tensor(tokens), layers))

    def settle(self, state: Any) -> None:
        """The rows kept during the call that just ended replace the previous call's."""
        self.state, self.rows, self.fresh, self.fresh_bytes = state, self.fresh, [], 0


class _Merged:
    """A plain copy of a LoRA model whose linear weights hold the base weight plus the adapter's delta, to decode from:
    an unmerged LoRA runs two more matrix products and an add per linear layer, 25-37% of a decode step at the 4-8 rows
    a real step decodes on CPU (`benchmarks/decode_width.py`). The deltas are PEFT's own (`get_delta_weight`), applied
    as each LoRA layer's forward would apply them (its active adapters, none while adapters are disabled). The copy
    follows the live model: rewritten when the adapter or a LoRA weight changes, made again when any other weight
    does. CPU only: on a GPU the copy would cost the base weights' memory again, and vLLM merges there already.
    The logprobs it reports differ from the unmerged forward's in the last bits, as vLLM's do."""

    def __init__(self) -> None:
        self.model: Any = None
        self.frozen: Any = None  # the versions of the weights no adapter trains, when the copy was made
        self.state: Any = None  # what the merged weights were written for

    @staticmethod
    def layers(model: Any) -> list[tuple[str, Any]] | None:
        """The model's LoRA layers by module name, or None where merging does not apply (no PEFT LoRA on every tuned
        linear layer, DoRA, another device than the CPU)."""
        if not hasattr(model, "peft_config") or next(model.parameters()).device.type != "cpu":
            return None
        from peft.tuners.lora import Linear, LoraLayer

        layers = [(n, m) for n, m in model.get_base_model().named_modules() if isinstance(m, LoraLayer)]
        if not layers or any(not isinstance(m, Linear) or any(m.use_dora.values()) for _, m in layers):
            return None
        return layers

    def of(self, model: Any, layers: list[tuple[str, Any]]) -> Any:
        """The merged copy for the adapter state `model` is in now."""
        frozen = sum(p._version for n, p in model.named_parameters() if ".lora_" not in n)
        if self.model is None or frozen != self.frozen:
            self.model = copy.deepcopy(model).unload().eval().requires_grad_(False)
            self.frozen, self.state = frozen, None
        first = layers[0][1]
        state = (first.disable_adapters, tuple(first.active_adapters),
                 sum(p._version for n, p in model.named_parameters() if ".lora_" in n))
        if state != self.state:
            for name, layer in layers:
                weight = self.model.get_submodule(name).weight
                weight.copy_(layer.base_layer.weight)
                if not layer.disable_adapters and not layer.merged:
                    for adapter in layer.active_adapters:
                        if adapter in layer.lora_A:
                            weight.add_(layer.get_delta_weight(adapter))
            self.state = state
        return self.model


def _distribution(logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
    """(log_softmax(logits / T), the probabilities tokens are drawn with: that softmax cut to the top-p nucleus,
    not renormalised); greedy: the raw log_softmax and the same as its probabilities (only the argmax is used)."""
    logits = logits.float()
    if params.temperature <= 0:
        logp = torch.log_softmax(logits, dim=-1)
        return logp, logp.exp()
    logp = torch.log_softmax(logits / params.temperature, dim=-1)
    probs = logp.exp()
    if params.top_p < 1.0:
        # nucleus: keep the smallest prefix of the sorted distribution whose mass reaches top_p
        sorted_p, order = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(dim=-1) - sorted_p >= params.top_p
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p.masked_fill(drop, 0.0))
    return logp, probs


def _uniform(seed: int, stream: int, position: int) -> float:
    """A uniform draw in [0, 1) fixed by the call's seed, the row's stream (`row_streams`) and the token's position in
    the row's reply (splitmix64): a token is drawn the same however many tokens its decode step checked and whichever
    rows share it."""
    return (mix64(seed + stream * 0x9E3779B97F4A7C15 + (position + 1) * 0xD1B54A32D192ED03) >> 11) / 2**53


def _sample(logits: torch.Tensor, params: SamplingParams, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row [B] from its logits [B, V] and its uniform draw `u` [B] (the inverse of the distribution
    function), and its logprob under softmax(logits / T) [B]; greedy: the argmax."""
    logp, probs = _distribution(logits, params)
    if params.temperature <= 0:
        tokens = probs.argmax(dim=-1)
    else:
        cdf = probs.double().cumsum(dim=-1)
        tokens = torch.searchsorted(cdf, (u.to(cdf) * cdf[:, -1])[:, None], right=True).squeeze(-1)
        tokens = tokens.clamp(max=logits.shape[-1] - 1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


class _Drafts:
    """Draft tokens by n-gram lookup (prompt lookup decoding): the tokens that followed an occurrence of a row's last
    3 (then 2) tokens in its own prompt and reply or in the replies of earlier calls (`guess`). smith's replies copy a
    great deal: a tool call repeats the tool's name and the question from its prompt, an answer the tool's output, a
    build the function it wrote in earlier steps. Earlier replies are shared by a backend's views."""

    SIZES = (3, 2)
    KEEP = 256  # earlier replies kept

    def __init__(self) -> None:
        self.replies: list[list[int]] = []
        self.index: dict[tuple[int, ...], tuple[list[int], int]] = {}

    @classmethod
    def add(cls, index: dict[tuple[int, ...], tuple[list[int], int]], tokens: list[int], start: int = 1) -> None:
        """Index each n-gram of `tokens` that ends before position start.. by the position after it: its first
        such occurrence (the longest continuation), over what the index held before."""
        found: dict[tuple[int, ...], tuple[list[int], int]] = {}
        for p in range(max(start, 1), len(tokens)):
            for n in cls.SIZES:
                if p >= n:
                    found.setdefault(tuple(tokens[p - n:p]), (tokens, p))
        index.update(found)

    def learn(self, replies: list[list[int]]) -> None:
        """Index a call's replies; past twice KEEP, the index is rebuilt from the last KEEP."""
        new = [r for r in replies if r]
        self.replies += new
        if len(self.replies) > 2 * self.KEEP:
            self.replies, self.index = self.replies[-self.KEEP:], {}
            new = self.replies
        for reply in new:
            self.add(self.index, reply)

    def guess(self, own: dict[tuple[int, ...], tuple[list[int], int]], tokens: list[int], k: int) -> list[int]:
        """Up to `k` tokens to follow `tokens`: of the row's own occurrence of its last n-gram and the earlier
        replies', the one whose preceding tokens match `tokens` for longer. A repeat that runs into the row's own
        end (a loop) continues as the loop would."""
        for n in self.SIZES:
            key = tuple(tokens[-n:])
            hits = [h for h in (own.get(key), self.index.get(key)) if h]
            if hits:
                seq, p = max(hits, key=lambda h: _shared_suffix(h[0][: h[1]], tokens))
                period = len(seq) - p
                return [seq[p + i % period] for i in range(k)] if seq is tokens else seq[p:p + k]
        return []


def _shared_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _shared_suffix(a: list[int], b: list[int], cap: int = 32) -> int:
    n = 0
    while n < min(len(a), len(b), cap) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


class HFBackend(TokenBackend):
    """`ChatBackend` over a transformers causal LM and its tokenizer (the live objects, not copies)."""

    engine = "hf"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        name: str | None = None,
        batch_size: int | None = None,
        adapter: Any = ACTIVE,
        progress: bool | None = None,
        draft_tokens: int = 4,
    ) -> None:
        """`adapter`: the default for every call -- ACTIVE (model as is), None (adapters off), or a PEFT name.
        `progress`: a tokens bar inside each generation call that lasts over 2 s (None: on a terminal, rank 0).
        `draft_tokens`: at most this many guessed tokens checked per decode step (`_Drafts`; 0: one token a step)."""
        self.model = model
        self.progress = progress
        self.tokenizer = tokenizer
        self.name = name or str(getattr(model, "name_or_path", "hf"))
        self.batch_size = batch_size
        self.adapter = adapter
        self.eos_ids = eos_ids_of(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(self.eos_ids))
        self._prefixes = _PrefixCache()
        self._merged = _Merged()
        self._drafts = _Drafts()
        self.draft_tokens = draft_tokens

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        adapter: str | os.PathLike | None = None,
        device: str = "cpu",
        dtype: str | torch.dtype = "float32",
        name: str | None = None,
        **kwargs: Any,
    ) -> HFBackend:
        """Load a model dir (or hub id in the local cache), optionally with a PEFT adapter dir on top."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) and dtype != "auto" else dtype
        tokenizer = AutoTokenizer.from_pretrained(str(adapter) if _has_tokenizer(adapter) else str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype,
                                                     attn_implementation=SDPA_GQA).to(device)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        model.eval()
        return cls(model, tokenizer, name=name or str(adapter or path), **kwargs)

    def with_adapter(self, adapter: str | None, name: str | None = None) -> HFBackend:
        """A view that shares the weights and generates with `adapter` (None: the base model, adapters off)."""
        view = HFBackend(self.model, self.tokenizer, name=name or f"{self.name}:{adapter or 'base'}",
                         batch_size=self.batch_size, adapter=adapter, progress=self.progress)
        view.eos_ids, view.pad_id, view._merged = self.eos_ids, self.pad_id, self._merged  # one merged copy
        view._drafts, view.draft_tokens = self._drafts, self.draft_tokens  # one store of earlier replies
        return view

    def continue_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None, *, adapter: Any = ACTIVE,
        limits: Sequence[int] | None = None, streams: Sequence[int] | None = None,
    ) -> list[Generation]:
        """Generate from explicit token-id prefixes (multi-turn episodes append tool tokens, no re-templating).
        `limits`: each row's own token limit (`row_limits`); its row leaves the batch there. `streams`: each row's
        random stream (`row_streams`)."""
        params = params or SamplingParams()
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token; got an empty prompt")
        limits = row_limits(limits, len(prompts), params)
        streams = row_streams(streams, len(prompts))
        # seed None: draw from the global torch RNG so `torch.manual_seed` still makes a run reproducible
        seed = params.seed if params.seed is not None else int(torch.randint(2**62, (1,)).item())
        size = self.batch_size or max(len(prompts), 1)
        out: list[Generation] = []
        adapter = self.adapter if adapter is ACTIVE else adapter
        state = (repr(adapter), getattr(self.model, "active_adapter", None),
                 sum(p._version for p in self.model.parameters()))
        with self._generation_mode(adapter):
            layers = _Merged.layers(self.model)
            model = self._merged.of(self.model, layers) if layers else self.model
            for start in range(0, len(prompts), size):
                chunk = [list(map(int, p)) for p in prompts[start : start + size]]
                out.extend(self._generate(model, chunk, limits[start : start + size], params, seed,
                                          streams[start : start + size], state))
        self._prefixes.settle(state)
        return out

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    @contextlib.contextmanager
    def _generation_mode(self, adapter: Any) -> Iterator[None]:
        """eval mode, no grad, the requested adapter; everything (train mode, requires_grad) restored after."""
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), self._adapter(adapter):
                yield
        finally:
            self.model.train(was_training)

    @contextlib.contextmanager
    def _adapter(self, adapter: Any) -> Iterator[None]:
        if adapter is ACTIVE:
            yield
            return
        if not hasattr(self.model, "peft_config"):
            raise ValueError(f"adapter {adapter!r} requested but the model has no PEFT adapters; pass adapter=ACTIVE")
        if adapter is None:
            with self.model.disable_adapter():
                yield
            return
        if adapter not in self.model.peft_config:
            raise ValueError(f"adapter {adapter!r} not in the model; known: {', '.join(self.model.peft_config)}")
        previous = self.model.active_adapter
        # PEFT's set_adapter flips requires_grad on adapters; the trainer's frozen copies must stay frozen
        grads = {n: p.requires_grad for n, p in self.model.named_parameters()}
        self.model.set_adapter(adapter)
        try:
            yield
        finally:
            self.model.set_adapter(previous)
            for n, p in self.model.named_parameters():
                p.requires_grad_(grads[n])

    def _bar(self, batch: int) -> Any:
        """Generated tokens so far: a long batch (a 4B model's 64 x 1,024 tokens) is otherwise minutes of silence."""
        from tqdm.auto import tqdm

        quiet = None if self.progress is None else not self.progress
        if quiet is None and os.environ.get("RANK", "0") != "0":
            quiet = True
        return tqdm(desc=f"generating {batch} sequences", unit="tok", delay=0 if self.progress else 2, leave=False,
                    disable=quiet, dynamic_ncols=True)

    @staticmethod
    def _forward(model: Any, step_ids: torch.Tensor, mask: torch.Tensor, cache: Any, keep: int | None = None
                 ) -> torch.Tensor:
        """The next-token logits of each row [B, V], its cache extended by `step_ids`; `keep`: those of the last
        `keep` positions [B, keep, V] (full-prompt logits would not fit for big vocabs)."""
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -step_ids.shape[1]:]
        logits = model(input_ids=step_ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                       use_cache=True, logits_to_keep=keep or 1).logits
        return logits[:, -1, :] if keep is None else logits

    def _share(self, model: Any, distinct: list[list[int]], state: Any) -> None:
        """Prefill once, as rows of the prefix cache, each prefix that distinct prompts of a call share beyond what
        the cache holds (`_PrefixCache.trunks`: the evaluator's questions to one tool share its system and tools,
        the judge's prompts its instructions), so each prompt prefills only its own rest."""
        trunks = self._prefixes.trunks(distinct, state)
        if not trunks:
            return
        cache, mask, _ = self._prefill(model, trunks, state)
        for i, tokens in enumerate(trunks):
            valid = mask[i].nonzero().squeeze(1)
            self._prefixes.hold(tokens, [(layer.keys[i][:, valid], layer.values[i][:, valid])
                                         for layer in cache.layers], state)

    def _prefill(self, model: Any, distinct: list[list[int]], state: Any) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """The cache, attention mask and next-token logits of `distinct` prompts, each forwarding only what the
        prefix cache does not hold."""
        device = self._device()
        found = [self._prefixes.find(p, state) for p in distinct]
        held = [f[0] if f else 0 for f in found]  # tokens whose keys and values are already known
        room = max(held)
        width = max(len(p) - h for p, h in zip(distinct, held, strict=True))
        # each row: [pad][its held tokens][pad][its new tokens], the pads masked out (positions count real tokens)
        ids = torch.tensor([[self.pad_id] * (width - len(p) + h) + p[h:] for p, h in zip(distinct, held, strict=True)],
                           device=device)
        mask = torch.tensor([[0] * (room - h) + [1] * h + [0] * (width - len(p) + h) + [1] * (len(p) - h)
                             for p, h in zip(distinct, held, strict=True)], device=device)
        cache = Cache(layer_class_to_replicate=_GrowingLayer)
        if room:
            for j, (k0, _) in enumerate(next(f for f in found if f)[1]):
                keys = k0.new_zeros(len(distinct), k0.shape[0], room, k0.shape[-1])
                values = torch.zeros_like(keys)
                for r, (f, h) in enumerate(zip(found, held, strict=True)):
                    if f:
                        keys[r, :, room - h:], values[r, :, room - h:] = (t[:, :h] for t in f[1][j])
                cache.update(keys, values, j)
        return cache, mask, self._forward(model, ids, mask, cache)

    def _generate(self, model: Any, prompts: list[list[int]], limits: list[int], params: SamplingParams,
                  seed: int, streams: list[int], state: Any) -> list[Generation]:
        """Each distinct prompt is prefilled once and its cache copied to the rows that repeat it (a GRPO group's G
        samples, a use group's first turn), then every row decodes in one batch until its end of turn or its limit.
        A prompt that shares a prefix with a row of the previous call (an episode's next turn) or with other prompts
        of this one (`_share`) prefills only the rest (`_PrefixCache`); every row's cache is kept for the next
        call."""
        device = self._device()
        first: dict[tuple[int, ...], int] = {}
        rows = [first.setdefault(tuple(p), len(first)) for p in prompts]  # each row's distinct prompt
        distinct = [list(p) for p in first]
        self._share(model, distinct, state)
        cache, mask, logits = self._prefill(model, distinct, state)
        if len(first) < len(prompts):
            copies = torch.tensor(rows, device=device)
            cache.batch_select_indices(copies)
            mask, logits = mask[copies], logits[copies]
        batch = len(prompts)
        live = list(range(batch))  # the rows still generating, in the cache's order
        said: list[list[int]] = [[] for _ in prompts]  # each row's tokens so far, and their logprobs
        said_logp: list[list[float]] = [[] for _ in prompts]
        context = [list(p) for p in prompts]  # prompt + reply, for the drafts
        own: list[dict[tuple[int, ...], tuple[list[int], int]]] = []
        for row in range(batch):
            own.append({})
            _Drafts.add(own[row], context[row])

        def draws(positions: int) -> torch.Tensor:
            """Each live row's uniform draws for its next `positions` tokens, row after row."""
            return torch.tensor([_uniform(seed, streams[row], len(said[row]) + j)
                                 for row in live for j in range(positions)], dtype=torch.float64, device=device)

        def say(row: int, token: int, logp: float) -> bool:
            """Add a token to the row's reply; whether the row goes on."""
            said[row].append(token)
            said_logp[row].append(logp)
            context[row].append(token)
            _Drafts.add(own[row], context[row], len(context[row]) - 1)
            return token not in self.eos_ids and len(said[row]) < limits[row]

        def leave(going: list[bool]) -> None:
            """Rows that ended leave the batch (their cache kept for the next call); the rest decode without them."""
            nonlocal live, mask, logits
            for i, row in enumerate(live):
                if not going[i]:
                    valid = mask[i].nonzero().squeeze(1)  # the cache's positions of the row's forwarded tokens
                    tokens = (prompts[row] + said[row])[: len(valid)]
                    self._prefixes.keep(tokens, [(layer.keys[i][:, valid[: len(tokens)]],
                                                  layer.values[i][:, valid[: len(tokens)]]) for layer in cache.layers])
            still = torch.tensor([i for i, g in enumerate(going) if g], dtype=torch.long, device=device)
            if len(still) < len(live):
                live = [live[i] for i in still.tolist()]
                if live:
                    cache.batch_select_indices(still)
                    mask, logits = mask[still], logits[still]

        with self._bar(batch) as bar:
            while live:
                token, logp = _sample(logits, params, draws(1))
                leave([say(row, t, lp) for row, t, lp in zip(live, token.tolist(), logp.tolist(), strict=True)])
                bar.update(len(token))
                if not live:
                    break
                token = torch.tensor([said[row][-1] for row in live], device=device)
                guesses = [self._drafts.guess(own[row], context[row], min(self.draft_tokens, limits[row]
                                                                          - len(said[row]))) for row in live]
                k = max(map(len, guesses))
                drafts = torch.tensor([g + [-1] * (k - len(g)) for g in guesses], dtype=torch.long,
                                      device=device).reshape(len(live), k)
                step = torch.cat([token[:, None], drafts.clamp(min=0)], dim=1)
                mask = torch.cat([mask, torch.ones(len(live), k + 1, dtype=mask.dtype, device=device)], dim=-1)
                out = self._forward(model, step, mask, cache, keep=k + 1)
                if not k:
                    logits = out[:, 0]
                    continue
                # each draft stands while it is the token the row draws there (its own uniform, as without drafts)
                drawn, drawn_logp = (t.reshape(len(live), k) for t in _sample(out[:, :k].flatten(0, 1), params,
                                                                              draws(k)))
                stand = ((drawn == drafts) & (drafts >= 0)).long().cumprod(dim=1).sum(dim=1)
                going = []
                for i, row in enumerate(live):
                    n, on = int(stand[i]), True
                    for j in range(n):
                        on = say(row, int(drafts[i, j]), float(drawn_logp[i, j]))
                        bar.update(1)
                        if not on:
                            break
                    going.append(on)
                    mask[i, mask.shape[1] - k + n:] = 0  # the drafts that fell: their keys stay, masked out
                logits = out[torch.arange(len(live), device=device), stand]
                leave(going)
            bar.refresh()  # the final count, which tqdm's rate limit may not have drawn
        self._drafts.learn(said)
        return [Generation(text=self.chat_format.decode(reply), prompt_ids=prompt, completion_ids=reply,
                           logprobs=logp, finish_reason="stop" if reply and reply[-1] in self.eos_ids else "length",
                           prompt_tokens=len(prompt), completion_tokens=len(reply))
                for prompt, reply, logp in zip(prompts, said, said_logp, strict=True)]


def transformers_generate(backend: HFBackend, prompts: list[list[int]], max_new_tokens: int,
                          cache_implementation: str | None = None) -> list[list[int]]:
    """The baseline smith's decode loop is measured against (benchmarks/evaluator_batch.py, smith.gpu_check):
    transformers `generate` on the same left-padded batch, greedy, each row cut after its first eos."""
    device = backend._device()
    width = max(map(len, prompts))
    ids = torch.tensor([[backend.pad_id] * (width - len(p)) + p for p in prompts], device=device)
    pads = torch.tensor([width - len(p) for p in prompts], device=device)
    mask = (torch.arange(width, device=device)[None] >= pads[:, None]).long()
    with torch.no_grad():
        out = backend.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                     do_sample=False, eos_token_id=sorted(backend.eos_ids),
                                     pad_token_id=backend.pad_id, cache_implementation=cache_implementation)
    return [row[:next((i + 1 for i, t in enumerate(row) if t in backend.eos_ids), len(row))]
            for row in out[:, width:].tolist()]


def _has_tokenizer(path: str | os.PathLike | None) -> bool:
    """Adapter dirs saved by the trainer carry the tokenizer (chat template included); prefer theirs."""
    return path is not None and os.path.exists(os.path.join(str(path), "tokenizer_config.json"))
