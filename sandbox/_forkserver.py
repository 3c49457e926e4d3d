"""The fork server that runs inside each sandbox worker; the tool process is forked from it.

One file on purpose, though over 400 lines: under `python -I` neither this script's directory nor site-packages
is on sys.path, so it could import no sibling module.

Runs as a plain script (`python -I -B _forkserver.py FD`) inside bubblewrap ("strict") or as a bare
child ("process"), so it imports only the standard library. It speaks to the host over a SEQPACKET
control socket (FD): the host sends pipes with SCM_RIGHTS, the server forks a tool process that drops
to the worker's unprivileged uid, applies rlimits and a seccomp filter, loads the tool source once, then
answers calls over those pipes. The server never reads tool output; it only forks, kills and reaps
(docs/architecture.md, "Sandbox": one process per tool, whole tree killed and reaped).
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import ctypes
import errno
import fcntl
import gc
import io
import itertools
import json
import math
import os
import re
import resource
import shutil
import signal
import socket
import struct
import sys
import time
import traceback

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_SECCOMP = 22
PR_CAPBSET_READ = 23
PR_CAPBSET_DROP = 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
SECCOMP_MODE_FILTER = 2
CLONE_NEWNET = 0x40000000
REQ_FD, RESP_FD = 3, 4
HEADER = struct.Struct(">I")
TOOL_PID = -1
UID_BLOCK = 1 << 16  # uids per worker; runs cycle through them
ERROR_CHARS = 2000
LIMIT_ERRNOS = {errno.EAGAIN, errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM}
# imported once in the server, so tools that use them pay no import. Not threading (nor subprocess, which
# imports it): its after-fork handler would run in every tool process, about 70 page faults and 0.3-0.4 ms of
# CPU per run, more than the 0.45 ms (2.4 ms for subprocess) a tool that imports it pays
PRELOAD = (
    "math", "re", "json", "itertools", "collections", "functools", "fractions", "decimal", "string",
    "random", "statistics", "heapq", "bisect", "datetime", "operator", "typing", "dataclasses", "copy",
    "cmath",
)  # fmt: skip

_libc = ctypes.CDLL(None, use_errno=True)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _prctl(option: int, arg: int | ctypes.c_void_p = 0) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def load_seccomp(bpf: bytes) -> None:
    """Install a classic-BPF seccomp program built on the host by libseccomp (sandbox/seccomp.py)."""
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter: {os.strerror(err)}")


# ---------------------------------------------------------------- framing (shared with the host)


# Strict JSON, the one codec of every frame both ways (host and tool, calls and replies): what it cannot carry
# (not JSON data, NaN, Infinity, a lone surrogate, deeper nesting than MAX_DEPTH) is a FrameError.
MAX_DEPTH = 100  # containers a value may nest; a frame wraps it in one more
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_NOT_FINITE = "NaN and Infinity are not JSON"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class FrameError(ValueError):
    """A value that cannot cross a frame as strict JSON; the message never echoes the value."""


class TooDeep(FrameError):
    """Nested deeper than MAX_DEPTH: for a tool's return value that is a "limit", like its size."""


def _check_depth(data: bytes, wrappers: int) -> None:
    """Bound the nesting of JSON text without recursing, so no depth can exhaust any stack that parses it."""
    limit = MAX_DEPTH + wrappers
    if data.count(b"[") + data.count(b"{") <= limit:
        return
    steps = _JSON_STRING.sub(b"", data).translate(_BRACKET_STEPS, _NOT_BRACKETS)
    if max(itertools.accumulate(memoryview(steps).cast("b")), default=0) > limit:
        raise TooDeep(f"JSON nested more than {MAX_DEPTH} levels deep")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses as Infinity
        raise FrameError(_NOT_FINITE)
    return value


def _no_constant(name: str) -> None:
    raise FrameError(_NOT_FINITE)


def dumps(obj: object, wrappers: int = 0) -> bytes:
    """`obj` as strict JSON in UTF-8; `wrappers` frame levels around a value do not count to its depth."""
    try:
        data = json.dumps(obj, ensure_ascii=False, allow_nan=False).encode()
    except RecursionError:
        raise TooDeep(f"JSON nested more than {MAX_DEPTH} levels deep") from None
    except UnicodeEncodeError:
        raise FrameError("a string holds a lone surrogate, which UTF-8 cannot encode") from None
    except (TypeError, ValueError) as exc:
        text = str(exc)
        raise FrameError(_NOT_FINITE if text.startswith("Out of range float") else _clean(text)) from None
    _check_depth(data, wrappers)
    return data


def loads(data: bytes, wrappers: int = 0) -> object:
    """Parse what `dumps` makes and refuse anything else; depth is checked before parsing."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise FrameError("not UTF-8") from None
    _check_depth(data, wrappers)
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:  # within the depth cap, but the caller's own stack is nearly exhausted
        raise TooDeep(f"JSON nested too deeply for the caller's stack ({MAX_DEPTH} levels at most)") from None
    except FrameError:
        raise
    except ValueError as exc:
        raise FrameError(f"not JSON ({_clean(str(exc))})") from None
    if _SURROGATE_ESCAPE.search(data):
        dumps(value, wrappers)  # exact check: an escaped lone surrogate decodes to a str UTF-8 cannot hold
    return value


def pack(obj: object) -> bytes:
    data = dumps(obj, wrappers=1)
    return HEADER.pack(len(data)) + data


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, n - got)
        if not b:
            return None
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_frame(fd: int) -> object | None:
    head = _read_exact(fd, HEADER.size)
    if head is None:
        return None
    body = _read_exact(fd, HEADER.unpack(head)[0])
    return None if body is None else loads(body, wrappers=1)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# ---------------------------------------------------------------- inside the tool process


def _classify(exc: BaseException) -> str:
    """A resource limit surfaced as an exception is "limit"; anything else the tool raised is "error"."""
    if isinstance(exc, MemoryError):
        return "limit"
    if isinstance(exc, OSError) and exc.errno in LIMIT_ERRNOS:
        return "limit"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "limit"
    return "error"


def _clean(text: str) -> str:
    """Text that UTF-8 can carry: lone surrogates become backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode()


def _describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:
        text = f"{type(exc).__name__}: <unprintable>"
    return _clean(text[:ERROR_CHARS])


def _encode_value(value: object, max_bytes: int) -> tuple[str, object, str | None]:
    """The value if strict JSON can carry it, else its repr (sets, objects, NaN, lone surrogates); nested
    deeper than MAX_DEPTH or over max_bytes is a "limit" (a huge return cannot swamp the host)."""
    try:
        size = len(dumps(value))
    except TooDeep as exc:
        return "limit", None, f"return value is {exc} (the sandbox's cap)"
    except BaseException:
        try:
            value = _clean(repr(value))
        except BaseException as exc:
            value = f"<unrepresentable {type(value).__name__}: {_describe(exc)}>"
        try:
            size = len(dumps(value))
        except BaseException as exc:
            return "error", None, _describe(exc)
    if size > max_bytes:
        return "limit", None, f"return value is {size} bytes, over the {max_bytes}-byte cap (Limits.max_return_bytes)"
    return "ok", value, None


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def _tool_std() -> tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]:
    """A tool process's sys.stdin/stdout/stderr, over fds 0, 1 and 2 (which it points at /dev/null and its two
    pipes). Made once, in the server, which never uses them: every tool process inherits them unwritten."""
    return (
        io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"),
        io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        ),
    )


def _apply_rlimits(lim: dict) -> None:
    mb = 1024 * 1024
    pairs = [
        (resource.RLIMIT_AS, lim["memory_mb"] * mb),
        (resource.RLIMIT_CPU, lim["cpu_s"]),
        (resource.RLIMIT_NPROC, lim["nproc"]),
        (resource.RLIMIT_FSIZE, lim["fsize_mb"] * mb),
        (resource.RLIMIT_NOFILE, lim["nofile"]),
        (resource.RLIMIT_CORE, 0),
    ]
    for kind, value in pairs:
        if value is not None:
            # CPU: SIGXCPU at the soft limit names the cause; the hard limit's SIGKILL one second later is the backstop
            resource.setrlimit(kind, (value, value + 1 if kind == resource.RLIMIT_CPU else value))


def _run_script(msg: dict) -> None:
    """SandboxFusion-style program: stdin from the request, exit code as the value."""
    with open("stdin", "w") as fh:
        fh.write(msg.get("stdin") or "")
    fd = os.open("stdin", os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    os.unlink("stdin")
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.argv = ["main.py"]
    t0 = time.perf_counter()
    code = 0
    try:
        exec(compile(msg["code"], "main.py", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    _reply({"status": "ok", "value": code, "error": None, "seconds": time.perf_counter() - t0})


def _prewarm() -> None:
    """Take the copy-on-write page faults of a fresh fork now, while idle, not on the first call's clock."""
    namespace: dict = {"__builtins__": builtins}
    exec(compile("def f(x):\n    return {'x': x}\n", "<warm>", "exec"), namespace)
    json.loads(json.dumps(namespace["f"]([1, "a", None, 2.5])))
    pack({"status": "ok", "value": None, "error": None, "seconds": 0.0})


def _reply(msg: dict) -> None:
    """Answer the host; a process the tool forked is a copy of this loop and must stay silent."""
    if os.getpid() != TOOL_PID:
        os._exit(0)
    _flush_std()
    write_all(RESP_FD, pack(msg))


def tool_main() -> None:
    """Load the tool once, then answer one frame per call until the host closes the request pipe."""
    global TOOL_PID
    TOOL_PID = os.getpid()
    msg = read_frame(REQ_FD)
    if msg is None:
        return
    _apply_rlimits(msg["limits"])
    if msg["kind"] == "script":
        _run_script(msg)
        return
    max_bytes = msg["max_return_bytes"]
    t0 = time.perf_counter()
    namespace: dict = {"__name__": "__tool__", "__builtins__": builtins}
    status, error, fn = "ok", None, None
    try:
        exec(compile(msg["code"], "<tool>", "exec"), namespace)
        fn = namespace.get(msg["func"])
        if not callable(fn):
            status, error = "error", f"NameError: the tool defines no function named {msg['func']!r}"
    except BaseException as exc:
        status, error = _classify(exc), _describe(exc)
    _reply({"status": status, "error": error, "seconds": time.perf_counter() - t0})
    if status != "ok":
        return
    while (call := read_frame(REQ_FD)) is not None:
        args = call["args"]
        t0 = time.perf_counter()
        value, error = None, None
        try:
            if isinstance(args, dict):
                out = fn(**args)
            elif isinstance(args, list):
                out = fn(*args)
            else:
                out = fn(args)
            status, value, error = _encode_value(out, max_bytes)
        except BaseException as exc:
            status, error = _classify(exc), _describe(exc)
        _flush_std()
        _reply({"status": status, "value": value, "error": error, "seconds": time.perf_counter() - t0})


# ---------------------------------------------------------------- the server


def uid_block_pids(uid_base: int) -> list[int]:
    """Every process whose real uid lies in the block [uid_base, uid_base + UID_BLOCK), from /proc."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        if 0 <= int(line.split()[1]) - uid_base < UID_BLOCK:
                            pids.append(int(name))
                        break
        except OSError:
            continue
    return pids


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def _bounding_set() -> list[int]:
    """The capabilities still in this process's bounding set (under bubblewrap, only the server's few)."""
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    return [cap for cap in range(last + 1) if _libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1]


_CAP_HEADER = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
_NO_CAPS = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable for both 32-bit halves: all zero


def _empty_bounding_set() -> None:
    """Empty this process's capability bounding set (it keeps its own capabilities: the set only bounds what
    an execve could grant). The server never execs, so it does this once and every tool process inherits it."""
    for cap in _bounding_set():
        _prctl(PR_CAPBSET_DROP, cap)
    if left := _bounding_set():
        raise OSError(errno.EPERM, f"capabilities {left} are still in the bounding set")


def _drop_privileges(uid: int) -> None:
    """Switch to the tool's uid, then clear every capability setuid leaves (the bounding set is already empty,
    inherited from the server)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if _libc.capset(ctypes.byref(_CAP_HEADER), _NO_CAPS) != 0:
        raise OSError(ctypes.get_errno(), "capset")


# The control messages of every run (the host's recycle, the server's answer) skip the json module: between two
# forks the server re-faults every page it writes, and encoding and decoding with json wrote about 60 of them
RECYCLE = b'{"op": "recycle"}'  # what the host sends; the same bytes json.dumps({"op": "recycle"}) makes
_RECYCLE = {"op": "recycle"}
_RECYCLED = frozenset({"ok", "exit", "signal", "pid"})


def _encode_reply(reply: dict) -> bytes:
    """`reply` as JSON: by hand for a successful recycle (ints and None only), else with the json module."""
    if reply.keys() == _RECYCLED and reply["ok"] is True and type(reply["pid"]) is int:
        exit_code, sig = reply["exit"], reply["signal"]
        if (exit_code is None or type(exit_code) is int) and (sig is None or type(sig) is int):
            return b'{"ok": true, "exit": %s, "signal": %s, "pid": %d}' % (
                b"null" if exit_code is None else b"%d" % exit_code,
                b"null" if sig is None else b"%d" % sig,
                reply["pid"],
            )
    return json.dumps(reply).encode()


class ForkServer:
    """Forks, kills and reaps tool processes for one worker; one tool process at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.child: int | None = None
        self.cwd: str | None = None
        self.seq = 0
        self.uid_base: int | None = None

    def init(self, cfg: dict) -> dict:
        self.uid_base = cfg["uid_base"]  # tool processes get uid_base + seq: a fresh uid for every run
        self.uid: int | None = None
        self.workdir_root = cfg["workdir_root"]
        if self.uid_base is not None:
            _empty_bounding_set()
        # alone in its own pid namespace (strict, under bubblewrap's init), every other process but init is a
        # tool or its descendant: kill(-1) then reaches them all at once, with no /proc scan
        self.own_pid_ns = bool(cfg["own_pid_ns"]) and os.getpid() <= 16 and os.getppid() == 1
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        net = cfg["unshare_net"] and _libc.unshare(CLONE_NEWNET) == 0
        with open("/proc/net/dev") as fh:
            ifaces = sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])
        for name in PRELOAD:
            __import__(name)
        self.std = _tool_std()
        os.environ.clear()  # the tools' environment; spawn() adds the run's HOME and TMPDIR before each fork
        os.environ.update(PATH="/usr/bin:/bin", LANG="C.UTF-8")
        gc.freeze()  # every tool process inherits these objects: no collection in it walks (and copies) them
        hello = {
            "ok": True,
            "uid": os.geteuid(),
            "can_setuid": os.geteuid() == 0 and self.uid_base is not None,
            "interfaces": ifaces,
            "unshared_net": bool(net),
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "unreadable": self._probe_python(),
        }
        if cfg["bpf"]:
            # once, here: every tool process forked later inherits the filter (and no_new_privs) before it
            # runs anything of its own, and none pays for compiling it; the server needs nothing it denies
            load_seccomp(base64.b64decode(cfg["bpf"]))
        return hello

    def _probe_python(self) -> str | None:
        """The first interpreter path a tool's uid cannot read (it could import nothing new), or None."""
        if self.uid_base is None:
            return None
        paths = [os.path.dirname(os.__file__), os.path.dirname(json.__file__)]
        paths += [os.path.dirname(m.__file__) for m in (ctypes, socket) if getattr(m, "__file__", None)]
        paths += [p for p in sys.path if os.path.isdir(p)]
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            bad = b""
            try:
                _drop_privileges(self.uid_base)
                for path in paths:
                    try:
                        os.listdir(path)
                    except OSError:
                        bad = path.encode()
                        break
            except BaseException as exc:
                bad = repr(exc).encode()
            os.write(write, bad)
            os._exit(0)
        os.close(write)
        bad = os.read(read, 4096).decode()
        os.close(read)
        os.waitpid(pid, 0)
        return bad or None

    def spawn(self, fds: list[int]) -> dict:
        """Pre-fork the next tool process; it waits, already confined, for its load frame."""
        self.seq += 1
        self.cwd = os.path.join(self.workdir_root, f"run{self.seq}")
        if self.uid_base is not None:
            self.uid = self.uid_base + self.seq % UID_BLOCK
        os.mkdir(self.cwd, 0o700)
        if self.uid is not None:
            os.chown(self.cwd, self.uid, self.uid)
        # here, not in the child: whatever the server writes before the fork costs the child no page faults
        os.environ["HOME"] = os.environ["TMPDIR"] = self.cwd
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            self._child(fds, server)
        for fd in fds:
            os.close(fd)
        self.child = pid
        return {"ok": True, "pid": pid}

    def _child(self, fds: list[int], server: int) -> None:
        try:
            os.setsid()
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]  # above 0..4, so dup2 clobbers none
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for target, fd in zip((REQ_FD, RESP_FD, 1, 2), high, strict=True):
                os.dup2(fd, target)
            os.closerange(5, 1 << 20)
            if self.uid is not None:
                _drop_privileges(self.uid)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid switch, which would clear it
            if os.getppid() != server:  # the server died before that: nothing would reap this process
                os._exit(70)
            os.chdir(self.cwd)
            sys.stdin, sys.stdout, sys.stderr = self.std
            _prewarm()
            tool_main()
            _flush_std()
        except BaseException:
            try:
                traceback.print_exc()
                _flush_std()
            finally:
                os._exit(70)
        os._exit(0)

    def reap(self) -> dict:
        """SIGKILL every process of the tools' uids (in its own pid namespace: every process but init), reap
        them all, remove the working directory."""
        exit_status = None
        deadline = time.monotonic() + 10.0
        if self.uid_base is None and self.child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.child, signal.SIGKILL)
        while True:
            if self.own_pid_ns:
                # atomic against fork: a child is either listed (and killed) or its fork fails
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)
                victims = []
            else:
                victims = uid_block_pids(self.uid_base) if self.uid_base is not None else []
            for pid in victims:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            running = False
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    running = True
                    break
                if pid == self.child:
                    exit_status = status
                    self.child = None
            if not running if self.own_pid_ns else not victims and self.child is None:
                break
            if time.monotonic() > deadline:
                return {"ok": False, "error": f"tool processes survived SIGKILL for 10 s: {victims}"}
            time.sleep(0.0002)
        if self.cwd is not None:
            try:
                os.rmdir(self.cwd)  # most tools write nothing: one syscall
            except OSError:
                shutil.rmtree(self.cwd, ignore_errors=True)
            self.cwd = None
        if exit_status is None:
            return {"ok": True, "exit": None, "signal": None}
        if os.WIFSIGNALED(exit_status):
            return {"ok": True, "exit": None, "signal": os.WTERMSIG(exit_status)}
        return {"ok": True, "exit": os.WEXITSTATUS(exit_status), "signal": None}

    def serve(self) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 20, 8)
            except OSError:
                return
            if not data:
                return
            msg = _RECYCLE if data == RECYCLE else json.loads(data)
            try:
                if msg["op"] == "init":
                    reply = self.init(msg)
                elif msg["op"] == "recycle":
                    reply = self.reap()
                    if reply["ok"] and fds:
                        reply.update(self.spawn(fds))
                    else:
                        for fd in fds:
                            os.close(fd)
                else:
                    reply = {"ok": False, "error": f"unknown op {msg['op']!r}"}
            except Exception as exc:
                reply = {"ok": False, "error": _describe(exc)}
            try:
                self.sock.send(_encode_reply(reply))
            except OSError:
                return


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    ForkServer(sock).serve()


if __name__ == "__main__":
    main()
