"""Issue 6: the SMITH trainer on the tiny model: a real optimizer step, evaluator sync, CLI runs, resume
after a clean stop and after kill -9, and two CPU ranks that agree. Issue 16: resume refuses changed settings
unless allowed, and falls back from an unreadable newest checkpoint."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from smith.curves import rolled_out
from smith.entry import ConfigError, train_config, train_main
from smith.train import resolve_run_dir
from smith.train.progress import summary
from smith.train.run import train

from .conftest import ROOT, models_endpoint


def overrides(tiny_model_dir: Path, tmp: Path, *extra: str) -> list[str]:
    """recipe=dry-run: scripted text that writes and uses working tools, everything else real."""
    return ["recipe=dry-run", f"model.tiny_dir={tiny_model_dir}", f"tasks.cache_dir={tmp / 'items'}", *extra]


class Snapshots(TrainerCallback):
    def __init__(self) -> None:
        self.rows: list[dict[str, dict[str, torch.Tensor]]] = []

    def on_step_end(self, args, state, control, model=None, **kw):
        self.rows.append({n: p.detach().clone() for n, p in model.named_parameters()})


def _split(params: dict[str, torch.Tensor], tag: str) -> dict[str, torch.Tensor]:
    return {n.replace(f".{tag}.", "."): p for n, p in params.items() if f".{tag}." in n}


def test_optimizer_steps_change_only_the_policy_and_sync_copies_it(tiny_model_dir, tmp_path):
    cfg = train_config(overrides(tiny_model_dir, tmp_path, f"output_dir={tmp_path / 'run'}", "max_steps=3",
                                      "save_every=100", "evaluator.sync_every=2"))
    snaps = Snapshots()
    from peft import PeftModel  # noqa: F401  (the policy is a PEFT model with two adapters)

    before: dict[str, torch.Tensor] = {}

    class First(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            before.update({n: p.detach().clone() for n, p in model.named_parameters()})

    train(cfg, resolve_run_dir(cfg), callbacks=(First(), snaps))
    s1, s2, s3 = snaps.rows
    pol0, ev0 = _split(before, "default"), _split(before, "evaluator")
    assert pol0 and pol0.keys() == ev0.keys()
    # step 1: the policy adapter moved (non-zero gradient), the evaluator copy and the base did not
    assert any(not torch.equal(s1[n], before[n]) for n in before if ".default." in n)
    assert all(torch.equal(s1[n], before[n]) for n in before if ".default." not in n)
    # step 2: still frozen (the sync happens at the start of step 3's rollout)
    assert all(torch.equal(a, b) for a, b in zip(_split(s2, "evaluator").values(), ev0.values(), strict=True))
    # step 3: the copy equals the policy as it was after step 2, and the policy moved on
    ev3, pol2 = _split(s3, "evaluator"), _split(s2, "default")
    assert all(torch.equal(ev3[n], pol2[n]) for n in pol2)
    assert any(not torch.equal(_split(s3, "default")[n], pol2[n]) for n in pol2)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for axis in ["format", "evaluation", "judge", "use"]:
        assert f"rewards/{axis}/mean" in rows[0]
    assert rows[0]["rewards/format/mean"] == pytest.approx(0.25)  # one good (0.5), one malformed (0) build
    # where the tokens went, by role and engine (issue 32): the scripted policy and the judge (the evaluator is
    # direct: no model, no tokens)
    assert all(r["tokens/policy/scripted"] > 0 and r["tokens/judge/scripted"] > 0 for r in rows)
    assert all(r["time/policy"] > 0 and r["time/judge"] > 0 for r in rows)
    assert not any(k.startswith(("tokens/evaluator/", "time/evaluator")) for r in rows for k in r)


def test_updates_per_batch_reuses_each_batch_and_its_second_update_clips(tiny_model_dir, tmp_path):
    """Issue 30: `dapo.updates_per_batch=2` makes two optimizer steps of each generated batch (TRL's num_iterations),
    the second against the first's log-probs, so the ratio leaves 1 and the clip ranges bind. A step stays an
    optimizer step: 4 steps, 2 rollouts (logged at steps 1 and 3), the evaluator re-synced at the first rollout
    past each `sync_every`."""
    run = tmp_path / "run"
    cfg = train_config(overrides(tiny_model_dir, tmp_path, f"output_dir={run}", "max_steps=4", "save_every=100",
                                      "dapo.updates_per_batch=2", "dapo.learning_rate=0.05",
                                      "evaluator.sync_every=1"))
    train(cfg, resolve_run_dir(cfg))
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["step"] for r in rows if "rewards/format/mean" in r] == [r["step"] for r in rolled_out(rows)] == [1, 3]
    assert "mean of the first and last 1 steps" in summary(rows)  # of the 2 rollouts, not of the 4 steps
    episodes = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert sorted({e["step"] for e in episodes}) == [1, 3]
    assert rows[0]["clip_ratio/region_mean"] == 0.0  # the first update of a batch is on its own samples
    assert rows[1]["clip_ratio/region_mean"] > 0 or rows[3]["clip_ratio/region_mean"] > 0
    assert rows[0]["time/sync"] == 0.0 and rows[2]["time/sync"] > 0  # step 3's rollout follows step 2's update


def _train_cli(*args: str, wait: bool = True, env_extra: dict | None = None):
    env = {**os.environ, "WANDB_MODE": "disabled", **(env_extra or {})}
    cmd = [sys.executable, "train.py", *args]
    if not wait:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _steps(run: Path) -> list[int]:
    return [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_cli_run_then_resume(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    base = overrides(tiny_model_dir, tmp_path)
    proc = _train_cli(*base, "max_steps=3", f"output_dir={run}")
    assert f"run directory: {run}" in proc.stdout
    assert _steps(run) == [1, 2, 3]
    assert (run / "checkpoint-2" / "adapter_model.safetensors").exists()
    assert (run / "checkpoint-2" / "tool_pool.json").exists() and (run / "tool_pool.json").exists()
    assert (run / "step-2").is_symlink()
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert {"rewards/format/mean", "rewards/evaluation/mean", "rewards/judge/mean", "rewards/use/mean"} <= set(row)
    # recipe=dry-run's promise: tools admitted, non-zero rewards
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert json.loads((run / "tool_pool.json").read_text())["entries"]
    assert max(r.get("rewards/evaluation/mean") or 0 for r in rows) > 0 and max(r["rewards/use/mean"] for r in rows) > 0
    assert rows[0]["pool/size"] > 0 and rows[-1]["use/correct"] == 1.0
    # TRL's own zero-std share describes its discarded advantages: smith logs the groups it found without signal
    assert any(r["dynamic_sampling/frac_dropped"] > 0 for r in rows)
    assert [r["frac_reward_zero_std"] for r in rows] == [r["dynamic_sampling/frac_dropped"] for r in rows]
    original = (run / "config.yaml").read_text()
    proc = _train_cli(*base, "max_steps=5", f"resume={run}")  # a longer run: max_steps may change on resume
    assert "resuming" in proc.stdout and "from checkpoint-3" in proc.stdout  # the final step is saved too
    assert "warning" not in proc.stderr  # TRL's own checkpoints pass checkpoint_problem
    assert _steps(run) == [1, 2, 3, 4, 5]
    assert (run / "checkpoint-4" / "smith_checkpoint.json").exists()
    # the newest checkpoint unreadable (its adapter file cut short), and a setting changed on purpose
    weights = run / "checkpoint-5" / "adapter_model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    proc = _train_cli(*base, "max_steps=6", "dapo.learning_rate=0.002", "resume_allow_changes=true", f"resume={run}")
    assert "warning: checkpoint-5 is unreadable (adapter_model.safetensors: " in proc.stderr
    assert "from checkpoint-4" in proc.stdout
    assert "resuming with changed settings (resume_allow_changes=true):\ndapo.learning_rate: 0.001 -> 0.002\n" \
        in proc.stdout
    assert _steps(run) == [1, 2, 3, 4, 5, 6]  # step 5 replayed, logged once
    assert (run / "checkpoint-5-unreadable").is_dir() and not (run / "step-5").is_symlink()
    assert (run / "checkpoint-6" / "smith_checkpoint.json").exists()
    assert (run / "config.yaml").read_text() == original  # what the run was started with, kept
    resumed = [(run / f"config.resume-{n}.yaml").read_text() for n in (1, 2)]
    assert resumed[0].startswith("# resumed from checkpoint-3") and "learning_rate: 0.002" in resumed[1]


def test_kill_9_then_resume_keeps_pool_and_step(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    base = [*overrides(tiny_model_dir, tmp_path), "max_steps=4", "save_every=2"]
    proc = _train_cli(*base, f"output_dir={run}", wait=False)
    marker = run / "checkpoint-2" / "smith_checkpoint.json"
    deadline = time.time() + 400
    # killed once step 3 is logged but not checkpointed: the resume replays it
    while not (marker.exists() and (run / "metrics.jsonl").exists() and 3 in _steps(run)) \
            and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert marker.exists(), proc.stdout.read() if proc.poll() is not None else "no checkpoint-2 in time"
    assert not (run / "checkpoint-4").exists(), "step 4 finished before the kill; the test needs it killed in between"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    saved = json.loads((run / "checkpoint-2" / "tool_pool.json").read_text())
    assert saved["entries"], "the scripted policy writes working tools: the pool must not be empty"
    _train_cli(*base, f"resume={run}")
    final = json.loads((run / "checkpoint-4" / "smith_checkpoint.json").read_text())
    assert final["step"] == 4 and _steps(run) == [1, 2, 3, 4]  # step 3 logged once, not twice
    rollout_steps = [json.loads(x)["step"] for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert rollout_steps == sorted(rollout_steps) and set(rollout_steps) == {1, 2, 3, 4}
    pool = json.loads((run / "tool_pool.json").read_text())
    codes = {e["code"] for e in pool["entries"]}
    assert {e["code"] for e in saved["entries"]} <= codes  # nothing lost from the checkpointed pool


def _torchrun(ranks: int, steps: int, tiny_model_dir: Path, tmp_path: Path, *extra: str) -> Path:
    """`steps` of 2 prompts x G=2 on `ranks` CPU processes; returns the run directory."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    run = tmp_path / "run"
    cmd = [torchrun, "--standalone", "--nproc_per_node", str(ranks), "train.py", *overrides(tiny_model_dir, tmp_path),
           f"max_steps={steps}", "dapo.prompts_per_step=2", "dapo.num_generations=2", f"output_dir={run}", *extra]
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run


def test_two_cpu_ranks_agree(tiny_model_dir, tmp_path):
    run = _torchrun(2, 2, tiny_model_dir, tmp_path)
    r0 = (run / "ranks" / "rank0.jsonl").read_text().splitlines()
    r1 = (run / "ranks" / "rank1.jsonl").read_text().splitlines()
    assert len(r0) == 2 and r0 == r1  # same gathered advantages and the same pool on both ranks
    assert len(json.loads(r0[0])["advantages"]) == 4  # prompts_per_step x G over both ranks, not per rank
    # each rank logs its own episodes (2 a step here: rank 0 holds the build group, rank 1 the use group, so each
    # runs the loss term of the kind it lacks on a zero mask, and the collectives still line up)
    logs = [[json.loads(x) for x in (run / name).read_text().splitlines()]
            for name in ("rollouts.jsonl", "rollouts.rank1.jsonl")]
    assert [[(e["step"], e["kind"]) for e in log] for log in logs] == [
        [(1, "build")] * 2 + [(2, "build")] * 2, [(1, "use")] * 2 + [(2, "use")] * 2]


def test_two_cpu_ranks_refill_in_step(tiny_model_dir, tmp_path):
    """Refill on 2 ranks, one group each: a rank missing no group still joins every round (no hang), and both
    ranks train on the same gathered advantages and pool. From step 2 the scripted user answers every use
    question alike, so rank 1's use groups tie, the fresh ones too: all 3 rounds run, the group is dropped."""
    run = _torchrun(2, 2, tiny_model_dir, tmp_path, "dapo.dynamic_sampling=refill")
    r0 = (run / "ranks" / "rank0.jsonl").read_text().splitlines()
    assert len(r0) == 2 and r0 == (run / "ranks" / "rank1.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert last["dynamic_sampling/extra_rounds"] == 3.0 and last["dynamic_sampling/groups_generated"] == 2 + 3 * 2
    assert last["dynamic_sampling/groups_kept"] == 1.0
    logs = [[json.loads(x) for x in (run / name).read_text().splitlines()]
            for name in ("rollouts.jsonl", "rollouts.rank1.jsonl")]
    assert [(e["step"], e["kind"]) for e in logs[0]] == [(1, "build")] * 2 + [(2, "build")] * 2
    assert [e["kind"] for e in logs[1] if e["kept"]] == ["use"] * 4
    # rank 1's step-2 refills: 3 rounds x 2 fresh groups x G, all still tied, logged and not trained on
    assert [(e["step"], e["kind"]) for e in logs[1] if not e["kept"]] == [(2, "use")] * 12


def test_groups_split_across_four_ranks(tiny_model_dir, tmp_path):
    """4 CPU ranks, one sample each: every GRPO group (G=2) is split over two ranks. No hang; both halves of a use
    group show the same menu; each rank's episodes are its own."""
    run = _torchrun(4, 3, tiny_model_dir, tmp_path)
    logs = [[json.loads(x) for x in (run / ("rollouts.jsonl" if r == 0 else f"rollouts.rank{r}.jsonl")).read_text()
             .splitlines()] for r in range(4)]
    assert [[e["kind"] for e in log] for log in logs] == [["build"] * 3, ["build"] * 3, ["use"] * 3, ["use"] * 3]
    menus = [[e["trace"].get("menu") for e in log] for log in logs[2:]]
    assert menus[0] == menus[1] and any(menus[0])  # once the pool has tools, both halves see one menu
    assert [e["key"] for e in logs[2]] == [e["key"] for e in logs[3]] == ["use:0", "use:1", "use:2"]  # one group
    ranks = [(run / "ranks" / f"rank{r}.jsonl").read_text() for r in range(4)]
    assert all(r == ranks[0] for r in ranks)  # the same gathered advantages and pool everywhere


def test_task_stream_is_stratified_and_split_one_to_one():
    from smith.train.data import TaskSource, prompt_rows

    rows = [r["prompt"] for r in prompt_rows(12)]
    assert rows[:4] == ["build:0", "use:0", "build:1", "use:1"]
    cats = ["lcm", "gcd", "spell_backward"]
    source = TaskSource(cats, 4, 16, seed=3, cache_dir=None)
    for kind in ("build", "use"):
        drawn = [source.category(kind, i) for i in range(30)]
        assert all(sorted(drawn[i:i + 3]) == sorted(cats) for i in range(0, 30, 3))  # each run of 3 covers all
        assert len({tuple(drawn[i:i + 3]) for i in range(0, 30, 3)}) > 1  # in a seeded, changing order
    assert [source.category("build", i) for i in range(6)] != [
        TaskSource(cats, 4, 16, seed=4, cache_dir=None).category("build", i) for i in range(6)]


def test_a_task_keys_kind_is_one_enum():
    """The trainer reads a key's kind through `EpisodeKind.of`, never by matching string prefixes."""
    from smith.rollout.episodes import EpisodeKind

    assert [EpisodeKind.of(k) for k in ("build:0", "use:3", "use:7:lcm")] == [
        EpisodeKind.BUILD, EpisodeKind.USE, EpisodeKind.USE]
    for bad in ("judge:1", "builds:0", ""):
        with pytest.raises(ValueError, match=rf"^bad task key '{bad}' \(want build:N or use:N"):
            EpisodeKind.of(bad)


@pytest.mark.parametrize("override", ["evaluator.kind=selff", "judge.kind=off", "generation.backend=vllm2",
                                      "dapo.advantage=gdpo", "sandbox.isolation=none"])
def test_a_misspelt_choice_fails_in_one_line_before_loading(override, tmp_path, in_process):
    with pytest.raises(ConfigError, match=rf"^{re.escape(override)} is not one of "):
        train(train_config(["recipe=tiny", override]), tmp_path / "run")
    out = in_process(train_main, ["recipe=tiny", override, f"output_dir={tmp_path / 'cli'}"])
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith(f"error: {override} is not one of")
    assert not (tmp_path / "cli").exists()  # no empty run directory left behind


@pytest.mark.parametrize("override", ["max_steps=abc", "max_steps=0", "dapo.learning_rate=-1",
                                      "sandbox.timeout_s=0", "dapo.num_generations=1", "build.k_heldout=2.5"])
def test_a_bad_number_fails_in_one_line_before_loading(override, tmp_path, in_process):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=rf"^{re.escape(override)} must be (an integer|a number) >= "):
        train(train_config(["recipe=tiny", override]), tmp_path / "run")
    out = in_process(train_main, ["recipe=tiny", override, f"output_dir={tmp_path / 'cli'}"])
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith(f"error: {key}=")
    assert not (tmp_path / "cli").exists()


def test_an_external_judge_that_is_not_up_fails_in_one_line_before_loading(tmp_path, in_process):
    with models_endpoint("Qwen/Qwen3-8B") as up:
        for base, model, message in [
            ("http://127.0.0.1:9/v1", "m", r"^judge endpoint http://127.0.0.1:9/v1/models is not answering"),
            (up, "Qwen/Qwen3-30B-A3B-Instruct-2507", r"^judge endpoint .* serves \['Qwen/Qwen3-8B'\], not "
                                                     r"judge.model_name=Qwen/Qwen3-30B-A3B-Instruct-2507$"),
        ]:
            cfg = train_config(["recipe=tiny", "judge.kind=external", f"judge.base_url={base}",
                                     f"judge.model_name={model}"])
            with pytest.raises(ConfigError, match=message):
                train(cfg, tmp_path / "run")
    out = in_process(train_main, ["recipe=qwen3-8b", "judge.base_url=http://127.0.0.1:9/v1",
                                  f"output_dir={tmp_path / 'cli'}"])
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith("error: judge endpoint")
    assert not (tmp_path / "cli").exists()


def fake_checkpoint(ckpt: Path, step: int) -> Path:
    """A checkpoint holding every file resume reads, each tiny but readable (session.checkpoint_problem)."""
    from safetensors.torch import save_file

    from smith.pool import POOL_FILE, ToolPool
    from smith.train.checkpoints import COMPLETE

    ckpt.mkdir(parents=True)
    save_file({"w": torch.zeros(8)}, ckpt / "adapter_model.safetensors")
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.save({"state": list(range(100))}, ckpt / name)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    ToolPool(4).save(ckpt / POOL_FILE)
    (ckpt / COMPLETE).write_text(json.dumps({"step": step}))
    return ckpt


def test_stray_checkpoint_directories_are_ignored(tmp_path):
    """A `checkpoint-4-backup` a user made beside the real ones does not break resume, reports or pool lookup."""
    from smith.pool import checkpoints, resolve_pool_path
    from smith.train.checkpoints import last_complete_checkpoint

    for name in ("checkpoint-2", "checkpoint-10", "checkpoint-4-backup", "checkpoint-x"):
        fake_checkpoint(tmp_path / name, 4)
    assert [s for s, _ in checkpoints(tmp_path)] == [2, 10]
    assert last_complete_checkpoint(tmp_path).name == "checkpoint-10"
    assert resolve_pool_path(tmp_path).parent.name == "checkpoint-10"
    assert (tmp_path / "checkpoint-4-backup").exists()  # not the run's to delete


def _cut(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


CORRUPTIONS = {
    "adapter weights cut short": (lambda c: _cut(c / "adapter_model.safetensors"), "adapter_model.safetensors: "),
    "optimizer state cut short": (lambda c: _cut(c / "optimizer.pt"), "optimizer.pt: BadZipFile"),
    "trainer state not JSON": (lambda c: (c / "trainer_state.json").write_text('{"global_step": 4'),
                               "trainer_state.json: JSONDecodeError"),
    "marker without a step": (lambda c: (c / "smith_checkpoint.json").write_text("{}"), "names no step"),
    "scheduler missing": (lambda c: (c / "scheduler.pt").unlink(), "missing scheduler.pt"),
    "pool not a pool": (lambda c: (c / "tool_pool.json").write_text("[]"), "not a smith pool"),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_an_unreadable_newest_checkpoint_falls_back_to_the_one_before(case, tmp_path, capsys):
    from smith.train.checkpoints import checkpoint_problem, last_complete_checkpoint

    older, newest = fake_checkpoint(tmp_path / "checkpoint-2", 2), fake_checkpoint(tmp_path / "checkpoint-4", 4)
    (tmp_path / "step-4").symlink_to("checkpoint-4")
    assert checkpoint_problem(newest) is None
    damage, reason = CORRUPTIONS[case]
    damage(newest)
    assert last_complete_checkpoint(tmp_path) == older
    err = capsys.readouterr().err
    assert err.startswith("warning: checkpoint-4 is unreadable (") and reason in err, err
    assert "moved to checkpoint-4-unreadable" in err and (tmp_path / "checkpoint-4-unreadable").is_dir()
    assert not (tmp_path / "step-4").is_symlink()  # a link to it would lead nowhere useful
    damage(older)  # nothing readable left: start from step 0 (train() says so)
    assert last_complete_checkpoint(tmp_path) is None


def test_a_fresh_run_into_a_run_directory_is_refused(tmp_path, in_process):
    """A fresh run (no resume) whose output_dir holds a run would append to its logs and overwrite its checkpoints:
    refused in one line before any model loads, the directory untouched."""
    from smith.train.resume import save_config

    run = tmp_path / "run"
    run.mkdir()
    save_config(train_config(["recipe=tiny-random", f"output_dir={run}"]), run)
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    before = {f.name: f.read_bytes() for f in run.iterdir()}
    out = in_process(train_main, ["recipe=tiny-random", f"output_dir={run}"])
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.strip().splitlines() == [f"error: output_dir={run} already holds a run (its config.yaml); pass "
                                               f"resume={run} to continue it, or choose another output_dir"]
    assert {f.name: f.read_bytes() for f in run.iterdir()} == before


def test_a_resume_without_a_checkpoint_starts_over_and_logs_each_step_once(tiny_model_dir, tmp_path):
    """A run stopped before its first checkpoint (save_every past where it got) resumes from step 0: the rows its
    stopped attempt logged are dropped, as a resume from a checkpoint drops the rows after it."""
    from smith.train.resume import save_config

    run = tmp_path / "run"
    run.mkdir()
    base = [*overrides(tiny_model_dir, tmp_path), "max_steps=2"]
    save_config(train_config([*base, f"output_dir={run}"]), run)
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 9.0}\n{"step": 2, "lo')  # the second cut by the kill
    (run / "rollouts.jsonl").write_text('{"step": 1, "key": "stale"}\n')
    proc = _train_cli(*base, f"resume={run}")
    assert "no complete checkpoint" in proc.stdout and "starting from step 0" in proc.stdout
    assert _steps(run) == [1, 2]
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[0])["loss"] != 9.0
    assert "stale" not in (run / "rollouts.jsonl").read_text()


def test_a_changed_config_is_refused_on_resume_with_the_diff(tmp_path, in_process):
    """Before any model loads and before the run directory is touched (an interrupted checkpoint stays); the
    diff leaves out what may change (max_steps, output_dir, resume)."""
    from smith.train.resume import check_resume_config, save_config

    run = tmp_path / "run"
    run.mkdir()
    save_config(train_config(["recipe=tiny-random", f"output_dir={run}"]), run)
    fake_checkpoint(run / "checkpoint-2", 2)
    (run / "checkpoint-3").mkdir()  # interrupted: resume would remove it
    change = ["dapo.learning_rate=0.5", "tasks.categories=[lcm]", "use.max_turns=3", "max_steps=9"]
    out = in_process(train_main, ["recipe=tiny-random", f"resume={run}", *change])
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.strip().splitlines() == [
        "dapo.learning_rate: 0.001 -> 0.5", "tasks.categories: null -> [\"lcm\"]", "use.max_turns: 2 -> 3",
        f"error: resume={run}: 3 setting(s) differ from the run's saved config (listed above); drop those "
        "overrides, or pass resume_allow_changes=true to resume with them"]
    assert (run / "checkpoint-3").is_dir() and not (run / "config.resume-1.yaml").exists()
    allowed = train_config(["recipe=tiny-random", f"resume={run}", *change, "resume_allow_changes=true"])
    assert len(check_resume_config(allowed, run)) == 3
    assert check_resume_config(train_config(["recipe=tiny-random", f"resume={run}", "max_steps=9"]), run) == []


@pytest.mark.parametrize("override", ["rewards.weights.use=abc", "openai.concurrency=0", "model.dtype=float8",
                                      "logging.wandb=yes", "dapo.dynamic_sampling=maybe",
                                      "dapo.mask_truncated_completions=maybe",
                                      "model.name_or_path=./no-model", "pool.retrieval=bm52",
                                      "model.tiny_dir=/proc/smith/model"])
def test_other_settings_fail_in_one_line_before_loading(override, tmp_path):
    """Each used to fail after the model loaded (or, for a misspelt boolean, to mean true)."""
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=rf"^{re.escape(override)} (must be|is not|is neither|cannot be built)"):
        train(train_config(["recipe=tiny-random", override]), tmp_path / "run")
    assert not (tmp_path / "run").exists(), key
