"""The sandbox over HTTP: a real `python -m sandbox serve` on 127.0.0.1, the client, SandboxFusion's /run_code,
fuzzing with malformed bodies (every one answered 4xx with a reason; the server never dies), and the bounds
on what one client can make the server do (output, limits, bodies, disconnects, idle connections)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox import Limits, RemoteSandbox, RemoteSandboxError, run_pure
from sandbox.server import BadRequest, Bounds, _limits

from .conftest import MARK, fork_server_killer, mark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(*flags: str):
    """A real `python -m sandbox serve` on 127.0.0.1; yields (url, process) and checks a clean shutdown."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "serve", "--host", "127.0.0.1", "--port", str(port), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"sandbox server did not start: {proc.stdout.read().decode()[-2000:]}")
        time.sleep(0.1)
    assert proc.stdout.readline().decode().startswith(f"sandbox: serving on {url} (")  # the ready line comes first
    yield url, proc
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers
    proc.terminate()
    assert proc.wait(timeout=30) in (0, -15)  # uvicorn re-raises SIGTERM after its graceful shutdown
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture(scope="module")
def server():
    yield from _serve("--workers", "2")


TIGHT_OUTPUT_MB, TIGHT_BODY_MB, TIGHT_IDLE_S, TIGHT_BODY_S = 12, 2, 0.5, 1.0


@pytest.fixture(scope="module")
def tight():
    """One worker (one request admitted at a time) and small bounds, so each bound is quick to reach."""
    yield from _serve(
        "--workers", "1", "--max-request-output-mb", str(TIGHT_OUTPUT_MB), "--max-body-mb", str(TIGHT_BODY_MB),
        "--idle-timeout-s", str(TIGHT_IDLE_S), "--body-timeout-s", str(TIGHT_BODY_S),
    )  # fmt: skip


@pytest.fixture(scope="module")
def remote(server):
    with RemoteSandbox(server[0]) as client:
        yield client


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server[0], timeout=30) as client:
        yield client


def test_remote_run_matches_the_local_api(remote):
    code = (
        "state = []\n"
        "def solve(question, flag=None):\n"
        "    state.append(question)\n"
        "    return [question, flag, len(state)]\n"
    )
    results = remote.run(code, "solve", [{"question": "a", "flag": True}, {"question": "b"}])
    assert [r.status for r in results] == ["ok", "ok"]
    assert [r.value for r in results] == [["a", True, 1], ["b", None, 2]]
    [res] = remote.run("def f():\n    while True:\n        pass\n", "f", [{}], limits=Limits(timeout_s=0.5))
    assert res.status == "timeout"


def test_the_server_survives_hostile_tools(remote, server):
    hostile = [
        "import os\ndef f():\n    os.kill(os.getppid(), 9)\n",
        "import os\ndef f():\n    while True:\n        os.fork()\n",
        "import os\ndef f():\n    os._exit(1)\n",
        "import ctypes\ndef f():\n    ctypes.string_at(0)\n",
        "def f():\n    return bytearray(1 << 40)\n",
    ]
    for code in hostile:
        [res] = remote.run(code, "f", [{}], limits=Limits(timeout_s=2))
        assert res.status in ("error", "limit"), res
    assert server[1].poll() is None
    assert remote.run("def f(x):\n    return x + 1\n", "f", [{"x": 1}])[0].value == 2


def test_run_code_is_sandboxfusion_compatible(remote, http):
    ok = remote.run_code("import sys\nprint(sys.stdin.read()[::-1])\n", stdin="abc")
    assert ok["status"] == "Success" and ok["run_result"]["status"] == "Finished"
    assert ok["run_result"]["stdout"] == "cba\n" and ok["run_result"]["return_code"] == 0
    assert set(ok) >= {"status", "message", "compile_result", "run_result", "files"}
    assert set(ok["run_result"]) == {"status", "stdout", "stderr", "return_code", "execution_time"}
    failed = remote.run_code("raise SystemExit(3)\n")
    assert failed["status"] == "Failed" and failed["run_result"]["return_code"] == 3
    crash = remote.run_code("1/0\n")
    assert crash["run_result"]["return_code"] == 1 and "ZeroDivisionError" in crash["run_result"]["stderr"]
    slow = remote.run_code("while True:\n    pass\n", run_timeout=0.5)
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded"
    forged = remote.run_code('import os\nos.write(4, b\'\\x00\\x00\\x00\\x1e{"status": "ok", "value": "x"}\')\n')
    assert forged["status"] == "Failed" and forged["run_result"]["status"] == "Error"  # a forged reply: no 5xx
    bad = http.post("/run_code", json={"code": "print(1)", "language": "cpp"})
    assert bad.status_code == 400 and "unsupported language" in bad.json()["error"]


SLOW_MARKED = "import time\ndef f(x):\n" + mark(" " * 4) + (
    "    time.sleep(3)\n    return x\n")


def test_a_sandbox_fault_is_carried_over_http(server, remote):
    """The service's fork server killed mid-call (a real SIGKILL): the result says `fault` over HTTP as it does
    locally, `run_pure` reruns it, and SandboxFusion's /run_code answers SandboxError."""
    with fork_server_killer(times=1) as killed:
        results = remote.run(SLOW_MARKED, "f", [1], Limits(timeout_s=10))
    assert len(killed) == 1 and results[0].status == "fault" and "not retried" in results[0].error
    with fork_server_killer(times=1) as killed:
        results = run_pure(remote, SLOW_MARKED, "f", [1], Limits(timeout_s=10))
    assert len(killed) == 1 and [(r.status, r.value) for r in results] == [("ok", 1)]
    with fork_server_killer(times=1) as killed:
        fusion = remote.run_code(MARK + "import time\ntime.sleep(3)\n")
    assert len(killed) == 1 and fusion["status"] == "SandboxError" and "not retried" in fusion["message"]


def test_a_service_that_dies_mid_request_is_a_fault_not_the_tools():
    """The HTTP service itself killed while a call runs: the client reports the call as `fault`."""
    serving = _serve("--workers", "1")
    url, proc = next(serving)
    tree = psutil.Process(proc.pid).children(recursive=True)
    with RemoteSandbox(url) as client:
        timer = threading.Timer(1.0, proc.kill)
        timer.start()
        results = client.run(SLOW_MARKED, "f", [1, 2], Limits(timeout_s=10))
        timer.join()
    assert [r.status for r in results] == ["fault", "fault"] and "failed during the request" in results[0].error
    assert proc.wait(timeout=10) == -9
    psutil.wait_procs(tree, timeout=10)  # its workers die with it (bubblewrap's --die-with-parent)
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize(
    ("path", "body", "status", "reason"),
    [
        ("/run", b"", 400, "not valid JSON"),
        ("/run", b"{", 400, "not valid JSON"),
        ("/run", b"\xff\xfe", 400, "not valid JSON"),
        ("/run", b"[]", 400, "must be a JSON object"),
        ("/run", b'{"code": "", "func_name": "f", "calls": [NaN]}', 400, "NaN is not JSON"),
        ("/run", b'{"code": "x"}', 400, "missing field 'func_name'"),
        ("/run", b'{"code": 1, "func_name": "f", "calls": []}', 400, "wrong type"),
        ("/run", b'{"code": "", "func_name": "f", "calls": {}}', 400, "wrong type"),
        ("/run", b'{"code": "", "func_name": "f", "calls": [], "limits": {"timeout_s": -1}}', 400, "bad limits"),
        ("/run", b'{"code": "", "func_name": "f", "calls": [], "limits": {"nope": 1}}', 400, "unknown limits"),
        ("/run", b'{"code": "", "func_name": "f", "calls": [], "limits": [1]}', 400, "bad limits"),
        ("/run_code", b'{"language": "python"}', 400, "missing field 'code'"),
        ("/run_code", b'{"code": "1", "run_timeout": "soon"}', 400, "wrong type"),
        ("/run_code", b'{"code": "1", "run_timeout": 0}', 400, "timeout_s"),
        ("/run_code", b'{"code": "1", "run_timeout": true}', 400, "wrong type"),
        ("/run_code", b'{"code": "1", "files": {"a.txt": "x"}}', 400, "not supported"),
        # each of these was a 500: a body nested 100,000 deep, and a limit too large for a float
        ("/run", b'{"code": "", "func_name": "f", "calls": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nested"),
        (
            "/run",
            b'{"code": "", "func_name": "f", "calls": [], "limits": {"memory_mb": 1' + b"0" * 400 + b"}}",
            400,
            "memory_mb is over this server's maximum",
        ),
        ("/run", b'{"code": "", "func_name": "f", "calls": [1e400]}', 400, "not valid JSON"),
        ("/run", b'{"code": "", "func_name": "f", "calls": [' + b"9" * 5000 + b"]}", 400, "not valid JSON"),
    ],
)
def test_bad_requests_get_a_4xx_with_a_reason(http, path, body, status, reason):
    resp = http.post(path, content=body, headers={"content-type": "application/json"})
    assert resp.status_code == status and reason in resp.json()["error"]


def test_values_strict_json_cannot_carry_are_errors_not_5xx(http):
    """A lone surrogate in the request, or a forged NaN or stack-deep reply, is that call's error (it was a 500)."""
    echo = "def f(x):\n    return x\n"
    forge = "import os, struct\ndef f(x):\n    os.write(4, struct.pack('>I', len(x)) + x.encode())\n"
    deep = '{"status": "ok", "value": ' + "[" * 5000 + "]" * 5000 + "}"
    cases = [
        ("/run", {"code": echo, "func_name": "f", "calls": [{"x": "\ud83d"}, {"x": 1}]}, ["error", "ok"]),
        ("/run", {"code": forge, "func_name": "f", "calls": [{"x": '{"status": "ok", "value": NaN}'}]}, ["error"]),
        ("/run", {"code": forge, "func_name": "f", "calls": [{"x": deep}]}, ["error"]),
    ]
    for path, body, statuses in cases:
        resp = http.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
        assert resp.status_code == 200 and [r["status"] for r in resp.json()["results"]] == statuses
    resp = http.post("/run_code", content=json.dumps({"code": "print(input())", "stdin": "\udfff"}))
    assert resp.status_code == 200 and resp.json()["run_result"]["status"] == "Error"


def test_client_turns_unframeable_arguments_into_per_call_errors(server):
    """RemoteSandbox.run answers arguments that cannot travel as strict JSON as Sandbox.run does (it raised)."""
    echo = "def f(x):\n    return x\n"
    with RemoteSandbox(server[0]) as client:
        results = client.run(echo, "f", [{"x": float("nan")}, {"x": 2}, {"x": "\ud83d"}])
        assert [r.status for r in results] == ["error", "ok", "error"] and results[1].value == 2
        assert "cannot travel as JSON" in results[0].error
        assert [r.status for r in client.run(echo + "# \udfff", "f", [{"x": 1}])] == ["error"]


def test_oversized_bodies_and_wrong_methods(http):
    resp = http.post("/run", content=b"x" * (17 * 1024 * 1024))
    assert resp.status_code == 413 and "at most" in resp.json()["error"]
    assert http.get("/run").status_code == 405
    assert http.post("/nowhere", content=b"{}").status_code == 404


def test_client_raises_a_named_error_on_refusal(server):
    with RemoteSandbox(server[0]) as client, pytest.raises(RemoteSandboxError, match="400: field 'code'"):
        client.run(None, "f", [{}])
    with RemoteSandbox("http://127.0.0.1:9") as nowhere, pytest.raises(RemoteSandboxError, match="unreachable"):
        nowhere.run("def f():\n    return 1\n", "f", [{}])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
fields = st.sampled_from(["code", "func_name", "calls", "limits", "language", "run_timeout", "stdin", "files"])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(["/run", "/run_code"]), raw=st.binary(max_size=200))
def test_fuzz_random_bytes(http, server, path, raw):
    resp = http.post(path, content=raw)
    assert resp.status_code < 500
    if resp.status_code >= 400:
        assert resp.json()["error"]


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(["/run", "/run_code"]), body=st.dictionaries(fields, json_values, max_size=6))
def test_fuzz_json_objects_with_wrong_shapes(http, server, path, body):
    body.setdefault("code", "def f(*a, **k):\n    return 1\n")  # whatever else is wrong, never a 5xx
    if "limits" in body or "run_timeout" in body:
        body.setdefault("func_name", "f")
    resp = http.post(path, content=json.dumps(body))
    assert resp.status_code < 500, resp.text
    assert resp.status_code == 200 or resp.json()["error"]
    assert server[1].poll() is None


# ---------------------------------------------------------------- bounds on what one client can make the server do


def _connect(url: str, rcvbuf: int | None = None) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    if rcvbuf is not None:  # a small receive window: the server's replies back up in its own buffers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(20)
    sock.connect((host, int(port)))
    return sock


def _head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: sandbox\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _request(path: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return _head(path, len(data)) + data


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends before it closes the connection (fails if it keeps it open 20 s)."""
    data = b""
    try:
        while chunk := sock.recv(1 << 16):
            data += chunk
    except TimeoutError:
        pytest.fail(f"the server kept the connection open; it sent {data[:200]!r}")
    except ConnectionResetError:
        pass
    return data


def _tool_processes(server_pid: int, name: str | None = None) -> list[psutil.Process]:
    """The server's descendants running as a tool uid (sandbox.jail.UID_BASE and up), optionally by name."""
    found = []
    for p in psutil.Process(server_pid).children(recursive=True):
        try:
            if p.uids().real >= 1 << 30 and (name is None or p.name() == name):
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def _wait_for(predicate, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_requests_total_output_is_capped(tight):
    """300 calls returning 1 MB each made the server hold 1.3 GiB; past the request's output cap the remaining
    calls are not run (status "limit"), so what the server holds stays near the cap."""
    url, proc = tight
    code = "def f(i):\n    return 'x' * 999_000\n"
    resp = httpx.post(f"{url}/run", json={"code": code, "func_name": "f", "calls": [{"i": i} for i in range(300)]})
    results = resp.json()["results"]
    cap = TIGHT_OUTPUT_MB << 20
    answered = cap // len(json.dumps("x" * 999_000)) + 1  # the call that crosses the cap is kept
    assert [r["status"] for r in results] == ["ok"] * answered + ["limit"] * (300 - answered)
    assert "output cap" in results[-1]["error"]
    assert len(resp.content) < cap + 2_000_000
    status = Path(f"/proc/{proc.pid}/status").read_text()
    peak_kib = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])
    assert peak_kib < 400 * 1024  # about 100 MiB measured; 1.2 GiB before the cap


def test_limits_over_the_servers_maximum_are_a_400(http):
    """The server's maximums (its /health) are the most a request may ask for; more is a 400 naming the limit,
    never clamped (a silently tighter limit would change a tool's grade)."""
    maxima = http.get("/health").json()["max_limits"]
    code = "def f():\n    return 1\n"
    at_max = http.post("/run", json={"code": code, "func_name": "f", "calls": [{}], "limits": maxima})
    assert at_max.status_code == 200 and at_max.json()["results"][0]["value"] == 1
    over = [("memory_mb", 10**400), ("nproc", 10**6), ("output_bytes", 10**12), ("cpu_s", 10**400),
            ("timeout_s", maxima["timeout_s"] + 0.5), ("max_return_bytes", maxima["max_return_bytes"] + 1)]  # fmt: skip
    for name, value in over:
        resp = http.post("/run", json={"code": code, "func_name": "f", "calls": [{}], "limits": {name: value}})
        assert resp.status_code == 400 and f"{name} is over this server's maximum" in resp.json()["error"]
    for field, name in [("run_timeout", "timeout_s"), ("memory_limit_MB", "memory_mb")]:
        resp = http.post("/run_code", json={"code": "print(1)", field: 10**400})
        assert resp.status_code == 400 and f"{name} is over this server's maximum" in resp.json()["error"]


def test_a_default_cpu_limit_counts_against_the_maximum():
    """cpu_s left out is ceil(timeout_s) + 1 per call, and is held to --max-cpu-s like an explicit one."""
    bounds = Bounds(max_limits=Limits(timeout_s=10, cpu_s=2))
    assert _limits({"timeout_s": 1}, bounds).cpu_seconds(0) == 2
    with pytest.raises(BadRequest, match="cpu_s"):
        _limits({"timeout_s": 3}, bounds)


def test_an_oversized_content_length_is_refused_before_the_body_is_sent(tight):
    with _connect(tight[0]) as sock:
        sock.sendall(_head("/run", 1 << 30))  # a GiB announced, not a byte of it sent
        reply = _read_until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 413") and b"body must be at most" in reply


def test_bodies_wait_unread_until_their_request_is_admitted(tight):
    """24 bodies of 15 MiB were all buffered at once (433 MiB); a body is now read only once its request holds
    one of the workers' admissions, so queued clients' bytes wait in the kernel, not in the server."""
    url, proc = tight
    sleeper = {"code": "import subprocess\ndef f():\n    subprocess.run(['sleep', '4'])\n", "func_name": "f",
               "calls": [{}], "limits": {"timeout_s": 10}}  # fmt: skip
    busy = threading.Thread(target=httpx.post, args=(f"{url}/run",), kwargs={"json": sleeper, "timeout": 30})
    busy.start()
    assert _wait_for(lambda: _tool_processes(proc.pid, "sleep"))  # the only worker is running the sleeper
    rss_before = psutil.Process(proc.pid).memory_info().rss
    size = (TIGHT_BODY_MB << 20) - 1
    queued = []
    for _ in range(16):  # 32 MiB offered in all
        sock = _connect(url)
        sock.sendall(_head("/run", size))
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.send(b"x" * size)
        queued.append(sock)
    time.sleep(0.5)  # time to read them, were they read
    grown = psutil.Process(proc.pid).memory_info().rss - rss_before
    still_busy = busy.is_alive()
    for sock in queued:
        if still_busy:  # not admitted, so not answered (the old server answered each at once: invalid JSON)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
        sock.close()
    busy.join()
    assert grown < 12 << 20, f"the server grew by {grown} bytes"


@pytest.mark.parametrize("path", ["/run", "/run_code"])
def test_a_client_that_disconnects_cancels_its_run(server, http, path):
    """The run's processes are killed when its client goes away, long before the run's own timeout."""
    url, proc = server
    sleep = "import subprocess\nsubprocess.run(['sleep', '60'])\n"
    if path == "/run":
        body = {"code": "def f():\n    " + sleep.replace("\n", "\n    "), "func_name": "f", "calls": [{}, {}],
                "limits": {"timeout_s": 60}}  # fmt: skip
    else:
        body = {"code": sleep, "run_timeout": 60}
    with _connect(url) as sock:
        sock.sendall(_request(path, body))
        assert _wait_for(lambda: _tool_processes(proc.pid, "sleep"))
    assert _wait_for(lambda: not _tool_processes(proc.pid, "sleep"), timeout_s=15)  # its timeout: 60 s
    assert (
        http.post("/run", json={"code": "def f():\n    return 2\n", "func_name": "f", "calls": [{}]}).json()["results"][
            0
        ]["value"]
        == 2
    )


def test_idle_connections_are_closed(tight):
    """A client that sends nothing, or a request head a byte at a time (slowloris), or nothing after its
    response, is disconnected after the idle timeout (uvicorn alone never closed the first two)."""
    url = tight[0]
    with _connect(url) as silent:
        assert _read_until_closed(silent) == b""
    with _connect(url) as slow:
        slow.sendall(b"POST /run HTTP/1.1\r\nHost: sandbox\r\nX-Pad: ")
        slow.settimeout(0.05)

        def closed() -> bool:
            try:
                slow.send(b"a")
                return slow.recv(1) == b""
            except TimeoutError:
                return False
            except (BrokenPipeError, ConnectionResetError):
                return True

        assert _wait_for(closed)
    with _connect(url) as kept:
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: sandbox\r\n\r\n")
        assert _read_until_closed(kept).startswith(b"HTTP/1.1 200")


def test_a_body_that_stalls_gets_a_408(tight):
    with _connect(tight[0]) as sock:
        sock.sendall(_head("/run", 100) + b'{"code": ')
        reply = _read_until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive within" in reply


def test_a_client_that_stops_reading_its_response_is_dropped(tight):
    """A response the client does not read would sit in the server's buffers for good (a slow-read attack);
    with no progress for the idle timeout, the connection is aborted."""
    url = tight[0]
    code = "def f(i):\n    return 'x' * 999_000\n"
    with _connect(url, rcvbuf=4096) as sock:
        sock.sendall(_request("/run", {"code": code, "func_name": "f", "calls": [{"i": i} for i in range(20)]}))
        tcp_state = lambda: sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]  # noqa: E731
        assert _wait_for(lambda: tcp_state() != 1)  # 1: ESTABLISHED
        assert len(_read_until_closed(sock)) < TIGHT_OUTPUT_MB << 20
    assert httpx.get(f"{url}/health").status_code == 200
