"""The hostile corpus: each tool attacks the strict sandbox one way; each test asserts the exact containment.

Real processes, real kernel limits, a real TCP server on 127.0.0.1; nothing about the OS is mocked.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from sandbox import Limits, Sandbox, run_pure

from .conftest import fork_server_killer, mark

LIMITS = Limits(timeout_s=1.5, memory_mb=256, nproc=16, nofile=32, fsize_mb=8, output_bytes=4096)
SECRET = f"s3cret-{uuid.uuid4().hex}"
NORMAL = "def solve(question):\n    return {'answer': question[::-1], 'n': len(question)}\n"


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _uid_processes(uid: int) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]


def _leftovers(sb: Sandbox, stdout: str) -> list[psutil.Process]:
    """Processes still running as the uid the tool reported (`uid=N` on its stdout) once clean-up is done."""
    uid = int(stdout.split("uid=")[1].split()[0])
    assert any(w.owns_uid(uid) for w in sb.workers)
    assert sb.quiesce()
    return _uid_processes(uid)


SHOW_UID = "import os\nprint(f'uid={os.getuid()}', flush=True)\n"


@pytest.fixture(scope="module")
def sb():
    os.environ["SMITH_SANDBOX_TEST_SECRET"] = SECRET  # the parent holds a secret; no tool may see it
    with Sandbox(isolation="strict", workers=2) as box:
        box.run(NORMAL, "solve", [{"question": "warm"}])
        box.quiesce()
        yield box
    del os.environ["SMITH_SANDBOX_TEST_SECRET"]


@pytest.fixture(scope="module")
def baseline(sb):
    """Descriptors, server processes and children of this test process before the corpus runs."""
    sb.quiesce()
    return {"fds": _fds(), "servers": {w.proc.pid for w in sb.workers}, "children": _children()}


def _children() -> int:
    return len(psutil.Process().children(recursive=True))


def run1(sb: Sandbox, code: str, args: object = None, limits: Limits = LIMITS, func: str = "tool"):
    [res] = sb.run(code, func, [args if args is not None else {}], limits=limits)
    return res


# ---------------------------------------------------------------- time


def test_infinite_loop_times_out(sb, baseline):
    res = run1(sb, "def tool():\n    while True:\n        pass\n")
    assert res.status == "timeout" and res.value is None
    assert 1.4 < res.seconds < 10


def test_sleep_times_out(sb, baseline):
    res = run1(sb, "import time\ndef tool():\n    time.sleep(600)\n")
    assert res.status == "timeout"


def test_ignoring_sigterm_does_not_help(sb, baseline):
    code = SHOW_UID + "import signal\ndef tool():\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    while 1: pass"
    res = run1(sb, code)
    assert res.status == "timeout"
    assert _leftovers(sb, res.stdout) == []


def test_load_time_infinite_loop_times_out_every_call(sb, baseline):
    results = sb.run("while True:\n    pass\n", "tool", [{}, {}], limits=LIMITS)
    assert [r.status for r in results] == ["timeout", "timeout"]
    assert all("loading the tool failed" in r.error for r in results)


# ---------------------------------------------------------------- memory, processes, threads, stack


def test_memory_bomb_hits_the_address_space_limit(sb, baseline):
    res = run1(sb, "def tool():\n    return len(bytearray(4 * 1024 ** 3))\n")
    assert res.status == "limit" and res.error.startswith("MemoryError")


def test_growing_memory_bomb_hits_the_limit(sb, baseline):
    code = "def tool():\n    keep = []\n    while True:\n        keep.append(bytearray(16 * 1024 * 1024))\n"
    res = run1(sb, code)
    assert res.status == "limit" and res.error.startswith("MemoryError")


def test_fork_bomb_hits_the_process_limit(sb, baseline):
    res = run1(sb, SHOW_UID + "def tool():\n    while True:\n        os.fork()\n")
    assert res.status == "limit"
    assert "Resource temporarily unavailable" in res.error
    assert _leftovers(sb, res.stdout) == []


def test_thread_bomb_hits_the_limit(sb, baseline):
    code = (
        "import threading, time\n"
        "def tool():\n"
        "    while True:\n"
        "        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    )
    res = run1(sb, code)
    assert res.status == "limit" and "can't start new thread" in res.error


def test_recursion_bomb_is_a_recursion_error(sb, baseline):
    res = run1(sb, "def tool(n=0):\n    return tool(n + 1)\n")
    assert res.status == "error" and res.error.startswith("RecursionError")


def test_c_stack_overflow_kills_only_the_tool(sb, baseline):
    code = (
        "import json, sys\n"
        "sys.setrecursionlimit(10**8)\n"
        "def tool():\n"
        "    x = []\n"
        "    for _ in range(10**5):\n"
        "        x = [x]\n"
        "    return json.dumps(x)\n"  # C recursion past the 8 MB stack
    )
    res = run1(sb, code)
    assert res.status == "error" and "SIGSEGV" in res.error


MEMFD_TOOL = """
import os
def tool():
    held, files = 0, []
    try:
        while held < 512 * 2**20:  # 64 memory-backed files of 8 MiB: nothing counts them against memory_mb
            files.append(os.memfd_create("hold"))
            for _ in range(8):
                held += os.write(files[-1], b"x" * 2**20)
    except OSError as exc:
        return [held >> 20, exc.errno]
    return [held >> 20, 0]
"""


def test_memory_backed_files_cannot_hold_memory_outside_the_limit(sb, baseline):
    """memfd files count against neither RLIMIT_AS nor the private tmpfs: one process at memory_mb=256 held
    512 MiB in them (nofile x fsize_mb per process). The seccomp filter refuses memfd_create outright."""
    res = run1(sb, MEMFD_TOOL, limits=Limits(timeout_s=5, memory_mb=256, nofile=80, fsize_mb=8))
    assert res.status == "ok" and res.value == [0, errno.EPERM]


# ---------------------------------------------------------------- files


def test_writing_a_gigabyte_hits_the_file_size_limit(sb, baseline):
    code = (
        "def tool():\n"
        "    chunk = b'x' * (1 << 20)\n"
        "    with open('big', 'wb') as fh:\n"
        "        for _ in range(1024):\n"
        "            fh.write(chunk)\n"
    )
    res = run1(sb, code)
    assert res.status == "limit" and "File too large" in res.error


def test_filling_the_private_tmpfs_hits_its_size(sb, baseline):
    code = (
        "def tool():\n"
        "    chunk = b'x' * (1 << 20)\n"
        "    for i in range(1000):\n"
        "        with open(f'f{i}', 'wb') as fh:\n"
        "            for _ in range(7):\n"
        "                fh.write(chunk)\n"
    )
    res = run1(sb, code)
    assert res.status == "limit" and "No space left on device" in res.error


def test_writing_outside_the_working_dir_reaches_no_host_path(sb, baseline, tmp_path):
    name = f"sandbox-marker-{uuid.uuid4().hex}"
    targets = [f"/tmp/{name}", str(Path.home() / name), str(tmp_path / name), f"/work/{name}", f"/{name}"]
    code = (
        "import os\n"
        "def tool(paths):\n"
        "    done = []\n"
        "    name = os.path.basename(paths[0])\n"
        "    for p in paths + [os.path.expanduser('~/' + name), '../' + name]:\n"
        "        try:\n"
        "            with open(p, 'w') as fh:\n"
        "                fh.write('pwned')\n"
        "            done.append(os.path.realpath(p))\n"
        "        except OSError as exc:\n"
        "            pass\n"
        "    return done\n"
    )
    res = run1(sb, code, {"paths": targets})
    assert res.status == "ok"
    # the only writable place is the tool's own working directory (~ points there), which dies with the run
    assert all(p.startswith("/tmp/run") for p in res.value), res.value
    for target in targets:
        assert not Path(target).exists()
    assert not list(Path("/tmp").glob("run*/" + name))


def test_tool_cannot_modify_the_sandbox_code_or_python(sb, baseline):
    code = (
        "import os, sys\n"
        "def tool():\n"
        "    out = []\n"
        "    for p in ['/opt/sandbox/forkserver.py', os.__file__, sys.executable, '/usr/bin/env']:\n"
        "        try:\n"
        "            open(p, 'a').close()\n"
        "            out.append(p)\n"
        "        except OSError as exc:\n"
        "            out.append(exc.errno)\n"
        "    return out\n"
    )
    res = run1(sb, code)
    assert res.status == "ok"
    assert all(v in (errno.EROFS, errno.EACCES) for v in res.value), res.value


def test_parent_files_are_invisible(sb, baseline, tmp_path):
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET)
    repo_file = Path(__file__).resolve()
    code = (
        "def tool(paths):\n"
        "    out = {}\n"
        "    for p in paths:\n"
        "        try:\n"
        "            out[p] = open(p).read()[:100]\n"
        "        except OSError as exc:\n"
        "            out[p] = type(exc).__name__\n"
        "    return out\n"
    )
    paths = [str(secret_file), str(repo_file), "/etc/shadow", "/etc/passwd", "/root/.bash_history"]
    res = run1(sb, code, {"paths": paths})
    assert res.status == "ok"
    assert res.value == {p: "FileNotFoundError" for p in paths}


def test_too_many_open_files_hits_the_limit(sb, baseline):
    res = run1(sb, "def tool():\n    keep = []\n    while True:\n        keep.append(open('/dev/null'))\n")
    assert res.status == "limit" and "Too many open files" in res.error


# ---------------------------------------------------------------- secrets, network, privileges


def test_environment_secrets_do_not_reach_the_tool(sb, baseline):
    assert os.environ["SMITH_SANDBOX_TEST_SECRET"] == SECRET
    code = (
        "import os, glob\n"
        "def tool():\n"
        "    seen = []\n"
        "    for path in glob.glob('/proc/*/environ'):\n"
        "        try:\n"
        "            seen.append(open(path, 'rb').read().decode(errors='replace'))\n"
        "        except OSError:\n"
        "            pass\n"
        "    return {'env': dict(os.environ), 'proc': seen}\n"
    )
    res = run1(sb, code)
    assert res.status == "ok"
    env = res.value["env"]
    assert sorted(env) == ["HOME", "LANG", "PATH", "TMPDIR"] and env["HOME"] == env["TMPDIR"]
    assert env["PATH"] == "/usr/bin:/bin" and env["HOME"].startswith("/tmp/run")
    assert not any(SECRET in text for text in res.value["proc"])  # (tools are not even dumpable: none readable)


@pytest.fixture
def tcp_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    arrived: list[tuple] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
                arrived.append(addr)
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield srv.getsockname()[1], arrived
    stop.set()
    thread.join()
    srv.close()


def test_no_tcp_connection_reaches_the_host(sb, baseline, tcp_server):
    port, arrived = tcp_server
    probe = socket.create_connection(("127.0.0.1", port), timeout=2)  # the server works from the host
    probe.close()
    code = "import socket\ndef tool(port):\n    socket.create_connection(('127.0.0.1', port), timeout=1).send(b'hi')\n"
    res = run1(sb, code, {"port": port})
    assert res.status == "error" and "Address family not supported" in res.error
    threading.Event().wait(0.3)
    assert len(arrived) == 1  # only the host's own probe


def test_dns_lookups_fail(sb, baseline):
    res = run1(sb, "import socket\ndef tool():\n    return socket.getaddrinfo('example.com', 80)\n")
    assert res.status == "error" and res.error.startswith("gaierror")


def test_a_spawned_shell_is_confined_and_killed(sb, baseline):
    code = SHOW_UID + (
        "import subprocess\n"
        "def tool():\n"
        "    rc = os.system('echo $SMITH_SANDBOX_TEST_SECRET > leak.txt; sleep 600 &')\n"
        "    out = subprocess.run(['sh', '-c', 'id -u; cat leak.txt; ls /'], capture_output=True, text=True)\n"
        "    return {'rc': rc, 'out': out.stdout.split(), 'uid': os.getuid()}\n"
    )
    res = run1(sb, code)
    assert res.status == "ok"
    uid, *rest = res.value["out"]
    assert int(uid) == res.value["uid"] and any(w.owns_uid(int(uid)) for w in sb.workers)
    assert SECRET not in rest and not {"home", "var", "srv", "boot", "mnt"} & set(rest)
    assert _leftovers(sb, res.stdout) == []  # the backgrounded `sleep 600` died with the run


def test_ctypes_segfault_kills_only_that_call(sb, baseline):
    code = "import ctypes\ndef tool(crash):\n    return ctypes.string_at(0) if crash else 'fine'\n"
    results = sb.run(code, "tool", [{"crash": True}, {"crash": False}], limits=LIMITS)
    assert results[0].status == "error" and "SIGSEGV" in results[0].error
    assert results[1].status == "ok" and results[1].value == "fine"


def test_os_exit_inside_a_call(sb, baseline):
    code = "import os\ndef tool(code):\n    if code is not None:\n        os._exit(code)\n    return 'alive'\n"
    results = sb.run(code, "tool", [{"code": 3}, {"code": None}], limits=LIMITS)
    assert results[0].status == "error" and "exited with code 3" in results[0].error
    assert results[1].status == "ok" and results[1].value == "alive"


def test_sys_exit_inside_a_call(sb, baseline):
    code = "import sys\ndef tool(n):\n    if n:\n        sys.exit(n)\n    return n\n"
    results = sb.run(code, "tool", [{"n": 2}, {"n": 0}], limits=LIMITS)
    assert results[0].status == "error" and results[0].error == "SystemExit: 2"
    assert results[1].status == "ok" and results[1].value == 0


def test_killing_the_parent_is_refused(sb, baseline):
    code = (
        "import os, signal\n"
        "def tool():\n"
        "    out = []\n"
        "    for pid in (os.getppid(), 1):\n"
        "        try:\n"
        "            os.kill(pid, signal.SIGKILL)\n"
        "            out.append('killed')\n"
        "        except PermissionError:\n"
        "            out.append('EPERM')\n"
        "    return out\n"
    )
    res = run1(sb, code)
    assert res.status == "ok" and res.value == ["EPERM", "EPERM"]
    assert {w.proc.pid for w in sb.workers} == baseline["servers"]
    assert all(w.proc.poll() is None for w in sb.workers)


def test_privileges_are_gone(sb, baseline):
    code = (
        "import ctypes, os\n"
        "def tool():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "    keys = ('CapEff', 'CapPrm', 'CapInh', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp')\n"
        "    out = {k: status[k].strip() for k in keys}\n"
        "    try:\n"
        "        os.setuid(0)\n"
        "        out['setuid'] = 'ok'\n"
        "    except PermissionError:\n"
        "        out['setuid'] = 'EPERM'\n"
        "    out['unshare_user'] = ctypes.get_errno() if libc.unshare(0x10000000) else 0\n"
        "    out['ptrace'] = ctypes.get_errno() if libc.ptrace(16, os.getppid(), 0, 0) else 0\n"
        "    return out\n"
    )
    res = run1(sb, code)
    assert res.status == "ok"
    zero = "0000000000000000"
    assert res.value == {
        "CapEff": zero, "CapPrm": zero, "CapInh": zero, "CapBnd": zero, "CapAmb": zero,
        "NoNewPrivs": "1", "Seccomp": "2",
        "setuid": "EPERM", "unshare_user": errno.EPERM, "ptrace": errno.EPERM,
    }  # fmt: skip


# ---------------------------------------------------------------- things that outlive a call


def test_daemon_thread_and_child_die_with_the_run(sb, baseline):
    code = SHOW_UID + (
        "import subprocess, threading, time\n"
        "def tick():\n"
        "    while True:\n"
        "        print('tick', flush=True)\n"
        "        time.sleep(0.01)\n"
        "def tool(step):\n"
        "    if step == 0:\n"
        "        threading.Thread(target=tick, daemon=True).start()\n"
        "        subprocess.Popen(['sleep', '600'])\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            time.sleep(600)\n"
        "        return 'started'\n"
        "    time.sleep(0.1)\n"
        "    return threading.active_count()\n"
    )
    results = sb.run(code, "tool", [{"step": 0}, {"step": 1}], limits=LIMITS)
    assert results[0].value == "started" and results[1].value == 2  # calls of one run share state
    assert "tick" in results[1].stdout
    assert _leftovers(sb, results[0].stdout) == []
    res = run1(sb, "import threading\ndef tool():\n    return threading.active_count()\n")
    assert res.value == 1 and "tick" not in res.stdout  # nothing survives into another run


IPC_KEY, MQ_NAME, SHM_NAME = 0x5EED, b"/smith-corpus-q", "/dev/shm/smith-corpus-shm"
IPC_TOOL = f"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p

def result(rc):
    return rc if rc >= 0 else -ctypes.get_errno()

def tool(make):
    out = {{}}
    if make:  # run A: an object of every kind, world-readable, the secret in shared memory
        sid = result(libc.shmget({IPC_KEY}, 1 << 20, 0o1666))
        if sid >= 0:
            ctypes.memmove(libc.shmat(sid, None, 0), b"{SECRET}", {len(SECRET)})
        out["shm"] = sid
        out["msg"] = result(libc.msgget({IPC_KEY}, 0o1666))
        out["sem"] = result(libc.semget({IPC_KEY}, 1, 0o1666))
        out["mq"] = result(libc.mq_open({MQ_NAME!r}, os.O_CREAT | os.O_RDWR, 0o666, None))
    else:  # run B, another uid: look each of them up
        sid = result(libc.shmget({IPC_KEY}, 0, 0))
        out["shm"] = ctypes.string_at(libc.shmat(sid, None, 0), {len(SECRET)}).decode() if sid >= 0 else sid
        out["msg"] = result(libc.msgget({IPC_KEY}, 0))
        out["sem"] = result(libc.semget({IPC_KEY}, 0, 0))
        out["mq"] = result(libc.mq_open({MQ_NAME!r}, os.O_RDONLY))
    try:  # POSIX shm_open and sem_open are files in /dev/shm
        os.close(os.open({SHM_NAME!r}, (os.O_CREAT | os.O_RDWR) if make else os.O_RDONLY, 0o666))
        out["dev_shm"] = 0
    except OSError as exc:
        out["dev_shm"] = -exc.errno
    return out
"""


def _sysv_objects(worker_pid: int) -> str:
    """The System V objects of a worker's IPC namespace, listed from the host (nsenter, as root)."""
    tree = [psutil.Process(worker_pid), *psutil.Process(worker_pid).children(recursive=True)]
    own = os.readlink("/proc/self/ns/ipc")
    [ns] = {os.readlink(f"/proc/{p.pid}/ns/ipc") for p in tree} - {own}  # bubblewrap's namespace
    pid = next(p.pid for p in tree if os.readlink(f"/proc/{p.pid}/ns/ipc") == ns)
    files = ["/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"]
    argv = ["nsenter", f"--ipc=/proc/{pid}/ns/ipc", "tail", "-qn", "+2", *files]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_ipc_objects_cannot_carry_anything_into_the_next_run():
    """System V segments, queues and semaphores and POSIX queues live in the worker's IPC namespace, which
    every run of that worker shares: the seccomp filter refuses to create them, so none reaches a later run
    (another uid) and no segment holds memory after the run."""
    with Sandbox(isolation="strict", workers=1) as one:  # one worker: run B lands where run A ran
        [made] = one.run(IPC_TOOL, "tool", [{"make": True}], limits=LIMITS)
        assert one.quiesce()
        [found] = one.run(IPC_TOOL, "tool", [{"make": False}], limits=LIMITS)
        assert one.quiesce()
        leftovers = _sysv_objects(one.workers[0].proc.pid)
    assert made.status == "ok" and found.status == "ok"
    refused = dict.fromkeys(("shm", "msg", "sem", "mq"), -errno.EPERM)
    assert found.value == {**refused, "dev_shm": -errno.ENOENT}
    assert leftovers == ""
    assert made.value == {**refused, "dev_shm": -errno.EACCES}


# ---------------------------------------------------------------- processes killed from outside


def _tree(worker) -> list[psutil.Process]:
    return [psutil.Process(worker.proc.pid), *psutil.Process(worker.proc.pid).children(recursive=True)]


def _fork_server(worker) -> psutil.Process:
    """The worker's fork server: the process bubblewrap's init started (the tools are its children)."""
    [server] = [p for p in _tree(worker) if p.name().startswith("python") and p.parent().name() == "bwrap"]
    return server


def _preforked_tool(worker) -> psutil.Process:
    deadline = time.monotonic() + 10  # it takes its uid a moment after the fork server replies
    while True:
        procs = [p for p in _tree(worker) if worker.owns_uid(p.uids().real)]
        if len(procs) == 1 or time.monotonic() > deadline:
            [proc] = procs
            return proc
        time.sleep(0.02)


UID_TOOL = "import os\ndef tool(x):\n    return [x, os.getuid()]\n"


def test_a_killed_idle_process_never_charges_the_next_run():
    """An idle pre-forked process killed from outside (the OOM killer, an operator) never received the run:
    the next run gets a fresh process instead of `limit: killed by SIGKILL`."""
    with Sandbox(isolation="strict", workers=1) as one:
        assert one.run(UID_TOOL, "tool", [0])[0].status == "ok"
        for attempt in range(3):
            assert one.quiesce()
            victim = _preforked_tool(one.workers[0])
            uid = victim.uids().real
            victim.kill()
            while victim.status() != psutil.STATUS_ZOMBIE:  # dead, not yet reaped by its fork server
                time.sleep(0.01)
            results = one.run(UID_TOOL, "tool", [attempt, attempt + 1])
            assert [r.status for r in results] == ["ok", "ok"], results
            assert [r.value[0] for r in results] == [attempt, attempt + 1]
            assert results[0].value[1] != uid  # a fresh process, with the next uid


def test_a_dead_fork_server_is_replaced_while_calls_keep_succeeding():
    """A fork server killed while idle: calls never see SandboxUnavailable; with two workers the healthy one
    serves them, with one they wait for the replacement (a second or so, not a control timeout)."""
    for size in (2, 1):
        with Sandbox(isolation="strict", workers=size) as box:
            assert box.run(UID_TOOL, "tool", [0])[0].status == "ok"
            assert box.quiesce()
            servers = {w.proc.pid for w in box.workers}
            server = _fork_server(box.workers[0])
            idle = [server, *server.children(recursive=True)]  # its pre-forked tool dies with it (PDEATHSIG)
            server.kill()
            # "while idle": once both are gone. A call sent in the instant between the two deaths is read by a
            # dying process and, at most once, reported rather than re-run (the next test)
            psutil.wait_procs(idle, timeout=10)
            t0 = time.monotonic()
            results = [box.run(UID_TOOL, "tool", [i])[0] for i in range(8)]
            assert [(r.status, r.value and r.value[0]) for r in results] == [("ok", i) for i in range(8)], results
            assert time.monotonic() - t0 < 14  # under one control timeout (15 s): death is seen at once
            assert box.quiesce()
            assert len(box.workers) == size and {w.proc.pid for w in box.workers} != servers


def test_a_fork_server_dying_mid_call_never_runs_the_call_twice():
    """At most once: the call in flight when its fork server dies is reported (or finishes, when its process
    outlives the server), never re-run elsewhere; the calls after it, which no process read, run on a new worker."""
    code = "import os, time\ndef tool(x):\n    if x == 'slow':\n        time.sleep(3)\n    return [x, os.getuid()]\n"
    with Sandbox(isolation="strict", workers=1) as one:
        assert one.run(code, "tool", ["warm"])[0].status == "ok"
        assert one.quiesce()
        server, uid = _fork_server(one.workers[0]), _preforked_tool(one.workers[0]).uids().real
        killer = threading.Timer(1.0, server.kill)
        killer.start()
        first, *rest = one.run(code, "tool", ["slow", "a", "b"], limits=Limits(timeout_s=10))
        killer.join()
        assert [(r.status, r.value[0]) for r in rest] == [("ok", "a"), ("ok", "b")]
        if first.status == "ok":  # the process outlived its server and finished the call (not a re-run elsewhere)
            assert first.value == ["slow", uid]
        else:
            assert first.status == "fault" and "not retried" in first.error and first.seconds < 3  # not the tool's
        assert one.quiesce() and not server.is_running()


def test_run_pure_reruns_a_faulted_call_once():
    """A call whose fork server is killed mid-call is the sandbox's `fault`; `run_pure` (for pure calls) runs it
    once more, and a second fault stays a fault. Both kills are real SIGKILLs of the fork server."""
    code = f"import time\ndef tool(x):\n    if x == 'slow':\n{mark(' ' * 8)}        time.sleep(3)\n    return x\n"
    with Sandbox(isolation="strict", workers=2) as box:
        for times, status in ((1, "ok"), (2, "fault")):
            with fork_server_killer(times) as killed:
                results = run_pure(box, code, "tool", ["a", "slow", "b"], Limits(timeout_s=10))
            assert len(killed) == times
            assert [r.status for r in results] == ["ok", status, "ok"] and results[2].value == "b"
        assert "the sandbox worker failed during the call" in results[1].error
        assert box.quiesce()
        assert [r.status for r in box.run(code, "tool", ["a"])] == ["ok"]


# ---------------------------------------------------------------- output and return values


def test_stdout_flood_is_capped(sb, baseline):
    code = "def tool():\n    for _ in range(20000):\n        print('x' * 1000)\n    return 'done'\n"
    res = run1(sb, code)
    assert res.status == "ok" and res.value == "done"
    assert res.stdout == (("x" * 1000 + "\n") * 5)[:4096] + f"\n[sandbox: {20000 * 1001 - 4096} more bytes dropped]"


def test_endless_stderr_flood_times_out_capped(sb, baseline):
    code = "import sys\ndef tool():\n    while True:\n        sys.stderr.write('y' * 1000)\n"
    res = run1(sb, code)
    assert res.status == "timeout"
    assert res.stderr.startswith("y" * 4096 + "\n[sandbox: ") and res.stderr.endswith(" more bytes dropped]")


def test_non_json_return_values_come_back_as_repr(sb, baseline):
    code = (
        "class Thing:\n"
        "    def __repr__(self):\n"
        "        return 'Thing()'\n"
        "def tool(kind):\n"
        "    return {'set': {3}, 'obj': Thing(), 'nan': float('nan'), 'bytes': b'ab', 'tuple': (1, 'a')}[kind]\n"
    )
    kinds = ["set", "obj", "nan", "bytes", "tuple"]
    results = sb.run(code, "tool", [{"kind": k} for k in kinds], limits=LIMITS)
    assert [r.status for r in results] == ["ok"] * 5
    assert [r.value for r in results] == ["{3}", "Thing()", "nan", "b'ab'", [1, "a"]]


def test_huge_return_value_is_a_limit(sb, baseline):
    res = run1(sb, "def tool():\n    return 'x' * 5_000_000\n")
    assert res.status == "limit" and "max_return_bytes" in res.error


def test_json_arguments_are_data_not_source(sb, baseline):
    code = "def tool(flag, nothing, text):\n    return [flag is True, nothing is None, text]\n"
    text = "'); import os; os.system('echo pwned') #\"\"\""
    res = run1(sb, code, {"flag": True, "nothing": None, "text": text})
    assert res.status == "ok" and res.value == [True, True, text]


FORGE = (
    "import os, struct, time\n"
    "def tool(body):\n"
    "    data = body.encode()\n"
    "    os.write(4, struct.pack('>I', len(data)) + data)\n"  # a frame of its own on the reply pipe
    "    time.sleep(5)\n"
)
DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "value, reason",
    [(DEEP, "nested more than 100 levels"), ("NaN", "NaN"), ("-Infinity", "Infinity"), ("1e400", "Infinity"),
     ('"\\ud83d"', "lone surrogate"), ('["\\udfff"]', "lone surrogate")],
)  # fmt: skip
def test_forged_reply_frames_are_errors_not_exceptions(sb, baseline, value, reason):
    """A tool can write any frame on its reply pipe: what strict JSON cannot hold (a stack-exhausting nest,
    NaN, Infinity, a lone surrogate) is that call's error, never an exception in the caller or a bad value."""
    body = '{"status": "ok", "value": ' + value + ', "error": null, "seconds": 0}'
    res = run1(sb, FORGE, {"body": body})
    assert res.status == "error" and res.value is None
    assert res.error.startswith("the tool wrote a malformed reply on the result pipe: ") and reason in res.error


def _at_depth(frames: int, fn):
    """Call fn() with `frames` more Python frames on the stack (a grader deep inside a training step)."""
    return _at_depth(frames - 1, fn) if frames else fn()


def test_deep_return_values_are_a_limit_at_any_caller_depth(sb, baseline):
    """Values cross at most 100 levels deep, so decoding one never depends on how deep the caller's stack is."""
    code = "def tool(n):\n    x = 0\n    for _ in range(n):\n        x = [x]\n    return x\n"
    results = _at_depth(50, lambda: sb.run(code, "tool", [{"n": 100}, {"n": 101}, {"n": 980}], limits=LIMITS))
    assert [r.status for r in results] == ["ok", "limit", "limit"]
    assert str(results[0].value).count("[") == 100
    assert all("nested more than 100 levels" in r.error for r in results[1:])


def test_values_strict_json_cannot_hold_come_back_as_repr(sb, baseline):
    """Lone surrogates in a return value or an exception message are normalised by the tool process, like NaN."""
    code = "def tool(raise_it):\n    if raise_it:\n        raise ValueError('bad \\ud83d')\n    return {'s': '\\ud800'}"
    ret, exc = sb.run(code, "tool", [{"raise_it": False}, {"raise_it": True}], limits=LIMITS)
    assert ret.status == "ok" and ret.value == "{'s': '\\ud800'}"
    assert exc.status == "error" and exc.error == "ValueError: bad \\ud83d"


def _nest(n: int) -> object:
    x: object = 0
    for _ in range(n):
        x = [x]
    return x


def test_arguments_that_cannot_travel_as_json_are_that_calls_error(sb, baseline):
    """The caller's arguments are checked by the encoder that frames them: each bad one is an error for its
    own call, the good ones still run (in order), and nothing raises."""
    code = "def tool(x):\n    return x\n"
    bad = [float("nan"), float("inf"), "\ud83d", {"\udc00": 1}, _nest(3000), _nest(101), {1, 2}]
    results = sb.run(code, "tool", [{"x": "a"}, *({"x": v} for v in bad), {"x": _nest(99)}], limits=LIMITS)
    assert [r.status for r in results] == ["ok"] + ["error"] * len(bad) + ["ok"]
    assert results[0].value == "a" and results[-1].value == _nest(99)
    assert all(r.error.startswith("call arguments cannot travel as JSON: ") for r in results[1:-1])
    assert "nested more than 100 levels" in results[5].error and "surrogate" in results[3].error
    [res] = sb.run("def tool():\n    return '\ud83d'\n", "tool", [{}], limits=LIMITS)
    assert res.status == "error" and "surrogate" in res.error
    res = sb.run_script("print(input())", stdin="\ud83d", limits=LIMITS)
    assert res.status == "error" and "surrogate" in res.error


# ---------------------------------------------------------------- broken tools


def test_missing_module(sb, baseline):
    results = sb.run("import no_such_module_xyz\ndef tool():\n    return 1\n", "tool", [{}, {}], limits=LIMITS)
    assert [r.status for r in results] == ["error", "error"]
    assert all("ModuleNotFoundError" in r.error for r in results)


def test_syntax_error(sb, baseline):
    res = run1(sb, "def tool(:\n    return 1\n")
    assert res.status == "error" and "SyntaxError" in res.error


def test_missing_function(sb, baseline):
    res = run1(sb, "def other():\n    return 1\n")
    assert res.status == "error" and "no function named 'tool'" in res.error


# ---------------------------------------------------------------- after the corpus


def test_zz_after_the_corpus_everything_is_clean(sb, baseline):
    assert sb.quiesce()
    for worker in sb.workers:  # exactly one process per worker: its fresh, idle, pre-forked next tool
        # the fork server replies as soon as it forks; the child takes the run's uid a moment later (before it
        # reads any code), so on a loaded machine give it a few seconds to show up under that uid
        deadline = time.monotonic() + 10
        while True:
            procs = [p for p in psutil.process_iter(["uids"])
                     if p.info["uids"] and worker.owns_uid(p.info["uids"].real)]
            if len(procs) == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(procs) == 1 and procs[0].num_threads() == 1 and procs[0].children() == []
    assert {w.proc.pid for w in sb.workers} == baseline["servers"]  # no fork server died or was replaced
    assert _fds() == baseline["fds"]
    assert _children() == baseline["children"]
    zombies = [p for p in psutil.Process().children(recursive=True) if p.status() == psutil.STATUS_ZOMBIE]
    assert zombies == []
    [res] = sb.run(NORMAL, "solve", [{"question": "abc"}])
    assert res.status == "ok" and res.value == {"answer": "cba", "n": 3}
