"""Sandbox: a thread-safe pool of pre-started workers that runs untrusted tools, failing closed.

docs/architecture.md, "Sandbox". "strict" = bubblewrap (read-only system, private /tmp, new pid/net/ipc/uts
namespaces, capabilities dropped) + a fresh unprivileged uid per run + seccomp + rlimits.
"process" = a fresh uid per run (when root) + new session + scrubbed environment + private working
directory + rlimits + a network namespace where the kernel allows it. See docs/sandbox.md.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sandbox._forkserver import FrameError, dumps
from sandbox.cancel import Cancel
from sandbox.jail import SandboxUnavailable
from sandbox.seccomp import build_bpf
from sandbox.types import FAULT, Limits, Result, framed_calls
from sandbox.worker import Worker, WorkerBroken

ISOLATIONS = ("strict", "process")
WORKER_ATTEMPTS = 3  # workers a run's not-yet-started calls may be tried on when fork servers fail
RESTART_ATTEMPTS = 3  # tries to start a replacement for a broken worker before its slot is given up


class Sandbox:
    """Run `func_name` from untrusted `code` once per argument object; see sandbox/__init__.py for the API."""

    def __init__(self, isolation: str = "strict", workers: int | None = None, tmp_mb: int = 64) -> None:
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        self.isolation = isolation
        # default: two workers per CPU (up to 32), so one worker's background clean-up overlaps another's run
        self.size = workers if workers is not None else min(32, 2 * (os.cpu_count() or 1))
        if self.size < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.tmp_mb = tmp_mb
        self._root = os.geteuid() == 0
        if isolation == "strict":
            if not self._root:
                raise SandboxUnavailable(
                    "strict isolation runs each tool under a fresh unprivileged uid, which needs root "
                    "(RLIMIT_NPROC is per uid); run as root or choose isolation='process'"
                )
            try:
                self._bpf: bytes | None = build_bpf()
            except RuntimeError as exc:
                raise SandboxUnavailable(str(exc)) from exc
        else:
            self._bpf = None
        self._idle: queue.SimpleQueue[Worker] = queue.SimpleQueue()
        self._all: set[Worker] = set()
        self._slots = self.size  # workers alive or being replaced; calls wait while any slot is left
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)
        self._closed = False
        # bubblewrap's --die-with-parent is tied to the launching *thread*, so workers are launched (and
        # recycled) only on these threads, which live exactly as long as the Sandbox
        self._bg = ThreadPoolExecutor(self.size, thread_name_prefix="sandbox")
        futures = [self._bg.submit(self._new_worker) for _ in range(self.size)]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            self.close()
            raise errors[0]
        for f in futures:
            self._idle.put(f.result())

    def _new_worker(self) -> Worker:
        worker = Worker(self.isolation, self._root, self._bpf, self.tmp_mb)
        try:
            if self.isolation == "strict":
                self._check_strict(worker)
            if worker.hello.get("unreadable"):
                raise SandboxUnavailable(
                    f"{self.isolation} isolation runs tools as an unprivileged uid, which cannot read "
                    f"{worker.hello['unreadable']} of this Python; install Python world-readable or use 'strict'"
                )
            worker.ready()
        except BaseException:
            worker.close()
            raise
        with self._lock:
            self._all.add(worker)
        return worker

    @staticmethod
    def _check_strict(worker: Worker) -> None:
        """Fail closed: refuse a worker that did not get every strict property."""
        hello = worker.hello
        missing = []
        if not hello.get("can_setuid"):
            missing.append("switching tools to an unprivileged uid")
        if hello.get("interfaces") != ["lo"]:
            missing.append(f"a network namespace (saw interfaces {hello.get('interfaces')})")
        if hello.get("pid", 99) > 16:
            missing.append("a pid namespace")
        if missing:
            raise SandboxUnavailable("strict isolation is missing: " + "; ".join(missing))

    @property
    def workers(self) -> list[Worker]:
        with self._lock:
            return list(self._all)

    def _take(self) -> Worker:
        """An idle worker; while a broken one is being replaced this waits for it (or for any other) rather
        than failing, and fails only once every slot's restarts have failed."""
        while True:
            if self._closed:
                raise RuntimeError("this Sandbox is closed; create a new one")
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                with self._lock:
                    if not self._slots:
                        raise SandboxUnavailable("no sandbox workers are left: restarting them failed") from None

    def _with_worker(self, fn: Any) -> Any:
        worker = self._take()
        try:
            return fn(worker)
        finally:
            try:
                self._bg.submit(self._recycle, worker)
            except RuntimeError:  # close() has shut the background threads down
                self._retire(worker)

    def _retire(self, worker: Worker) -> None:
        with self._lock:
            self._all.discard(worker)
        worker.close()
        with self._lock:
            self._returned.notify_all()

    def _replace(self, broken: Worker) -> Worker | None:
        """Close a broken worker (killed outright: no second control timeout) and start its successor; the
        slot stays counted meanwhile, so calls wait for it instead of failing."""
        self._retire(broken)
        for attempt in range(RESTART_ATTEMPTS):
            if self._closed:
                break
            try:
                return self._new_worker()
            except Exception:
                time.sleep(0.5 * (attempt + 1))
        with self._lock:
            self._slots -= 1
            self._returned.notify_all()
        return None

    def _recycle(self, worker: Worker) -> None:
        """Clean up after a run and pre-fork the next tool, then hand the worker back (or a replacement)."""
        try:
            worker.ready()
        except WorkerBroken:
            worker = self._replace(worker)
            if worker is None:
                return
        with self._lock:
            closed = self._closed
            if closed:
                self._all.discard(worker)
        if closed:
            worker.close()
        else:
            self._idle.put(worker)
        with self._lock:
            self._returned.notify_all()

    def run(
        self, code: str, func_name: str, calls: list[Any], limits: Limits | None = None, cancel: Cancel | None = None
    ) -> list[Result]:
        """One Result per argument object, in order. dict -> f(**kw), list -> f(*args), else f(arg).
        `cancel` (sandbox.cancel.Cancel) lets another thread stop the run early."""
        if not isinstance(code, str) or not isinstance(func_name, str):
            raise TypeError("code and func_name must be strings")
        results, frames = framed_calls(code, func_name, list(calls))
        if not frames:
            return results
        ran = iter(self._run_frames(code, func_name, frames, limits or Limits(), cancel))
        return [r if r is not None else next(ran) for r in results]

    def _run_frames(
        self, code: str, func_name: str, frames: list[bytes], limits: Limits, cancel: Cancel | None
    ) -> list[Result]:
        """At most once: when a fork server fails, the calls that reached a tool process keep their results
        and only the calls that never did go to another worker."""
        done: list[Result] = []
        for _ in range(WORKER_ATTEMPTS):
            rest = frames[len(done) :]
            try:
                return done + self._with_worker(lambda w, rest=rest: w.run(code, func_name, rest, limits, cancel))
            except WorkerBroken as exc:
                done += exc.done
                failure = exc
                if len(done) == len(frames) or self._closed:
                    break
        return done + [Result(FAULT, None, f"sandbox worker failed: {failure}") for _ in frames[len(done) :]]

    def run_script(
        self, code: str, stdin: str = "", limits: Limits | None = None, cancel: Cancel | None = None
    ) -> Result:
        """Run a whole program with `stdin`; Result.value is its exit code (SandboxFusion /run_code)."""
        try:
            dumps([code, stdin])
        except FrameError as exc:
            return Result("error", None, f"the program or its stdin cannot travel as JSON: {exc}")
        limits = limits or Limits()
        for _ in range(WORKER_ATTEMPTS):
            try:
                return self._with_worker(lambda w: w.run_script(code, stdin, limits, cancel))
            except WorkerBroken as exc:
                if exc.done:  # the program may have started: at most once
                    return exc.done[0]
                failure = exc
                if self._closed:
                    break
        return Result(FAULT, None, f"sandbox worker failed: {failure}")

    def quiesce(self, timeout_s: float = 30.0) -> bool:
        """Wait until every worker is idle with a fresh tool pre-forked (background clean-up done)."""
        with self._lock:
            return self._returned.wait_for(
                lambda: self._idle.qsize() == len(self._all) == self._slots, timeout=timeout_s
            )

    def close(self, wait_s: float = 30.0) -> None:
        """Stop every worker; runs in flight finish first (bounded by wait_s), then are killed."""
        with self._lock:
            self._closed = True
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            with self._lock:
                self._all.discard(worker)
            worker.close()
        with self._lock:
            self._returned.wait_for(lambda: not self._all, timeout=wait_s)
            leftover = list(self._all)
        for worker in leftover:  # still running past wait_s: its run ends at once, its thread closes it
            worker.kill()
        with self._lock:
            self._returned.wait_for(lambda: not self._all, timeout=5.0)
        self._bg.shutdown(wait=True)
        with self._lock:
            leftover = list(self._all)
            self._all.clear()
        for worker in leftover:
            worker.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close(wait_s=0)
