"""smith.builds: the one cached-build helper behind the tiny, warm, real and cold-start models."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from smith.builds import cached_build, read_marker


def _builder(version: int, calls: list[Path], fail: bool = False):
    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "weights").write_text(f"v{version}")
        time.sleep(0.05)
        if fail:
            raise RuntimeError("the build broke")
        (tmp / "marker.json").write_text(json.dumps({"version": version}))
    return build


def _current(version: int):
    return lambda p: read_marker(p, "marker.json") == {"version": version}


def test_a_current_build_is_reused_and_only_read(tmp_path):
    calls: list[Path] = []
    path = tmp_path / "model"
    assert cached_build(path, _current(1), _builder(1, calls), "model") == (path, True)
    (tmp_path / "model.lock").unlink()
    assert cached_build(path, _current(1), _builder(1, calls), "model") == (path, False)
    assert len(calls) == 1
    assert not (tmp_path / "model.lock").exists()  # a read-only install needs no lock file


def test_a_stale_build_is_replaced_whole_and_nothing_is_left_beside_it(tmp_path):
    calls: list[Path] = []
    path = tmp_path / "model"
    cached_build(path, _current(1), _builder(1, calls), "model")
    (path / "extra").write_text("from the old build")
    assert cached_build(path, _current(2), _builder(2, calls), "model") == (path, True)
    assert (path / "weights").read_text() == "v2" and not (path / "extra").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.lock"]


def test_a_failed_build_leaves_the_old_one_as_it_was(tmp_path):
    calls: list[Path] = []
    path = tmp_path / "model"
    cached_build(path, _current(1), _builder(1, calls), "model")
    with pytest.raises(RuntimeError, match="the build broke"):
        cached_build(path, _current(2), _builder(2, calls, fail=True), "model")
    assert (path / "weights").read_text() == "v1" and read_marker(path, "marker.json") == {"version": 1}
    assert not calls[-1].exists()  # its temporary directory is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.lock"]


def test_two_builders_at_once_build_it_once(tmp_path):
    calls: list[Path] = []
    path = tmp_path / "model"
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        cached_build(path, _current(1), _builder(1, calls), "model")[1])) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and sorted(results) == [False, True]


def test_a_parent_that_cannot_be_created_is_a_one_line_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ValueError, match=r"cannot create .*/file/sub for the tiny model: Not a directory"):
        cached_build(tmp_path / "file" / "sub" / "m", _current(1), _builder(1, []), "tiny model")


@pytest.mark.parametrize("content", [None, "not json", "[1, 2]"])
def test_a_missing_or_unreadable_marker_reads_as_empty(tmp_path, content):
    if content is not None:
        (tmp_path / "marker.json").write_text(content)
    assert read_marker(tmp_path, "marker.json") == {}
