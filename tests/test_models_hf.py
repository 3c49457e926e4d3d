"""HFBackend on the tiny Qwen3 model: prompts, shapes, logprobs vs teacher forcing, eos, adapters."""

from __future__ import annotations

import re

import pytest
import torch

from smith.models.base import ChatBackend, SamplingParams
from smith.models.hf import HFBackend

TOOLS = [{"type": "function", "function": {
    "name": "count_bits", "description": "Counts the 1 bits of a number.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}}]
CALL = '<tool_call>\n{"name": "count_bits", "arguments": {"question": "12"}}\n</tool_call>'
CONVS = [
    [{"role": "user", "content": "How many 1 bits are in 13?"}],
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 3 + 4?"}],
    [{"role": "user", "content": "What is 12 + 30?"},
     {"role": "assistant", "content": CALL},
     {"role": "tool", "content": "2"}],
]


@pytest.fixture(scope="module")
def backend(tiny_model_dir) -> HFBackend:
    return HFBackend.from_pretrained(tiny_model_dir, name="tiny")


def teacher_forced(model, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    """log p(completion token | prefix) from one unpadded forward pass of prompt + completion."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float()
    if temperature > 0:
        logits = logits / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


class EosBias:
    """Adds `bias` to the eos logits of every forward pass (a real lm_head hook), to steer when eos appears."""

    def __init__(self, backend: HFBackend, bias: float) -> None:
        self.backend, self.bias = backend, bias

    def __enter__(self) -> EosBias:
        ids = sorted(self.backend.eos_ids)

        def hook(_module, _inputs, out):
            out = out.clone()
            out[..., ids] += self.bias
            return out

        self.handle = self.backend.model.get_output_embeddings().register_forward_hook(hook)
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()


def test_is_a_chat_backend(backend):
    assert isinstance(backend, ChatBackend)
    assert backend.eos_ids == {backend.tokenizer.convert_tokens_to_ids("<|im_end|>"), backend.tokenizer.pad_token_id}


@pytest.mark.parametrize("temperature,top_p", [(0.7, 0.9), (0.0, 1.0), (1.3, 1.0)])
def test_batch_with_tools_matches_template_and_teacher_forcing(backend, temperature, top_p):
    tools = [TOOLS, None, TOOLS]
    params = SamplingParams(max_new_tokens=24, temperature=temperature, top_p=top_p, seed=3)
    with EosBias(backend, -1e4):  # no early stop: every row is full length, exercising the padding
        gens = backend.chat(CONVS, tools, params)
    assert len(gens) == 3
    for conv, tool, g in zip(CONVS, tools, gens, strict=True):
        expected = backend.tokenizer.apply_chat_template(conv, tools=tool, add_generation_prompt=True,
                                                         tokenize=True, return_dict=True)["input_ids"]
        assert g.prompt_ids == list(expected)
        assert backend.tokenizer.pad_token_id not in g.prompt_ids
        assert len(g.completion_ids) == len(g.logprobs) == g.completion_tokens == 24
        assert g.prompt_tokens == len(g.prompt_ids)
        assert g.finish_reason == "length"
        assert g.text == backend.tokenizer.decode(g.completion_ids, skip_special_tokens=True)
        with EosBias(backend, -1e4):
            ref = teacher_forced(backend.model, g.prompt_ids, g.completion_ids, temperature)
        assert torch.allclose(torch.tensor(g.logprobs), ref, atol=1e-4), (g.logprobs, ref.tolist())
    # prompts of different lengths were left-padded in one batch
    assert len({len(g.prompt_ids) for g in gens}) == 3
    assert "count_bits" in backend.tokenizer.decode(gens[0].prompt_ids)
    assert "count_bits" not in backend.tokenizer.decode(gens[1].prompt_ids)


def test_greedy_logprobs_are_raw_log_softmax_and_argmax(backend):
    g = backend.chat([CONVS[0]], [TOOLS], SamplingParams(max_new_tokens=8, temperature=0.0))[0]
    with torch.no_grad():
        logits = backend.model(torch.tensor([g.prompt_ids + g.completion_ids])).logits[0, len(g.prompt_ids) - 1 : -1]
    assert g.completion_ids[: len(logits)] == logits.argmax(-1).tolist()[: len(g.completion_ids)]
    assert all(lp <= 0 for lp in g.logprobs)


def test_batched_equals_single_when_greedy(backend):
    params = SamplingParams(max_new_tokens=12, temperature=0.0)
    batch = backend.chat(CONVS, [TOOLS, None, TOOLS], params)
    for conv, tool, g in zip(CONVS, [TOOLS, None, TOOLS], batch, strict=True):
        alone = backend.chat([conv], [tool], params)[0]
        assert alone.completion_ids == g.completion_ids
        assert torch.allclose(torch.tensor(alone.logprobs), torch.tensor(g.logprobs), atol=1e-4)


def test_a_repeated_prompt_is_prefilled_once_and_its_rows_decode_as_if_alone(backend):
    """A GRPO group's G samples share one prompt: its prefill runs once and its cache is copied to every row. The
    rows still sample independently, and each logprob is the teacher-forced one."""
    a, b = (backend.render(c[:1]) for c in CONVS[:2])
    widths = []
    hook = backend.model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape),
                                                   with_kwargs=True)
    try:
        with EosBias(backend, -1e4):
            gens = backend.continue_ids([a, a, b, a], SamplingParams(max_new_tokens=16, temperature=1.0, seed=5))
    finally:
        hook.remove()
    assert widths[0] == (2, max(len(a), len(b)))  # the prefill: 2 distinct prompts, not 4 rows
    assert all(w == (4, 1) for w in widths[1:]) and len(widths) == 16  # then one token a step for all 4 rows
    assert len({tuple(g.completion_ids) for g in (gens[0], gens[1], gens[3])}) > 1  # each row its own sample
    for prompt, g in zip([a, a, b, a], gens, strict=True):
        assert g.prompt_ids == prompt
        with EosBias(backend, -1e4):
            ref = teacher_forced(backend.model, prompt, g.completion_ids, 1.0)
        assert torch.allclose(torch.tensor(g.logprobs), ref, atol=1e-4)
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    shared = backend.continue_ids([a, b, a], greedy)
    alone = [backend.continue_ids([p], greedy)[0].completion_ids for p in (a, b, a)]
    assert [g.completion_ids for g in shared] == alone


def test_the_in_place_cache_decodes_as_transformers_generate(backend):
    """smith's cache writes each token in place and doubles its buffer when full (several times over 150 tokens of
    prompts of different lengths): greedy, every row gives the tokens of transformers' `generate` and its
    concatenating cache, with rows leaving the batch on the way."""
    from smith.models.hf import transformers_generate

    prompts = [backend.render(c) for c in CONVS]
    greedy = SamplingParams(max_new_tokens=150, temperature=0.0)
    with EosBias(backend, -1e4):
        ours = [g.completion_ids for g in backend.continue_ids(prompts, greedy)]
        theirs = transformers_generate(backend, prompts, 150)
    assert ours == theirs and all(len(r) == 150 for r in ours)
    with EosBias(backend, 1.0):  # rows end at different steps (19-38 tokens) and leave the batch
        ours = [g.completion_ids for g in backend.continue_ids(prompts, greedy)]
        theirs = transformers_generate(backend, prompts, 150)
    assert ours == theirs and len({len(r) for r in ours}) > 1


def test_a_next_turn_prefills_only_the_tokens_it_adds(backend):
    """An episode's next turn (the last call's prompt and reply, then a tool's output) reuses the keys and values of
    the previous call's row: only the new tokens are prefilled, and the tokens and logprobs are those of a backend
    that prefills everything; a prompt sharing only a prefix with a kept row reuses that prefix. Changed weights
    (an optimizer step bumps their versions) or another adapter void the kept rows."""
    prompts = [backend.render(c) for c in CONVS]
    greedy = SamplingParams(max_new_tokens=30, temperature=0.0)
    widths = []
    hook = backend.model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape),
                                                   with_kwargs=True)
    try:
        with EosBias(backend, 1.0):  # rows end by eos (leaving the batch) or at the limit
            first = backend.continue_ids(prompts, greedy)
        assert {g.finish_reason for g in first} == {"stop", "length"}
        tool = backend.chat_format.continuation([{"role": "tool", "content": "42"}])
        turn = [g.prompt_ids + g.completion_ids + tool for g in first]
        widths.clear()
        again = backend.continue_ids(turn, greedy)
        assert widths[0] == (3, len(tool) + 1)  # the reply's last token (never forwarded) and the tool's output
        alone = HFBackend(backend.model, backend.tokenizer).continue_ids(turn, greedy)  # prefills everything
        for a, b in zip(again, alone, strict=True):
            assert a.completion_ids == b.completion_ids
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
        # a prompt sharing only a prefix with a kept row (a re-rendered conversation): the rest is prefilled
        backend.continue_ids(prompts, greedy)
        other = [p[:-2] + tool for p in prompts]
        widths.clear()
        shared = backend.continue_ids(other, greedy)
        assert widths[0] == (3, len(tool))
        fresh = HFBackend(backend.model, backend.tokenizer).continue_ids(other, greedy)
        assert [g.completion_ids for g in shared] == [g.completion_ids for g in fresh]
        backend.continue_ids(prompts, greedy)
        with torch.no_grad():
            backend.model.get_output_embeddings().weight.mul_(1.0)  # the same values, a new version
        widths.clear()
        backend.continue_ids(turn, greedy)
        assert widths[0] == (3, max(map(len, turn)))
    finally:
        hook.remove()


def test_prompts_of_one_call_forward_the_prefix_they_share_once(backend):
    """Distinct prompts of one call sharing a long prefix (the evaluator's questions to one tool: its system and
    tools) forward it once, then each its own rest; the tokens and logprobs are those of prefilling each whole."""
    system = {"role": "system", "content": "You call the one tool you are given, then answer with its output. " * 8}
    prompts = [backend.render([system, {"role": "user", "content": q}])
               for q in ("What is 2 + 2?", "Spell cat backwards.", "Name a prime below 10.")]
    shared = next(i for i, column in enumerate(zip(*prompts, strict=False)) if len(set(column)) > 1)
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    widths = []
    hook = backend.model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape),
                                                   with_kwargs=True)
    try:
        ours = HFBackend(backend.model, backend.tokenizer).continue_ids(prompts, greedy)
        assert widths[:2] == [(1, shared), (3, max(len(p) for p in prompts) - shared)]
        whole = HFBackend(backend.model, backend.tokenizer)
        whole._prefixes.MIN_TRUNK = 10**9  # no sharing: each prompt prefilled whole
        widths.clear()
        theirs = whole.continue_ids(prompts, greedy)
        assert widths[0] == (3, max(map(len, prompts)))
    finally:
        hook.remove()
    for a, b in zip(ours, theirs, strict=True):
        assert a.completion_ids == b.completion_ids
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_eos_cuts_each_row_and_keeps_the_eos_token(backend):
    params = SamplingParams(max_new_tokens=10, temperature=1.0, seed=11)
    with EosBias(backend, 5.5):  # ~10% eos per step: some rows stop early, some run to the cap
        gens = backend.chat([CONVS[1]] * 16, None, params)
    reasons = {g.finish_reason for g in gens}
    assert reasons == {"stop", "length"}
    for g in gens:
        eos_at = [i for i, t in enumerate(g.completion_ids) if t in backend.eos_ids]
        if g.finish_reason == "stop":
            assert eos_at == [len(g.completion_ids) - 1]
        else:
            assert eos_at == [] and len(g.completion_ids) == 10
        assert len(g.logprobs) == len(g.completion_ids)
        assert "<|im_end|>" not in g.text
    with EosBias(backend, 5.5):
        for g in gens:
            ref = teacher_forced(backend.model, g.prompt_ids, g.completion_ids, 1.0)
            assert torch.allclose(torch.tensor(g.logprobs), ref, atol=1e-4)


def test_each_row_stops_at_its_own_limit_and_leaves_the_batch(backend):
    """`limits`: rows of different lengths share one batch (a use turn beside the step's builds); each row's tokens
    are those it would have alone with its limit, greedy, and a row at its limit leaves: no step forwards it."""
    prompts = [backend.render(c) for c in CONVS]
    greedy = SamplingParams(max_new_tokens=24, temperature=0.0)
    widths = []
    hook = backend.model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape[0]),
                                                   with_kwargs=True)
    backend.draft_tokens = 0  # one token a step, so the steps count the tokens
    try:
        with EosBias(backend, -1e4):
            shared = backend.continue_ids(prompts, greedy, limits=[5, 24, 9])
            alone = [backend.continue_ids([p], SamplingParams(max_new_tokens=n, temperature=0.0))[0]
                     for p, n in zip(prompts, [5, 24, 9], strict=True)]
    finally:
        hook.remove()
        backend.draft_tokens = 4
    assert [g.completion_ids for g in shared] == [g.completion_ids for g in alone]
    assert [len(g.completion_ids) for g in shared] == [5, 24, 9] and {g.finish_reason for g in shared} == {"length"}
    assert widths[:24] == [3] * 5 + [2] * 4 + [1] * 15  # the prefill, then the batch shrinks as rows reach limits
    with pytest.raises(ValueError, match="limits must be one per row"):
        backend.continue_ids(prompts, greedy, limits=[5, 25, 9])


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_drafts_change_the_number_of_steps_and_nothing_else(backend, temperature):
    """Speculative decoding from n-gram drafts: the same tokens and logprobs as one token a step (each token is drawn
    from its own uniform, so a draft stands exactly when it is the token drawn), in fewer forwards once earlier replies
    give the drafts something to copy."""
    prompts = [backend.render(c) for c in CONVS]
    params = SamplingParams(max_new_tokens=24, temperature=temperature, top_p=0.9, seed=3)
    forwards = []
    hook = backend.model.register_forward_pre_hook(lambda _m, _a, kw: forwards.append(kw["input_ids"].shape[1]),
                                                   with_kwargs=True)
    try:
        backend.draft_tokens = 0
        with EosBias(backend, -1e4):
            plain = backend.continue_ids(prompts, params)
            steps_plain, forwards[:] = len(forwards), []
            backend.draft_tokens = 4
            drafted = backend.continue_ids(prompts, params)  # the first call's replies are now earlier replies
    finally:
        hook.remove()
        backend.draft_tokens = 4
    assert [g.completion_ids for g in drafted] == [g.completion_ids for g in plain]
    for d, p in zip(drafted, plain, strict=True):
        assert torch.allclose(torch.tensor(d.logprobs), torch.tensor(p.logprobs), atol=1e-4)
    assert max(forwards[1:]) == 5 and len(forwards) < steps_plain / 2  # 5: the row's token and 4 drafts


def test_immediate_eos_gives_empty_text(backend):
    with EosBias(backend, 1e4):
        g = backend.chat([CONVS[0]], None, SamplingParams(max_new_tokens=50, temperature=0.0))[0]
    assert g.finish_reason == "stop" and len(g.completion_ids) == 1 and g.completion_ids[0] in backend.eos_ids
    assert g.text == ""


def test_seeded_sampling_is_reproducible(backend):
    def run(seed):
        return [g.completion_ids for g in backend.chat(CONVS[:2], None, SamplingParams(16, 1.0, 1.0, seed))]

    assert run(5) == run(5)
    assert run(5) != run(6)
    torch.manual_seed(0)
    a = [g.completion_ids for g in backend.chat(CONVS[:2], None, SamplingParams(16, 1.0, 1.0, None))]
    torch.manual_seed(0)
    b = [g.completion_ids for g in backend.chat(CONVS[:2], None, SamplingParams(16, 1.0, 1.0, None))]
    assert a == b


def test_a_row_samples_the_same_on_its_stream_whatever_shares_its_batch(backend):
    """A seeded row draws from (seed, its stream) alone: moved, or batched with other rows, it samples the same
    tokens; another stream samples others."""
    params = SamplingParams(16, 1.0, 1.0, seed=5)
    prompts = [backend.render(c) for c in CONVS[:3]]
    alone = backend.continue_ids([prompts[1]], params, streams=[7])[0].completion_ids
    batched = backend.continue_ids([prompts[2], prompts[0], prompts[1]], params, streams=[0, 3, 7])
    assert batched[2].completion_ids == alone
    assert backend.continue_ids([prompts[1]], params, streams=[8])[0].completion_ids != alone
    assert [g.completion_ids for g in backend.continue_ids(prompts, params)] == [
        g.completion_ids for g in backend.continue_ids(prompts, params, streams=[0, 1, 2])]  # default: the index
    with pytest.raises(ValueError, match="one per row"):
        backend.continue_ids(prompts, params, streams=[0])


def test_top_p_restricts_to_the_nucleus(backend):
    # top_p tiny -> only the most likely token survives: identical to greedy, but logprobs use logits / T
    nucleus = backend.chat([CONVS[0]], None, SamplingParams(12, temperature=0.5, top_p=1e-6, seed=1))[0]
    greedy = backend.chat([CONVS[0]], None, SamplingParams(12, temperature=0.0))[0]
    assert nucleus.completion_ids == greedy.completion_ids
    ref = teacher_forced(backend.model, nucleus.prompt_ids, nucleus.completion_ids, 0.5)
    assert torch.allclose(torch.tensor(nucleus.logprobs), ref, atol=1e-4)


def test_continue_ids_generates_from_an_explicit_prefix(backend):
    params = SamplingParams(max_new_tokens=8, temperature=0.0)
    first = backend.chat([CONVS[0]], [TOOLS], params)[0]
    again = backend.continue_ids([first.prompt_ids], params)[0]
    assert again.completion_ids == first.completion_ids and again.prompt_ids == first.prompt_ids
    turn = "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    tool_turn = backend.tokenizer.encode(turn, add_special_tokens=False)
    prefix = first.prompt_ids + first.completion_ids + tool_turn
    nxt = backend.continue_ids([prefix, first.prompt_ids], params)[0]
    assert nxt.prompt_ids == prefix
    ref = teacher_forced(backend.model, prefix, nxt.completion_ids, 0.0)
    assert torch.allclose(torch.tensor(nxt.logprobs), ref, atol=1e-4)
    with pytest.raises(ValueError, match="empty prompt"):
        backend.continue_ids([[]], params)


def test_batch_size_chunks_and_preserves_order(tiny_model_dir, backend):
    small = HFBackend(backend.model, backend.tokenizer, batch_size=2)
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    assert [g.completion_ids for g in small.chat(CONVS, None, params)] == [
        g.completion_ids for g in backend.chat(CONVS, None, params)]


def test_progress_counts_the_generated_tokens(backend, capsys):
    """progress=True: a tqdm bar on stderr whose count is the tokens actually generated (finished rows stop)."""
    loud = HFBackend(backend.model, backend.tokenizer, progress=True)
    gens = loud.chat(CONVS, None, SamplingParams(max_new_tokens=6, temperature=0.0))
    err = capsys.readouterr().err
    assert f"generating {len(CONVS)} sequences" in err
    assert re.findall(r"(\d+)tok \[", err)[-1] == str(sum(len(g.completion_ids) for g in gens))
    HFBackend(backend.model, backend.tokenizer, progress=False).chat(CONVS, None, SamplingParams(max_new_tokens=6))
    assert "generating" not in capsys.readouterr().err


def test_tools_length_must_match(backend):
    with pytest.raises(ValueError, match="one per conversation"):
        backend.chat(CONVS, [TOOLS], SamplingParams(max_new_tokens=2))


def test_restores_train_mode(backend):
    backend.model.train()
    try:
        g = backend.chat([CONVS[0]], None, SamplingParams(max_new_tokens=4, temperature=0.0))[0]
        assert backend.model.training
        assert torch.is_grad_enabled()
    finally:
        backend.model.eval()
    assert len(g.completion_ids) >= 1
    with pytest.raises(ValueError, match="no PEFT adapters"):
        backend.chat([CONVS[0]], None, SamplingParams(max_new_tokens=2), adapter="judge")


@pytest.fixture(scope="module")
def peft_backend(tiny_model_dir):
    """policy: a random non-zero LoRA; judge: a fresh LoRA (B = 0, so it equals the base model)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    cfg = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False, lora_dropout=0.5)
    model = get_peft_model(base, cfg, adapter_name="policy")
    model.add_adapter("judge", LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", lora_dropout=0.5))
    model.set_adapter("policy")
    for n, p in model.named_parameters():
        p.requires_grad_("lora_" in n and ".policy." in n)
    return HFBackend(model, AutoTokenizer.from_pretrained(tiny_model_dir), name="policy")


def test_adapter_switching(peft_backend):
    model = peft_backend.model
    params = SamplingParams(max_new_tokens=10, temperature=0.0)
    grads = {n: p.requires_grad for n, p in model.named_parameters()}
    model.train()  # as inside the trainer: dropout on; generation must still be deterministic
    policy = peft_backend.chat(CONVS, None, params)
    judge = peft_backend.chat(CONVS, None, params, adapter="judge")
    base = peft_backend.chat(CONVS, None, params, adapter=None)
    assert model.active_adapter == "policy" and model.training
    assert {n: p.requires_grad for n, p in model.named_parameters()} == grads
    for p, j, b in zip(policy, judge, base, strict=True):
        assert j.completion_ids == b.completion_ids  # zero-init judge adapter == base
        assert torch.allclose(torch.tensor(j.logprobs), torch.tensor(b.logprobs), atol=1e-5)
        assert not torch.allclose(torch.tensor(p.logprobs[:1]), torch.tensor(b.logprobs[:1]), atol=1e-3)
    model.eval()
    # the named adapter really produced those logprobs
    ref = teacher_forced(model, policy[0].prompt_ids, policy[0].completion_ids, 0.0)
    assert torch.allclose(torch.tensor(policy[0].logprobs), ref, atol=1e-4)
    # a view bound to one adapter, sharing the weights
    view = peft_backend.with_adapter("judge")
    assert view.model is model and view.name == "policy:judge"
    assert [g.completion_ids for g in view.chat(CONVS, None, params)] == [g.completion_ids for g in judge]
    with pytest.raises(ValueError, match="known: policy, judge"):
        peft_backend.chat(CONVS, None, params, adapter="nope")
    assert model.active_adapter == "policy"


def test_a_lora_model_decodes_from_one_merged_copy_that_follows_its_weights(peft_backend):
    """The policy, its views and an optimizer step: generation reads a plain copy holding base + LoRA delta, rewritten
    in place when a LoRA weight changes, and what it says is what the live (unmerged) model says."""
    model, params = peft_backend.model, SamplingParams(max_new_tokens=8)
    before = peft_backend.chat(CONVS[:1], None, params)[0]
    merged = peft_backend._merged.model
    assert not any("lora_" in n for n, _ in merged.named_parameters())  # a plain model
    assert peft_backend.with_adapter("judge")._merged is peft_backend._merged  # the views share the one copy
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n and ".policy." in n]
    with torch.no_grad():
        for p in lora_b:
            p.mul_(3.0)  # as an optimizer step: the version counters move
    try:
        after = peft_backend.chat(CONVS[:1], None, params)[0]
        assert peft_backend._merged.model is merged  # rewritten, not copied again
        ref = teacher_forced(model.eval(), after.prompt_ids, after.completion_ids, 0.0)
        assert torch.allclose(torch.tensor(after.logprobs), ref, atol=1e-4)
        assert not torch.allclose(torch.tensor(after.logprobs[:1]), torch.tensor(before.logprobs[:1]), atol=1e-3)
    finally:
        with torch.no_grad():
            for p in lora_b:
                p.div_(3.0)
