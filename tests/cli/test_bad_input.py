"""Bad input never crashes: one line on stderr naming the file, exit status 2, nothing run."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from memtui.cli import main
from tests.conftest import REPO


def _run(capsys, path):
    code = main(["summary", str(path), "--json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_one_line_error(code, out, err, path, words):
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"memtui: {path}: ")
    assert "Traceback" not in err
    assert words in lines[0]


def _good_pickle_bytes():
    return pickle.dumps({"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 1, "size": 512, "stream": 0}]]}, protocol=4)


def test_empty_file(tmp_path, capsys):
    path = tmp_path / "empty.pickle"
    path.write_bytes(b"")
    _assert_one_line_error(*_run(capsys, path), path, "empty")


def test_truncated_pickle(tmp_path, capsys):
    path = tmp_path / "cut.pickle"
    path.write_bytes(_good_pickle_bytes()[:-7])
    _assert_one_line_error(*_run(capsys, path), path, "truncated")


def test_not_a_pickle(tmp_path, capsys):
    path = tmp_path / "notes.pickle"
    path.write_text("hello, this is text\n")
    _assert_one_line_error(*_run(capsys, path), path, "not a format memtui reads")


def test_an_empty_folder_says_so(tmp_path, capsys):
    """Issue 23 point 9: an empty folder got "not a format memtui reads"."""
    folder = tmp_path / "run"
    folder.mkdir()
    _assert_one_line_error(*_run(capsys, folder), folder, "no capture in this folder: it is "
                           "empty")
    (folder / "notes.txt").write_text("hello\n")
    _assert_one_line_error(*_run(capsys, folder), folder, "no capture in this folder: nothing "
                           "in it is a format memtui reads")


def _sqlite_file(path):
    """A SQLite database of 3 pages of 4096 bytes (the header's page count says 3)."""
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("PRAGMA page_size = 4096")
        db.execute("CREATE TABLE notes (text)")
        db.execute("CREATE TABLE more (text)")
    db.close()
    data = path.read_bytes()
    assert len(data) == 3 * 4096 and int.from_bytes(data[28:32], "big") == 3
    return data


def test_a_truncated_sqlite_file_says_truncated(tmp_path, capsys):
    """Issue 23 point 9: a .db cut short got "not a format memtui reads"; it is a SQLite
    file missing its end (5,000 of its 3 x 4,096 bytes), or even its 100-byte header."""
    path = tmp_path / "capture.db"
    data = _sqlite_file(path)
    _assert_one_line_error(*_run(capsys, path), path, "a SQLite database without the "
                           "msMemScope or Ascend profiler tables memtui reads")
    path.write_bytes(data[:5000])
    _assert_one_line_error(*_run(capsys, path), path,
                           "SQLite file is truncated (5,000 of its 12,288 bytes)")
    path.write_bytes(data[:60])
    _assert_one_line_error(*_run(capsys, path), path,
                           "SQLite file is truncated (60 bytes, less than its 100-byte header)")


def test_garbage_after_pickle_header(tmp_path, capsys):
    path = tmp_path / "garbage.pickle"
    path.write_bytes(b"\x80\x04\xff\xfe\xfd" + os.urandom(64))
    _assert_one_line_error(*_run(capsys, path), path, "pickle")


@pytest.mark.parametrize("payload, words", [
    (123, "not a PyTorch memory snapshot"),
    ({"hello": "world"}, "not a PyTorch memory snapshot"),
    ({"segments": "nope"}, "'segments' is not a list"),
    ({"segments": [], "device_traces": [[{"addr": 1}]]}, "malformed"),
    ({"segments": [{"device": 0}]}, "malformed"),
])
def test_pickle_of_the_wrong_shape(tmp_path, capsys, payload, words):
    path = tmp_path / "shape.pickle"
    path.write_bytes(pickle.dumps(payload, protocol=4))
    _assert_one_line_error(*_run(capsys, path), path, words)


def test_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path, capsys):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    for protocol in (2, 4, 5):
        path = tmp_path / f"evil{protocol}.pickle"
        path.write_bytes(pickle.dumps({"segments": [Evil()]}, protocol=protocol))
        _assert_one_line_error(*_run(capsys, path), path, "refused")
    assert not marker.exists()


def test_missing_file(tmp_path, capsys):
    path = tmp_path / "nope.pickle"
    _assert_one_line_error(*_run(capsys, path), path, "no such file")


def test_installed_command_exits_2_without_traceback(tmp_path):
    """The real entry point, as a user runs it, on a truncated file."""
    path = tmp_path / "cut.pickle"
    path.write_bytes(_good_pickle_bytes()[:10])
    done = subprocess.run([sys.executable, "-m", "memtui.cli", "summary", str(path)],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


async def test_a_capture_of_nothing_is_one_rule_for_summary_and_the_ui(tmp_path, capsys):
    """Issue 23 point 9: ``summary`` on an empty snapshot exited 0 ("no device has events
    or segments") while the UI exited 2.  One rule now: the same line, exit status 2."""
    from memtui.tui.app import MemtuiApp
    from memtui.tui.exits import exit_status

    path = tmp_path / "nothing.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": []}, protocol=4))
    said = f"memtui: {path}: no device has events, blocks or levels"
    for command in (["summary"], ["summary", "--json"], ["findings"]):
        assert main([*command, str(path)]) == 2, command
        captured = capsys.readouterr()
        assert (captured.out, captured.err) == ("", said + "\n"), command
    app = MemtuiApp(path)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            if app.load_error:
                break
            await pilot.pause(0.02)
    assert exit_status(app) == 2 and f"memtui: {app.load_error}" == said
