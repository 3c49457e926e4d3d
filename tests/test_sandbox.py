"""The Sandbox API: call semantics, limits, fail-closed start-up, threads, clean shutdown, flat resource use."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import psutil
import pytest

from sandbox import Limits, Result, Sandbox, SandboxUnavailable
from sandbox.jail import UID_LOCK_DIR

COUNTER = "state = {'n': 0}\ndef tool(x):\n    state['n'] += 1\n    return [x, state['n']]\n"


@pytest.fixture(scope="module")
def sb():
    with Sandbox(isolation="strict", workers=2) as box:
        yield box


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _children() -> list[psutil.Process]:
    """Direct children: each worker is one (its server); pre-forked tools below them come and go."""
    return psutil.Process().children()


def test_results_are_in_order_and_arguments_are_json_data(sb):
    code = "def tool(a, b=None):\n    return {'a': a, 'b': b}\n"
    calls = [{"a": True, "b": None}, [1, [2, 3]], {"a": "null"}, {"a": {"x": False}, "b": 1.5}]
    results = sb.run(code, "tool", calls)
    assert all(isinstance(r, Result) and r.status == "ok" and r.error is None for r in results)
    assert [r.value for r in results] == [
        {"a": True, "b": None},
        {"a": 1, "b": [2, 3]},
        {"a": "null", "b": None},
        {"a": {"x": False}, "b": 1.5},
    ]
    [not_json] = sb.run(code, "tool", [{"a": {1, 2}}])
    assert not_json.status == "error" and not_json.error.startswith("call arguments cannot travel as JSON")
    [scalar] = sb.run("def tool(x):\n    return x * 2\n", "tool", [21])
    assert scalar.value == 42
    assert sb.run(code, "tool", []) == []


def test_calls_of_one_run_share_state_but_runs_do_not(sb):
    first = sb.run(COUNTER, "tool", [{"x": "a"}, {"x": "b"}, {"x": "c"}])
    assert [r.value for r in first] == [["a", 1], ["b", 2], ["c", 3]]
    second = sb.run(COUNTER, "tool", [{"x": "d"}])
    assert second[0].value == ["d", 1]


def test_a_timeout_mid_run_kills_that_call_and_the_rest_continue(sb):
    code = COUNTER.replace("    return", "    if x == 'hang':\n        while True:\n            pass\n    return")
    results = sb.run(code, "tool", [{"x": "a"}, {"x": "hang"}, {"x": "b"}], limits=Limits(timeout_s=0.5))
    assert [r.status for r in results] == ["ok", "timeout", "ok"]
    assert results[2].value == ["b", 1]  # a fresh process: the timed-out one and its state are gone
    assert 0.5 <= results[1].seconds < 5


def test_cancel_from_another_thread_ends_the_run_at_once(sb):
    """sandbox.cancel.Cancel: the call in flight is killed (not left to its timeout), the rest are not run."""
    import time

    from sandbox.cancel import Cancel

    code = "import time\ndef f(x):\n    time.sleep(x)\n    return x\n"
    with Cancel() as cancel:
        timer = threading.Timer(0.5, cancel.set, args=("client went away",))
        timer.start()
        t0 = time.monotonic()
        results = sb.run(code, "f", [0, 30, 0], limits=Limits(timeout_s=60), cancel=cancel)
        elapsed = time.monotonic() - t0
    assert results[0].status == "ok" and [r.status for r in results[1:]] == ["limit", "limit"]
    assert all("client went away" in r.error for r in results[1:]) and elapsed < 20
    assert sb.run(code, "f", [0], limits=Limits(timeout_s=5))[0].value == 0  # the worker serves on


def test_exceptions_are_reported_with_type_and_message(sb):
    [res] = sb.run("def tool():\n    raise ValueError('bad input 7')\n", "tool", [{}])
    assert res.status == "error" and res.error == "ValueError: bad input 7" and res.value is None
    [res] = sb.run("def tool(x):\n    return x\n", "tool", [{"y": 1}])
    assert res.status == "error" and res.error.startswith("TypeError")


def test_stdout_and_stderr_are_captured_per_call(sb):
    code = "import sys\ndef tool(i):\n    print('out', i)\n    print('err', i, file=sys.stderr)\n    return i\n"
    results = sb.run(code, "tool", [{"i": 1}, {"i": 2}])
    assert [(r.stdout, r.stderr) for r in results] == [("out 1\n", "err 1\n"), ("out 2\n", "err 2\n")]


def test_limits_are_validated():
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=1.5)
    with pytest.raises(ValueError, match="unknown limits"):
        Limits.from_dict({"timeout": 3})
    assert Limits.from_dict({"timeout_s": 3}).cpu_seconds(calls=2) == 12
    assert Limits(cpu_s=2).cpu_seconds(calls=1) == 4


def test_memory_limit_is_per_run(sb):
    code = "def tool(mb):\n    return len(bytearray(mb * 1024 * 1024))\n"
    [small] = sb.run(code, "tool", [{"mb": 200}], limits=Limits(memory_mb=128))
    [big] = sb.run(code, "tool", [{"mb": 200}], limits=Limits(memory_mb=512))
    assert small.status == "limit" and big.status == "ok" and big.value == 200 * 1024 * 1024


def test_cpu_limit_stops_a_spinning_tool_even_with_a_long_wall_timeout(sb):
    code = "import threading\ndef spin():\n    while True:\n        pass\ndef tool():\n    spin()\n"
    [res] = sb.run(code, "tool", [{}], limits=Limits(timeout_s=30, cpu_s=1))
    assert res.status == "limit" and "SIGXCPU" in res.error
    assert res.seconds < 20


def test_run_script_is_a_whole_program_with_stdin(sb):
    res = sb.run_script("import sys\nprint(sys.stdin.read().upper())\nsys.exit(4)\n", stdin="abc")
    assert (res.status, res.value, res.stdout) == ("ok", 4, "ABC\n")
    res = sb.run_script("raise KeyError('k')\n")
    assert res.status == "ok" and res.value == 1 and "KeyError: 'k'" in res.stderr
    res = sb.run_script("while True:\n    pass\n", limits=Limits(timeout_s=0.5))
    assert res.status == "timeout"


def test_many_threads_share_one_sandbox(sb):
    errors: list[str] = []

    def worker(tid: int) -> None:
        for i in range(15):
            calls = [{"x": f"{tid}-{i}-{k}"} for k in range(3)]
            got = [r.value for r in sb.run(COUNTER, "tool", calls)]
            if got != [[c["x"], k + 1] for k, c in enumerate(calls)]:
                errors.append(f"thread {tid}: {got}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_unknown_isolation_is_refused():
    with pytest.raises(ValueError, match="isolation must be one of"):
        Sandbox(isolation="none")


def test_strict_fails_closed_without_bubblewrap(monkeypatch, tmp_path):
    before = _children()
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no bwrap on it
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        Sandbox(isolation="strict", workers=1)
    assert _children() == before


def _world_readable(path: str) -> bool:
    p = Path(path)
    for part in [p, *p.parents]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH or (part == p and not mode & stat.S_IROTH):
            return False
    return True


def test_process_mode_runs_confined_or_fails_closed():
    stdlib = os.path.dirname(os.__file__)
    try:
        box = Sandbox(isolation="process", workers=1)
    except SandboxUnavailable as exc:
        # here the interpreter lives where an unprivileged uid cannot read it: refusing is the only safe answer
        assert not _world_readable(stdlib) and "cannot read" in str(exc)
        return
    with box:
        code = (
            "import os\n"
            "def tool():\n"
            "    return [os.getuid(), os.getcwd(), sorted(os.environ), os.getsid(0) == os.getpid()]\n"
        )
        [res] = box.run(code, "tool", [{}])
        uid, cwd, env, leader = res.value
        assert uid != 0 and box.workers[0].owns_uid(uid) and leader
        assert env == ["HOME", "LANG", "PATH", "TMPDIR"] and "sandbox-" in cwd
        [res] = box.run("import os\ndef tool():\n    while True:\n        os.fork()\n", "tool", [{}])
        assert res.status == "limit"
        [res] = box.run("def tool():\n    while True:\n        pass\n", "tool", [{}], limits=Limits(timeout_s=0.5))
        assert res.status == "timeout"


def test_close_releases_every_process_and_descriptor():
    fds, children = _fds(), len(_children())
    box = Sandbox(isolation="strict", workers=2)
    assert len(_children()) > children
    assert box.run(COUNTER, "tool", [{"x": 1}])[0].status == "ok"
    box.close()
    assert _fds() == fds and len(_children()) == children
    with pytest.raises(RuntimeError, match="closed"):
        box.run(COUNTER, "tool", [{"x": 1}])


def test_closing_deletes_only_its_own_uid_lock_files(sb):
    """Each worker's uid block is reserved by a lock file in /run/smith-sandbox-uids; closing deletes those
    files (a thousand Sandboxes used to leave a thousand files) and no other holder's."""
    others = {w.uid_base for w in sb.workers}  # a Sandbox still open in this process
    box = Sandbox(isolation="strict", workers=2)
    mine = {w.uid_base for w in box.workers}
    assert len(mine) == 2 and not mine & others
    assert all((UID_LOCK_DIR / f"{base}.lock").exists() for base in mine | others)
    box.close()
    assert not any((UID_LOCK_DIR / f"{base}.lock").exists() for base in mine)
    assert all((UID_LOCK_DIR / f"{base}.lock").exists() for base in others)
    assert sb.run(COUNTER, "tool", [{"x": 1}])[0].value == [1, 1]


def _flatness(sb: Sandbox, runs: int, calls_per_run: int) -> None:
    code = "def tool(i):\n    return i * i\n"
    sb.quiesce()
    me = psutil.Process()
    start = (_fds(), len(me.children(recursive=True)), me.num_threads())
    samples = []
    for r in range(runs):
        results = sb.run(code, "tool", [{"i": r * calls_per_run + k} for k in range(calls_per_run)])
        assert [x.value for x in results] == [(r * calls_per_run + k) ** 2 for k in range(calls_per_run)]
        if (r + 1) % max(1, runs // 10) == 0:
            sb.quiesce()
            samples.append((_fds(), len(me.children(recursive=True)), me.num_threads()))
    assert samples and all(s == start for s in samples), (start, samples)


def test_10000_calls_leave_processes_and_descriptors_flat(sb):
    _flatness(sb, runs=625, calls_per_run=16)  # the shape of build rollouts: 16 questions per tool


@pytest.mark.slow
def test_10000_single_call_runs_leave_processes_and_descriptors_flat(sb):
    _flatness(sb, runs=10_000, calls_per_run=1)


def test_open_sandbox_builds_what_a_settings_section_names():
    """The one place smith builds its sandbox (train.py's `sandbox`, a suite's `sandbox`): remote at `url`, else
    local with the section's isolation and workers; the per-call limits from the same section."""
    from types import SimpleNamespace

    from sandbox import RemoteSandbox, open_sandbox

    section = SimpleNamespace(url=None, isolation="strict", workers=2, timeout_s=1.5, memory_mb=256)
    sb, limits = open_sandbox(section)
    with sb:
        assert isinstance(sb, Sandbox) and (sb.isolation, sb.size) == ("strict", 2)
        assert sb.run("def f(x):\n    return x + 1\n", "f", [{"x": 1}], limits=limits)[0].value == 2
    assert (limits.timeout_s, limits.memory_mb) == (1.5, 256)
    remote, _ = open_sandbox(SimpleNamespace(**{**vars(section), "url": "http://127.0.0.1:9"}))
    assert isinstance(remote, RemoteSandbox) and remote.url == "http://127.0.0.1:9"
    remote.close()
