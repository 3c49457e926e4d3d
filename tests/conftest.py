"""Shared fixtures: the tiny local model is built once per test session (seconds, no network)."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # 2 torch threads on 2 loaded cores: ~40x slower tiny chats

ROOT = Path(__file__).resolve().parent.parent


def rollout_conf(max_completion_length: int = 600, evaluator: str = "direct", judge: str = "none",
                 evaluator_max_turns: int | None = None, menu_size: int | None = None, temperature: float | None = None,
                 top_p: float | None = None, **use):
    """The typed config a test's Rollout reads: the settings it names, the schema's defaults for the rest
    (`use`: fields of UseConfig)."""
    from smith.config import DapoConfig, EvaluatorConfig, JudgeConfig, PoolConfig, TrainConfig, UseConfig

    given = lambda **kw: {k: v for k, v in kw.items() if v is not None}  # noqa: E731
    return TrainConfig(name="test",
                       dapo=DapoConfig(max_completion_length=max_completion_length,
                                       **given(temperature=temperature, top_p=top_p)),
                       use=UseConfig(**use), judge=JudgeConfig(kind=judge),
                       pool=PoolConfig(**given(menu_size=menu_size)),
                       evaluator=EvaluatorConfig(kind=evaluator, **given(max_turns=evaluator_max_turns)))

MODEL_LOADING = "Loading weights"  # what transformers prints while a model loads


@pytest.fixture
def in_process(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """`in_process(main, argv)`: an entry point (`smith.entry.train_main`, what train.py calls, or `eval_main`) run
    as its script runs it, from the repository root, in this process; returns its exit code and output as a
    process's. A model that starts loading raises (a bug, not exit 2): bad input must be refused before. A fresh
    interpreter per bad-input case spent 15 s importing torch to print one line; the scripts as processes are
    checked in tests/test_errors.py."""
    import subprocess

    from transformers import PreTrainedModel

    def no_loading(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"{MODEL_LOADING}: a model loaded before the input was checked")

    def run(main, argv: list[str]) -> subprocess.CompletedProcess:
        monkeypatch.chdir(ROOT)
        monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(no_loading))
        capsys.readouterr()
        try:
            main(argv)
            code = 0
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, out, err)

    return run


@pytest.fixture(scope="session")
def warm_model_dir() -> Path:
    """The README's warm-started policy: the copy shipped with smith (tests/test_warm.py checks it is current)."""
    from smith.train.warm import build_warm_model

    path, _ = build_warm_model(cache_dir=str(ROOT / "checkpoints/.task-cache"))
    return path


@pytest.fixture(scope="session")
def real_model_dir() -> Path:
    """SmolLM2-135M-Instruct as `model=smollm2-135m` finds it (built by scripts/setup.sh; here only when missing or
    stale, about a minute)."""
    from smith.models.real import build_real_model

    path, _ = build_real_model(ROOT / "checkpoints" / ".smollm2-135m")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from smith.models.tiny import build_tiny_model

    path, _ = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)
    return path


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with head_dim 32, which vLLM's CPU attention supports (the default tiny model's 16 is not)."""
    from smith.models.tiny import build_tiny_model

    path, _ = build_tiny_model(tmp_path_factory.mktemp("tiny32") / "model", seed=0, head_dim=32)
    return path


@pytest.fixture(scope="session")
def rg_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One reasoning-gym item cache for the whole session (items are generated once, then read back)."""
    path = tmp_path_factory.getbasetemp() / "rg_items"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def sandbox():
    """A strict sandbox for a test module (the sandbox's own tests make theirs, with the limits they test)."""
    from sandbox import Sandbox

    with Sandbox(isolation="strict", workers=2) as sb:
        yield sb


@contextmanager
def models_endpoint(*served: str) -> Iterator[str]:
    """An OpenAI-style endpoint on 127.0.0.1 that only lists `served` at /v1/models; yields its base URL."""

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": m} for m in served]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()


# a tool marks the call during which the test kills its fork server by naming its own process so (PR_SET_NAME, at
# most 15 bytes); one name per pytest-xdist worker, so that no worker kills another's servers
MARKED = f"smith-mark-{os.environ.get('PYTEST_XDIST_WORKER', 'gw')}"[:15]
MARK = f"import ctypes\nctypes.CDLL(None).prctl(15, {MARKED.encode()!r}, 0, 0, 0)\n"


def mark(indent: str) -> str:
    """`MARK`'s lines, indented for a function body."""
    return "".join(f"{indent}{line}\n" for line in MARK.splitlines())


@contextmanager
def fork_server_killer(times: int) -> Iterator[list[int]]:
    """While active, SIGKILL the fork server of each tool process that marked itself (`MARK`), up to `times`
    servers: a real kill of the real process, mid-call. Yields the list of killed servers' pids. It first waits
    for the marked processes of earlier runs to be reaped (one lives on until its worker recycles it)."""
    import psutil

    def marked() -> list[psutil.Process]:
        procs = [p for p in psutil.process_iter(["name", "status"]) if p.info["name"] == MARKED]
        return [p for p in procs if p.info["status"] != psutil.STATUS_ZOMBIE]

    deadline = time.monotonic() + 30
    while marked() and time.monotonic() < deadline:
        time.sleep(0.05)
    killed: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set() and len(killed) < times:
            for proc in psutil.process_iter(["name"]):
                try:
                    server = proc.parent() if proc.info["name"] == MARKED else None
                    # its fork server: the python process under bubblewrap (a tool whose server died already hangs
                    # from bubblewrap's init, which is no fork server)
                    if (server is not None and server.pid not in killed and server.name().startswith("python")
                            and server.parent().name() == "bwrap"):
                        server.kill()
                        killed.append(server.pid)
                except psutil.Error:  # gone meanwhile
                    continue
            stop.wait(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join()
