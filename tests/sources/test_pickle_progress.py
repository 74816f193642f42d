"""Progress through the unpickling (issue 23 point 7): the bytes read so far are reported
while the C unpickler runs, and the snapshot loader turns them into its progress bar."""

from __future__ import annotations

import pickle

from memtui.sources.common import safe_pickle
from memtui.sources.torch_snapshot import build
from tests.helpers.hand_snapshot import write_hand_snapshot


def _big_pickle(path, rows: int = 200_000):
    data = [{"action": "alloc", "addr": i, "size": 3 * i,
             "frames": [{"filename": "a.py", "line": i % 97, "name": "f"}]} for i in range(rows)]
    path.write_bytes(pickle.dumps(data, protocol=4))
    return path, data


def test_the_bytes_read_are_reported_while_unpickling(tmp_path, monkeypatch):
    monkeypatch.setattr(safe_pickle, "REPORT_EVERY", 0.0005)
    path, data = _big_pickle(tmp_path / "big.pickle")
    size = path.stat().st_size
    seen: list[tuple[int, int]] = []
    assert safe_pickle.load_pickle(path, lambda done, total: seen.append((done, total))) == data
    assert seen, "no report while unpickling"
    assert {total for _, total in seen} == {size}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[0] >= 0 and done[-1] <= size
    # nothing runs once it is over
    count = len(seen)
    safe_pickle.load_pickle(path)
    assert len(seen) == count


def test_a_failing_listener_never_stops_the_load(tmp_path, monkeypatch):
    monkeypatch.setattr(safe_pickle, "REPORT_EVERY", 0.0005)
    path, data = _big_pickle(tmp_path / "big.pickle", 50_000)

    def broken(done: int, total: int) -> None:
        raise RuntimeError("listener broke")

    assert safe_pickle.load_pickle(path, broken) == data


def test_the_snapshot_loader_says_the_megabytes_read(tmp_path, monkeypatch):
    monkeypatch.setattr(safe_pickle, "REPORT_EVERY", 0.0)
    path = write_hand_snapshot(tmp_path / "hand.pickle")
    said: list[tuple[float, str]] = []
    build.load(path, lambda fraction, message: said.append((fraction, message)))
    reading = [(f, m) for f, m in said if m.startswith("unpickling hand.pickle: ")]
    assert reading, said
    assert all(0.0 <= f <= build.UNPICKLE_SHARE for f, _ in reading)
    assert all(" MB" in m for _, m in reading)
    assert reading[-1][1].endswith("MB/s")  # its rate
    assert any(m.startswith("building the model: ") and "events" in m for _, m in said)
    fractions = [f for f, _ in said]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_the_compiled_reader_reports_its_bytes_too(tmp_path, monkeypatch):
    """The compiled reader reads the file descriptor itself and calls back with its
    offset after each chunk (``_reader.read(fd, size, hear)``).  A stand-in reads the
    file in four slow chunks, calling back as the C reader does."""
    import os
    import time

    from memtui.sources.torch_snapshot import columnar

    path, _ = _big_pickle(tmp_path / "big.pickle", 20_000)
    size = path.stat().st_size

    class SlowReader:
        @staticmethod
        def read(fd: int, total: int, hear=None):
            done = 0
            for _ in range(4):
                done += len(os.read(fd, total // 4 + 1))
                time.sleep(0.05)
                if hear is not None:
                    hear(done, total)
            return None, "left to Python"

    monkeypatch.setattr(safe_pickle, "REPORT_EVERY", 0.01)
    monkeypatch.setattr(columnar, "compiled_enabled", lambda: True)
    monkeypatch.setattr(columnar, "compiled_reader", lambda: SlowReader)
    seen: list[int] = []
    assert columnar.read_columnar(path, lambda done, total: seen.append(done)) is None
    assert seen and max(seen) == size and min(seen) < size
