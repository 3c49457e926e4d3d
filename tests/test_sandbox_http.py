"""The sandbox over HTTP: a real `python -m sandbox serve` on 127.0.0.1, the client, SandboxFusion's /run_code,
and fuzzing with malformed bodies (every one answered 4xx with a reason; the server never dies)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox import Limits, RemoteSandbox, RemoteSandboxError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
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
    yield url, proc
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert len(workers) >= 2
    proc.terminate()
    assert proc.wait(timeout=30) in (0, -15)  # uvicorn re-raises SIGTERM after its graceful shutdown
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


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
