"""Host side of one pre-started sandbox worker: launches the fork server, then runs tools through it.

A worker is a long-lived fork server (sandbox/_forkserver.py), inside bubblewrap for "strict". Each `run`
forks one tool process from it (no interpreter start-up), feeds it JSON frames over pipes, enforces the
wall timeout, captures capped stdout/stderr, and finally has the server SIGKILL and reap every process of
the tools' uids (docs/architecture.md, "Sandbox").
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from sandbox._forkserver import RECYCLE, UID_BLOCK, pack, uid_block_pids
from sandbox.cancel import Cancel
from sandbox.jail import (
    BASE_ENV,
    FORKSERVER,
    SandboxUnavailable,
    bwrap_argv,
    claim_uid_block,
    release_uid_block,
)
from sandbox.pipes import ToolProcess
from sandbox.types import FAULT, Limits, Result

START_TIMEOUT_S = 30.0  # the fork server's start-up: imports, /proc probes, a probe fork
# one recycle: the server's reap gives up after 10 s of unkillable processes, so a server silent this long is wedged
CONTROL_TIMEOUT_S = 15.0
INNOCENT_RETRIES = 2  # fresh processes a run may get when its pre-forked one died before reading the run
SIGNAL_STATUS = {signal.SIGXCPU: "limit", signal.SIGKILL: "limit", signal.SIGXFSZ: "limit"}
SIGNAL_CAUSE = {
    signal.SIGXCPU: " (CPU time limit, Limits.cpu_s)",
    signal.SIGKILL: " (a hard memory or CPU limit)",
    signal.SIGSEGV: " (a crash, e.g. C stack overflow)",
}


class WorkerBroken(RuntimeError):
    """The fork server stopped answering; the pool replaces the worker.

    `done` holds the results that are final (calls that ran or may have run: never run again); the calls
    after them never reached a tool process, so the pool may run them on another worker.
    """

    def __init__(self, message: str, done: list[Result] | None = None) -> None:
        super().__init__(message)
        self.done = done or []


class Worker:
    """One fork server and the tools it runs, one `run` at a time (the pool gives each thread its own)."""

    def __init__(self, isolation: str, dedicated_uids: bool, bpf: bytes | None, tmp_mb: int = 64) -> None:
        self.isolation = isolation
        self.uid_base, self._uid_lock = claim_uid_block() if dedicated_uids else (None, None)
        self.workdir: str | None = None
        self.tool: ToolProcess | None = None
        self.broken = False  # set once the fork server failed to answer; it is then only ever killed
        self._close_lock = threading.Lock()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._errlog = tempfile.TemporaryFile()  # noqa: SIM115 - the server's stderr, kept until close()
        try:
            fd = child.fileno()
            if isolation == "strict":
                argv, root = bwrap_argv(tmp_mb, fd), "/tmp"
            else:
                self.workdir = tempfile.mkdtemp(prefix="sandbox-")
                os.chmod(self.workdir, 0o711)
                argv, root = [sys.executable, "-I", "-B", str(FORKSERVER), str(fd)], self.workdir
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._errlog,
                pass_fds=(fd,), start_new_session=True, env=BASE_ENV,
            )  # fmt: skip
        except BaseException:
            parent.close()
            self._errlog.close()
            if self._uid_lock is not None:
                release_uid_block(self.uid_base, self._uid_lock)
            raise
        finally:
            child.close()
        self.sock = parent
        self.sock.settimeout(START_TIMEOUT_S)
        cfg = {"op": "init", "uid_base": self.uid_base, "workdir_root": root, "unshare_net": isolation == "process"}
        cfg["own_pid_ns"] = isolation == "strict"
        cfg["bpf"] = base64.b64encode(bpf).decode() if bpf else None
        try:
            self.hello = self._control(cfg)
        except WorkerBroken as exc:
            self.close()
            raise SandboxUnavailable(f"{isolation} sandbox worker failed to start: {exc}") from exc
        if not self.hello.get("ok"):
            self.close()
            raise SandboxUnavailable(f"{isolation} sandbox worker failed to start: {self.hello.get('error')}")
        self.sock.settimeout(CONTROL_TIMEOUT_S)

    def _errtext(self) -> str:
        self._errlog.seek(0)
        return self._errlog.read()[-2000:].decode(errors="replace").strip()

    def _control(self, msg: dict | bytes, fds: tuple[int, ...] = ()) -> dict:
        if self.broken:
            raise WorkerBroken("fork server already failed")
        try:
            socket.send_fds(self.sock, [msg if isinstance(msg, bytes) else json.dumps(msg).encode()], list(fds))
            data = self.sock.recv(1 << 16)
        except OSError as exc:
            self.broken = True
            raise WorkerBroken(f"fork server unreachable ({exc}); its stderr: {self._errtext()!r}") from exc
        if not data:
            self.broken = True
            raise WorkerBroken(f"fork server exited; its stderr: {self._errtext()!r}")
        return json.loads(data)

    def recycle(self) -> dict:
        """Kill and reap the last tool (its exit status is returned), then pre-fork the next one."""
        fds = [*os.pipe(), *os.pipe(), *os.pipe(), *os.pipe()]  # req, resp, out, err as (read, write)
        child_ends = (fds[0], fds[3], fds[5], fds[7])
        host_ends = (fds[1], fds[2], fds[4], fds[6])
        try:
            reply = self._control(RECYCLE, child_ends)
        except BaseException:
            for fd in host_ends:
                os.close(fd)
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        if self.tool is not None:
            self.tool.close()
        self.tool = ToolProcess(*host_ends)
        if not reply.get("ok") or "pid" not in reply:
            self.broken = True
            raise WorkerBroken(f"fork server could not recycle a tool: {reply.get('error')}")
        return reply

    def _fresh_tool(self, limits: Limits, calls: int, load: dict, cancel: Cancel | None) -> ToolProcess:
        if self.tool is None or self.tool.used:
            self.recycle()
        tool = self.tool
        tool.arm(limits, cancel)
        load["limits"] = {
            "memory_mb": limits.memory_mb, "cpu_s": limits.cpu_seconds(calls), "nproc": limits.nproc,
            "fsize_mb": limits.fsize_mb, "nofile": limits.nofile,
        }  # fmt: skip
        return tool

    def _start(
        self, limits: Limits, calls: int, load: dict, first: bytes | None, cancel: Cancel | None = None
    ) -> tuple[ToolProcess, str, Any]:
        """Send the load frame (and the first call behind it) and read the load's reply. A pre-forked process
        that died before it read the whole load frame ran nothing of this run, so it is replaced and the run
        sent again, at most INNOCENT_RETRIES times: an idle process killed from outside never costs a run."""
        deaths = []
        while True:
            tool = self._fresh_tool(limits, calls, load, cancel)
            frame = pack(load)
            tool.send(frame)
            if first is not None:
                tool.send(first)  # pipelined behind the load: one round trip saved
            kind, msg = tool.recv(limits.timeout_s)
            if kind != "died" or tool.consumed() >= len(frame):
                return tool, kind, msg
            _status, why = self._death(self.recycle(), "before it read the run")
            deaths.append(why)
            if len(deaths) > INNOCENT_RETRIES:
                why = f"the sandbox's pre-forked tool process died {len(deaths)} times before it read the run: {why}"
                return tool, FAULT, why

    @staticmethod
    def _death(reply: dict, what: str) -> tuple[str, str]:
        sig, code = reply.get("signal"), reply.get("exit")
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            return SIGNAL_STATUS.get(sig, "error"), f"tool process killed by {name}{SIGNAL_CAUSE.get(sig, '')} {what}"
        return "error", f"tool process exited with code {code} {what}"

    def _result(self, tool: ToolProcess, kind: str, msg: Any, seconds: float) -> Result:
        if kind == "frame":
            status = msg["status"]
            value = msg.get("value") if status == "ok" else None
            error = msg.get("error") if isinstance(msg.get("error"), str) else None
            # frames are pipelined, so the tool's own clock around the call is the precise one
            inner = msg.get("seconds")
            if isinstance(inner, int | float) and 0 <= inner < 1e6:
                seconds = float(inner)
            return Result(status, value, error, tool.out.take(), tool.err.take(), seconds)
        if kind == "timeout":
            error = f"no result within {seconds:.3g} s"
            return Result("timeout", None, error, tool.out.take(), tool.err.take(), seconds)
        return Result(FAULT if kind == FAULT else "error", None, msg, tool.out.take(), tool.err.take(), seconds)

    def run(
        self, code: str, func_name: str, calls: list[bytes], limits: Limits, cancel: Cancel | None = None
    ) -> list[Result]:
        """Load `code` once per tool process, call `func_name` once per call frame (already packed).

        A call that times out or kills its process ends that process; the remaining calls get a fresh one.
        Raises WorkerBroken when the fork server fails, with the results that are final (at most once: a call
        that reached a tool process is never run again). Once `cancel` is set, the call in flight is killed and
        the calls not yet answered get its reason.
        """
        results: list[Result] = []
        try:
            while len(results) < len(calls) and (cancel is None or cancel.reason is None):
                load = {"kind": "func", "code": code, "func": func_name, "max_return_bytes": limits.max_return_bytes}
                first = len(results)
                t0 = time.monotonic()
                tool, kind, msg = self._start(limits, len(calls) - first, load, calls[first], cancel)
                if kind != "frame" or msg["status"] != "ok":
                    res = self._result(tool, kind, msg, time.monotonic() - t0)
                    try:
                        if kind != "frame":
                            self._explain(res, kind, "while loading the tool")
                    finally:
                        res.error = f"loading the tool failed: {res.error}"
                        results += [res] + [Result(res.status, None, res.error) for _ in calls[first + 1 :]]
                    break
                while len(results) < len(calls) and (cancel is None or cancel.reason is None):
                    if len(results) > first:  # later calls go one at a time, so output is attributed per call
                        tool.send(calls[len(results)])
                    t0 = time.monotonic()
                    kind, msg = tool.recv(limits.timeout_s)
                    res = self._result(tool, kind, msg, time.monotonic() - t0)
                    results.append(res)
                    if cancel is not None:
                        cancel.charge(res)
                    if kind != "frame":
                        self._explain(res, kind, "during the call")
                        break
            if cancel is not None:
                results += [Result("limit", None, cancel.reason) for _ in calls[len(results) :]]
        except WorkerBroken as exc:
            exc.done = results
            raise
        finally:
            if self.tool is not None and self.tool.used:
                self.tool.close()
        return results

    def _explain(self, res: Result, kind: str, what: str) -> None:
        """The tool process is gone or must go: reap it now and say how it ended."""
        try:
            reply = self.recycle()
        except WorkerBroken as exc:
            if kind == "died":  # the server's death took the tool along: not the tool's doing, and not rerun
                res.status, res.error = FAULT, f"the sandbox worker failed {what} (not retried): {exc}"
            raise
        if kind == "died":
            res.status, res.error = self._death(reply, what)
        elif kind == "bad":
            res.status = "error"
        elif kind == "cancelled":
            res.status = "limit"

    def run_script(self, code: str, stdin: str, limits: Limits, cancel: Cancel | None = None) -> Result:
        """Run a whole program (SandboxFusion /run_code); value is its exit code. WorkerBroken carries the
        result in `done` once the program may have started."""
        load = {"kind": "script", "code": code, "stdin": stdin}
        res = None
        try:
            t0 = time.monotonic()
            tool, kind, msg = self._start(limits, 1, load, None, cancel)
            res = self._result(tool, kind, msg, time.monotonic() - t0)
            if kind != "frame":
                self._explain(res, kind, "while running the program")
        except WorkerBroken as exc:
            exc.done = [res] if res is not None else []
            raise
        finally:
            if self.tool is not None and self.tool.used:
                self.tool.close()
        return res

    def owns_uid(self, uid: int) -> bool:
        """Whether `uid` is one this worker's tools run as (each run gets the next uid of its block)."""
        return self.uid_base is not None and 0 <= uid - self.uid_base < UID_BLOCK

    def ready(self) -> None:
        """Make sure a fresh pre-forked tool process is waiting (runs off the caller's critical path)."""
        if self.broken:
            raise WorkerBroken("fork server already failed")
        if self.tool is None or self.tool.used:
            self.recycle()

    def kill(self) -> None:
        """SIGKILL the fork server's process group at once, from any thread; a run in flight on this worker
        then sees its tool die and the pool closes the worker. In "strict" the sandbox's init dies with it
        (bubblewrap's --die-with-parent), and with init the whole pid namespace."""
        self.broken = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def close(self) -> None:
        """Stop the fork server and every tool process, then release the uid block. A healthy server reaps its
        tools first; a broken one is killed outright, without waiting on a control timeout again."""
        with self._close_lock:
            if self.sock.fileno() < 0:
                return
            if self.tool is not None:
                self.tool.close()
            reaped = False
            with contextlib.suppress(WorkerBroken, ValueError):
                reaped = self._control(RECYCLE).get("ok")  # reap without a successor
            self.sock.close()
            if not reaped:
                self.kill()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.kill()
                self.proc.wait()
            self._errlog.close()
            if self.workdir is not None:
                shutil.rmtree(self.workdir, ignore_errors=True)
            if self._uid_lock is not None:
                if not reaped:
                    self._kill_block()
                release_uid_block(self.uid_base, self._uid_lock)  # every process of the block is dead

    def _kill_block(self) -> None:
        """SIGKILL, from the host, any process still running as one of this worker's uids (a tool orphaned by
        a server that died), so the block is empty before another worker may claim it."""
        deadline = time.monotonic() + 10.0
        while (pids := uid_block_pids(self.uid_base)) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
