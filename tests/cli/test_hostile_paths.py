"""Odd paths get one plain line and exit 2: FIFOs, unreadable files, loops, compressed files,
file names with newlines and escape sequences (issue 12, defects 6, 7 and 8)."""

from __future__ import annotations

import bz2
import errno
import gzip
import os
import pickle
import subprocess
import sys
import zipfile

import pytest

from memtui.cli import main
from memtui.sources.common import files
from tests.conftest import REPO


def _summary(capsys, path):
    code = main(["summary", str(path), "--json"])
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return code, lines[0]


def _snapshot_bytes() -> bytes:
    return pickle.dumps({"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 1, "size": 512, "stream": 0}]]}, protocol=4)


def test_a_fifo_is_refused_at_once_not_read(tmp_path):
    fifo = tmp_path / "capture.pickle"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "memtui.cli", "summary", str(fifo)],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "a FIFO (named pipe), not a capture file" in done.stderr


def test_a_fifo_inside_a_folder_is_skipped_not_read(tmp_path):
    os.mkfifo(tmp_path / "memscope_dump_1.csv")
    os.mkfifo(tmp_path / "memory_record.csv")
    os.mkfifo(tmp_path / "profiler_info_0.json")
    done = subprocess.run([sys.executable, "-m", "memtui.cli", "summary", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"memtui: {tmp_path}: ")


def test_an_unreadable_file_says_permission_denied(tmp_path, capsys, monkeypatch):
    path = tmp_path / "capture.pickle"
    path.write_bytes(_snapshot_bytes())
    real_open = os.open

    def refusing_open(name, flags, *args, **kwargs):
        if os.fspath(name) == str(path):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(files.os, "open", refusing_open)
    code, line = _summary(capsys, path)
    assert code == 2
    assert line == f"memtui: {path}: cannot read it (permission denied)"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_for_real(tmp_path, capsys):
    path = tmp_path / "capture.pickle"
    path.write_bytes(_snapshot_bytes())
    path.chmod(0)
    code, line = _summary(capsys, path)
    assert code == 2 and "permission denied" in line


def test_a_symlink_loop_is_named(tmp_path, capsys):
    loop = tmp_path / "loop.pickle"
    loop.symlink_to(loop)
    code, line = _summary(capsys, loop)
    assert code == 2 and "symbolic link loop" in line


def test_a_dangling_symlink_is_named(tmp_path, capsys):
    link = tmp_path / "gone.pickle"
    link.symlink_to(tmp_path / "nowhere.pickle")
    code, line = _summary(capsys, link)
    assert code == 2 and "symbolic link to a file that does not exist" in line


def _zip(data: bytes) -> bytes:
    import io
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("capture.pickle", data)
    return buffer.getvalue()


@pytest.mark.parametrize("name, pack", [
    ("gzip", gzip.compress), ("bzip2", bz2.compress), ("zip", _zip),
    ("zstd", lambda data: b"\x28\xb5\x2f\xfd" + data),
])
def test_a_compressed_capture_says_so(tmp_path, capsys, name, pack):
    path = tmp_path / "capture.pickle.packed"
    path.write_bytes(pack(_snapshot_bytes()))
    code, line = _summary(capsys, path)
    assert code == 2
    assert line.endswith(f"compressed with {name}: decompress it first")


@pytest.mark.parametrize("name", ["two\nlines.pickle", "red\x1b[31m.pickle",
                                  "title\x1b]0;pwned\x07.pickle"])
def test_a_file_name_from_outside_is_escaped_in_the_error(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_bytes(b"\x80\x04garbage")
    code, line = _summary(capsys, path)
    assert code == 2
    assert "\x1b" not in line and "\x07" not in line
    assert ascii(name)[1:-1] in line


def test_summary_escapes_names_from_the_file(tmp_path, capsys):
    """An unknown action named with an escape sequence shows in a warning, escaped."""
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 1, "size": 512, "stream": 0},
        {"action": "\x1b]0;pwned\x07evil\nline", "addr": 1, "size": 512, "stream": 0}]]},
        protocol=4))
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\nline" in out
