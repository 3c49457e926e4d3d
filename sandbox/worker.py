"""Host side of one pre-started sandbox worker: launches the fork server, then runs tools through it.

A worker is a long-lived fork server (sandbox/_forkserver.py), inside bubblewrap for "strict". Each `run`
forks one tool process from it (no interpreter start-up), feeds it JSON frames over pipes, enforces the
wall timeout, captures capped stdout/stderr, and finally has the server SIGKILL and reap every process of
the tools' uids (docs/architecture.md, "Sandbox").
"""

from __future__ import annotations

import array
import base64
import contextlib
import fcntl
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

from sandbox._forkserver import HEADER, RECYCLE, UID_BLOCK, FrameError, loads, pack, uid_block_pids
from sandbox.cancel import Cancel
from sandbox.types import Limits, Result

FORKSERVER = Path(__file__).with_name("_forkserver.py")
INSIDE_FORKSERVER = "/opt/sandbox/forkserver.py"
START_TIMEOUT_S = 30.0  # the fork server's start-up: imports, /proc probes, a probe fork
# one recycle: the server's reap gives up after 10 s of unkillable processes, so a server silent this long is wedged
CONTROL_TIMEOUT_S = 15.0
INNOCENT_RETRIES = 2  # fresh processes a run may get when its pre-forked one died before reading the run
BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# the fork server keeps only what it needs to fork, switch uid, kill and clean up
SERVER_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
UID_BASE, UID_SPAN = 1 << 30, 1 << 30  # far above any real account
UID_LOCK_DIR = Path("/run/smith-sandbox-uids")
SIGNAL_STATUS = {signal.SIGXCPU: "limit", signal.SIGKILL: "limit", signal.SIGXFSZ: "limit"}
SIGNAL_CAUSE = {
    signal.SIGXCPU: " (CPU time limit, Limits.cpu_s)",
    signal.SIGKILL: " (a hard memory or CPU limit)",
    signal.SIGSEGV: " (a crash, e.g. C stack overflow)",
}


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be set up on this machine; nothing was run."""


class WorkerBroken(RuntimeError):
    """The fork server stopped answering; the pool replaces the worker.

    `done` holds the results that are final (calls that ran or may have run: never run again); the calls
    after them never reached a tool process, so the pool may run them on another worker.
    """

    def __init__(self, message: str, done: list[Result] | None = None) -> None:
        super().__init__(message)
        self.done = done or []


def claim_uid_block() -> tuple[int, int]:
    """Reserve a block of fresh uids host-wide (an flock held for the worker's life), so no two workers,
    in this process or any other, ever share tool uids: their process limits and kill scans stay apart."""
    UID_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    for _ in range(256):
        base = UID_BASE + secrets.randbelow(UID_SPAN // UID_BLOCK) * UID_BLOCK
        fd = os.open(UID_LOCK_DIR / f"{base}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:  # a holder deletes its file before unlocking: a lock won on a deleted file is stale, try again
            same = os.path.samestat(os.fstat(fd), os.stat(UID_LOCK_DIR / f"{base}.lock"))
        except FileNotFoundError:
            same = False
        if same:
            return base, fd
        os.close(fd)
    raise SandboxUnavailable(f"no free uid block after 256 tries; are thousands of workers running? ({UID_LOCK_DIR})")


def release_uid_block(base: int, fd: int) -> None:
    """Delete the block's lock file while still holding its lock, then unlock; call only once no process of
    the block is left. Other holders' files are never touched (claim_uid_block re-checks the file it locked)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(UID_LOCK_DIR / f"{base}.lock")
    os.close(fd)


def _ro_system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for path in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0711", "--dir", "/etc"]
    for path in ("/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(str(Path(os.path.realpath(sys.executable)).parent.parent))
    prefixes = sorted(p for p in prefixes if p != "/" and not p.startswith("/usr"))
    parents = sorted({str(parent) for p in prefixes for parent in Path(p).parents if str(parent) != "/"})
    for parent in parents:  # traversable (only) for the tools' uids: bwrap would copy e.g. /root's 0700
        args += ["--perms", "0711", "--dir", parent]
    for prefix in prefixes:
        args += ["--ro-bind", prefix, prefix]
    return args


def bwrap_argv(tmp_mb: int, fd: int) -> list[str]:
    """The bubblewrap command: new pid/net/ipc/uts namespaces, read-only system, private /tmp, few caps."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("strict isolation needs bubblewrap on PATH: apt-get install bubblewrap")
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    for key, value in BASE_ENV.items():
        args += ["--setenv", key, value]
    # the private /tmp first, so a Python install or venv that lives under /tmp is bound on top of it
    args += ["--size", str(tmp_mb * 1024 * 1024), "--perms", "0755", "--tmpfs", "/tmp"]
    args += _ro_system_binds()
    args += ["--ro-bind", str(FORKSERVER), INSIDE_FORKSERVER, "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp"]
    args += ["--cap-drop", "ALL"]
    for cap in SERVER_CAPS:
        args += ["--cap-add", cap]
    return [*args, sys.executable, "-I", "-B", INSIDE_FORKSERVER, str(fd)]


class _Capture:
    """Keeps the first `cap` bytes of a stream and counts the rest, so a flood cannot exhaust the host."""

    def __init__(self, cap: int) -> None:
        self.cap, self.buf, self.dropped = cap, bytearray(), 0

    def add(self, data: bytes) -> None:
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def take(self) -> str:
        text = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[sandbox: {self.dropped} more bytes dropped]"
        self.buf, self.dropped = bytearray(), 0
        return text


class _ToolProcess:
    """The host's pipe ends to one forked tool process."""

    def __init__(self, req_w: int, resp_r: int, out_r: int, err_r: int) -> None:
        self.req_w, self.resp_r, self.out_r, self.err_r = req_w, resp_r, out_r, err_r
        for fd in (req_w, resp_r, out_r, err_r):
            os.set_blocking(fd, False)
        self.used = False
        self.closed = False
        self.written = 0  # bytes of the request stream written into the pipe
        self.outbox = bytearray()
        self.writing = False
        self.poll = select.poll()
        for fd in (resp_r, out_r, err_r):
            self.poll.register(fd, select.POLLIN)
        self.open = {resp_r, out_r, err_r}
        self.resp = bytearray()
        self.cancel: Cancel | None = None

    def arm(self, limits: Limits, cancel: Cancel | None = None) -> None:
        """Bind this (pre-forked) tool process to one run's caps; a tool process serves one run only."""
        self.used = True
        if cancel is not None:
            self.cancel = cancel
            self.poll.register(cancel.fileno(), select.POLLIN)
        self.out, self.err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
        self.resp_cap = limits.max_return_bytes + 65536

    def _read(self, fd: int) -> bool:
        """Read what is there; False at end of file."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            self.poll.unregister(fd)
            self.open.discard(fd)
            return False
        if fd == self.resp_r:
            self.resp += data
        else:
            (self.out if fd == self.out_r else self.err).add(data)
        return True

    def _drain_output(self) -> None:
        for fd in (self.out_r, self.err_r):
            while fd in self.open:
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    break
                if not data:
                    self.poll.unregister(fd)
                    self.open.discard(fd)
                    break
                (self.out if fd == self.out_r else self.err).add(data)

    def _frame(self) -> tuple[str, Any]:
        """("frame", msg) | ("more", None) | ("bad", reason) from the response buffer."""
        if len(self.resp) < HEADER.size:
            return "more", None
        (size,) = HEADER.unpack_from(self.resp)
        if size > self.resp_cap:
            return "bad", f"the tool sent a {size}-byte reply, over the {self.resp_cap}-byte cap"
        if len(self.resp) < HEADER.size + size:
            return "more", None
        body = bytes(self.resp[HEADER.size : HEADER.size + size])
        del self.resp[: HEADER.size + size]
        try:
            msg = loads(body, wrappers=1)
        except FrameError as exc:
            return "bad", f"the tool wrote a malformed reply on the result pipe: {exc}"
        if not isinstance(msg, dict) or msg.get("status") not in ("ok", "error", "limit"):
            return "bad", "the tool wrote a malformed reply on the result pipe: not a reply object"
        return "frame", msg

    def send(self, frame: bytes) -> None:
        """Queue a packed frame; it is written while waiting for replies (pipelined, not lock-stepped)."""
        self.outbox += frame
        if not self.writing:
            self.writing = True
            self.poll.register(self.req_w, select.POLLOUT)
        self._write()

    def _write(self) -> None:
        try:
            n = os.write(self.req_w, self.outbox)
            del self.outbox[:n]
            self.written += n
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.outbox.clear()
        if not self.outbox:
            self.writing = False
            self.poll.unregister(self.req_w)

    def recv(self, timeout_s: float) -> tuple[str, Any]:
        """The next reply: ("frame", msg) | ("timeout", None) | ("died", None) | ("bad", why) | ("cancelled", why)."""
        deadline = time.monotonic() + timeout_s
        while True:
            kind, msg = self._frame()
            if kind != "more":
                self._drain_output()
                return kind, msg
            if self.resp_r not in self.open:
                self._drain_output()
                return "died", None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._drain_output()
                return "timeout", None
            for fd, event in self.poll.poll(max(1, int(remaining * 1000 + 1))):
                if self.cancel is not None and fd == self.cancel.fileno():
                    self._drain_output()
                    return "cancelled", self.cancel.reason
                if fd != self.req_w:
                    self._read(fd)
                elif event & (select.POLLERR | select.POLLHUP):
                    self.outbox.clear()
                    self.writing = False
                    self.poll.unregister(fd)
                else:
                    self._write()

    def consumed(self) -> int:
        """Bytes of the request stream the tool process has read: what was written into the pipe less what is
        still in it (a dead reader leaves its unread bytes in the pipe, whose write end the host still holds)."""
        unread = array.array("i", [0])
        fcntl.ioctl(self.req_w, termios.FIONREAD, unread)
        return self.written - unread[0]

    def close(self) -> None:
        """Close the host's ends; an idle tool process then reads end-of-file and exits by itself."""
        if not self.closed:
            self.closed = True
            for fd in (self.req_w, self.resp_r, self.out_r, self.err_r):
                os.close(fd)


class Worker:
    """One fork server and the tools it runs, one `run` at a time (the pool gives each thread its own)."""

    def __init__(self, isolation: str, dedicated_uids: bool, bpf: bytes | None, tmp_mb: int = 64) -> None:
        self.isolation = isolation
        self.uid_base, self._uid_lock = claim_uid_block() if dedicated_uids else (None, None)
        self.workdir: str | None = None
        self.tool: _ToolProcess | None = None
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
        self.tool = _ToolProcess(*host_ends)
        if not reply.get("ok") or "pid" not in reply:
            self.broken = True
            raise WorkerBroken(f"fork server could not recycle a tool: {reply.get('error')}")
        return reply

    def _fresh_tool(self, limits: Limits, calls: int, load: dict, cancel: Cancel | None) -> _ToolProcess:
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
    ) -> tuple[_ToolProcess, str, Any]:
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
                return tool, "bad", why

    @staticmethod
    def _death(reply: dict, what: str) -> tuple[str, str]:
        sig, code = reply.get("signal"), reply.get("exit")
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            return SIGNAL_STATUS.get(sig, "error"), f"tool process killed by {name}{SIGNAL_CAUSE.get(sig, '')} {what}"
        return "error", f"tool process exited with code {code} {what}"

    def _result(self, tool: _ToolProcess, kind: str, msg: Any, seconds: float) -> Result:
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
        return Result("error", None, msg, tool.out.take(), tool.err.take(), seconds)

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
            if kind == "died":  # the server's death took the tool along: not the tool's doing, but not rerun
                res.status, res.error = "error", f"the sandbox worker failed {what} (not retried): {exc}"
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
