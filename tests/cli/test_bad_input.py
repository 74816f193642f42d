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
